"""INVARIANT: a disk that fills up during `probe run` leaves a run that reads as failed, never as
complete. Wherever the full disk strikes (the first run.json, a sample, tokens.npz, summary.json,
the final run.json) the command exits 2 with one line naming the file and the reason; the run
directory is gone if not even run.json could be written, and otherwise its run.json says
status "error" with the reason, there is no summary.json, and `probe report` skips it.

Each case is a child process (tests/enospc_worker.py) whose K-th write under --out raises
ENOSPC, as a full disk does."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from probes.cli.main import cli
from probes.testing import tiny_checkpoint

WORKER = str(Path(__file__).with_name("enospc_worker.py"))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("full") / "tiny", mem_len=16, tgt_len=16)


def run_filling(model, root: Path, k: int):
    out, log = root / "res", root / "writes.json"
    argv = ["run", "fact-swap", "--model", str(model), "--out", str(out), "--n", "4",
            "--threads", "1", "--quiet"]  # fmt: skip
    p = subprocess.run(
        [sys.executable, WORKER, str(k), str(log), str(out), "--", *argv],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return p, out, json.loads(log.read_text())


@pytest.fixture(scope="module")
def writes(model, tmp_path_factory):
    """The files a run writes, one entry per write, in order (nothing fails)."""
    p, _, names = run_filling(model, tmp_path_factory.mktemp("count"), 0)
    assert p.returncode in (0, 1), p.stderr
    return names


@pytest.mark.parametrize(
    "where", ["first run.json", "a sample", "tokens.npz", "summary.json", "final run.json"]
)
def test_a_full_disk_ends_the_run_as_error_naming_the_file(model, writes, tmp_path, where):
    k = {
        "first run.json": 1,
        "a sample": writes.index("samples.jsonl") + 2,  # the second sample
        "tokens.npz": writes.index("tokens.npz") + 3,
        "summary.json": writes.index("summary.json") + 1,
        "final run.json": len(writes),
    }[where]
    name = writes[k - 1]
    p, out, _ = run_filling(model, tmp_path, k)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("error: cannot write ") and name in lines[0], lines[0]
    assert "No space left on device" in lines[0]
    runs = list(out.glob("fact-swap/*/*"))
    if where == "first run.json":
        assert runs == []  # nothing left behind
        return
    (run_dir,) = runs
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "error" and "No space left on device" in record["error"]
    assert not (run_dir / "summary.json").exists()
    assert not [p.name for p in run_dir.iterdir() if ".tmp-" in p.name or p.name == ".lock"]
    r = CliRunner().invoke(cli, ["report", str(run_dir)])
    assert r.exit_code == 2 and "(error)" in r.stderr
