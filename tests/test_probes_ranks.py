"""One probe run across processes (txl.process_rank): two gloo ranks under torchrun score
their shares of the pairs and rank 0 writes the one run directory, with every number bitwise
equal to a single-process run; probes that cannot divide their scoring are refused."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from probes.testing import tiny_checkpoint

RUN = ["run", "fact-swap", "--threads", "1", "--json", "-n", "40"]  # -n: see options.py
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _run_dir(out: Path) -> Path:
    dirs = [p.parent for p in out.rglob("run.json")]
    assert len(dirs) == 1, dirs
    return dirs[0]


def _samples(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_two_gloo_ranks_give_a_single_process_run_bit_for_bit(tmp_path):
    from probes.adapters import txl as adapters

    model = tiny_checkpoint(tmp_path / "m")
    lm = adapters.load(model)
    chunks = -(-160 // (lm.max_rows(lm.default_geometry()) // 4))  # 4 bins × 40 pairs, 4 rows
    assert chunks >= 3  # so both ranks score, rank 0 twice
    args = [*RUN, "--model", str(model)]
    one = subprocess.run(
        [sys.executable, "-m", "probes.cli", *args, "--out", str(tmp_path / "one")],
        capture_output=True,
        text=True,
        timeout=300,
        env=ENV,
    )
    assert one.returncode == 0, one.stderr[-2000:]
    two = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            "-m",
            "probes.cli",
            *args,
            "--out",
            str(tmp_path / "two"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=ENV,
    )
    assert two.returncode == 0, two.stderr[-3000:]
    a, b = json.loads(one.stdout), json.loads(two.stdout)  # rank 0 alone prints: one document
    d1, d2 = _run_dir(tmp_path / "one"), _run_dir(tmp_path / "two")
    assert b["run_dir"] == str(d2) and b["n_pairs"] == 160
    for key in set(a) | set(b):
        if key not in ("run_dir", "elapsed_s"):
            assert a[key] == b[key], key
    assert _samples(d1) == _samples(d2)  # every pair, in order, to the last bit
    t1, t2 = np.load(d1 / "tokens.npz"), np.load(d2 / "tokens.npz")
    assert sorted(t1.files) == sorted(t2.files)
    for name in t1.files:
        assert np.array_equal(t1[name], t2[name], equal_nan=t1[name].dtype.kind == "f"), name
    record = json.loads((d2 / "run.json").read_text())
    assert record["processes"] == {"world_size": 2} and record["status"] == "complete"
    assert sorted(p.name for p in d1.iterdir()) == sorted(p.name for p in d2.iterdir())


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["run", "recl", "--quick"], "does not divide its scoring"),
        (["diagnose", "--quick"], "runs in one process"),
    ],
)
def test_a_probe_that_cannot_divide_its_scoring_is_refused_under_several_ranks(
    tmp_path, args, fragment
):
    env = {**ENV, "WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}
    r = subprocess.run(
        [sys.executable, "-m", "probes.cli", *args, "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and fragment in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()
    quiet = subprocess.run(  # rank 1 leaves the one line to rank 0
        [sys.executable, "-m", "probes.cli", *args, "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "RANK": "1", "LOCAL_RANK": "1"},
        cwd=tmp_path,
    )
    assert quiet.returncode == 2 and quiet.stderr == ""


def test_a_process_knows_its_place_from_torchrun_without_importing_torch():
    """One declaration of the place (txl.process_rank.ProcessRank), read from torchrun's
    environment before torch is loaded; probe runs and training's txl.distributed take the same."""
    code = (
        "import sys; from txl.process_rank import ProcessRank; "
        "r = ProcessRank.from_env(); assert r.share(8) == 4; "
        "assert (r.rank, r.world_size, r.local_rank, r.local_world_size) == (1, 3, 1, 2); "
        "assert r.enabled and not r.is_main; assert 'torch' not in sys.modules"
    )
    env = {**os.environ, "RANK": "1", "WORLD_SIZE": "3", "LOCAL_RANK": "1"}
    env["LOCAL_WORLD_SIZE"] = "2"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)


def test_the_ranks_of_a_run_resolve_one_default_thread_count_whatever_the_load(monkeypatch):
    """Each rank resolves the default count itself and rank 0 records its own: under torchrun
    the count is the rank's share of the usable cores, read without the load average (which
    each rank would read at its own moment); one process still leaves the busy cores out."""
    from txl import process_rank

    monkeypatch.setattr(process_rank, "usable_cores", lambda: 8)
    for k, v in {
        "RANK": "1",
        "WORLD_SIZE": "2",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
    }.items():
        monkeypatch.setenv(k, v)
    counts = set()
    for load in (0.0, 3.7, 7.9):
        monkeypatch.setattr(process_rank.os, "getloadavg", lambda load=load: (load, 0.0, 0.0))
        counts.add(process_rank.default_threads())
    assert counts == {4}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(k)
    monkeypatch.setattr(process_rank.os, "getloadavg", lambda: (3.7, 0.0, 0.0))
    assert process_rank.default_threads() == 5
