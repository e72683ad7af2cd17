"""The float kernels a run computes with (probes/framework/kernels.py): `probe` restarts itself
with the mode a run asks for or a rerun recorded, run.json records the mode in effect, a process
that lacks an explicit mode refuses it in one line, and `probe rerun` of a directory tree reruns
every run beneath it, each under its own kernels. That portable kernels give the same bits on
other CPUs is tests/test_kernels_other_cpus.py's (emulated CPUs, `nox -s cpus`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from probes.api.probe_base import ProbeInputError
from probes.cli.main import cli
from probes.framework import kernels
from probes.framework.runner import run
from probes.testing import tiny_checkpoint

x86_64 = pytest.mark.skipif(not kernels.is_x86_64(), reason="portable kernels pin x86-64 paths")
SMALL = ["--distance", "8-14", "--n", "2", "--threads", "1", "--json", "--quiet"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(tiny_checkpoint(tmp_path_factory.mktemp("m") / "tiny", mem_len=16, tgt_len=16))


def probe(*args: str, env: dict) -> subprocess.CompletedProcess:
    """The `probe` command as a user starts it (a process of its own, free to restart): the
    installed script, else `python -m probes.cli`."""
    script = Path(sys.executable).with_name("probe")
    argv = [str(script)] if script.is_file() else [sys.executable, "-m", "probes.cli"]
    argv += args
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)


def recorded(stdout: str) -> dict:
    return json.loads((Path(json.loads(stdout)["run_dir"]) / "run.json").read_text())


def test_the_portable_environment_pins_every_library_and_keeps_other_tunables():
    env = kernels.portable_environment({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2", "A": "1"})
    assert kernels.in_effect(env) == ("portable" if kernels.is_x86_64() else "native")
    assert env["GLIBC_TUNABLES"] == f"glibc.malloc.arena_max=2:{kernels.GLIBC_HWCAPS}"
    assert env["A"] == "1" and env["ATEN_CPU_CAPABILITY"] == "default"
    assert env["NPY_DISABLE_CPU_FEATURES"] == kernels.numpy_dispatch_targets()
    for key in (*kernels.FIXED, "NPY_DISABLE_CPU_FEATURES"):  # any one missing: not portable
        assert kernels.in_effect({k: v for k, v in env.items() if k != key}) == "native"
    native = kernels.native_environment(env)
    assert native == {"GLIBC_TUNABLES": "glibc.malloc.arena_max=2", "A": "1"}
    assert kernels.in_effect(native) == "native"
    assert kernels.portable_environment(env) == env  # adding twice changes nothing


def test_settings_put_into_a_running_process_do_not_make_it_portable(monkeypatch):
    """glibc, numpy and torch read their settings when they load: what counts is the
    environment the process started with, not os.environ now."""
    started = kernels.in_effect()
    for key, value in kernels.portable_environment().items():
        monkeypatch.setenv(key, value)
    assert kernels.in_effect() == started == "native"  # pytest started without them


@x86_64
def test_probe_restarts_itself_with_the_kernels_a_run_asks_for(model, tmp_path):
    native = kernels.native_environment()
    r = probe(
        "run", "fact-swap", "--model", model, "--out", str(tmp_path / "p"), *SMALL, env=native
    )
    assert r.returncode == 0, r.stderr
    record = recorded(r.stdout)
    assert record["options"]["kernels"] == "portable"  # the default, though started without
    assert record["machine"]["cpu_kernels"] == "DEFAULT"  # torch's kernels took the setting
    assert "--kernels" in record["command"] and "portable" in record["command"]
    started = "probe" if Path(sys.executable).with_name("probe").is_file() else "__main__.py"
    assert record["argv"][:3] == [started, "run", "fact-swap"]  # as typed, not the restart's

    portable = kernels.portable_environment()
    r = probe("run", "fact-swap", "--model", model, "--out", str(tmp_path / "n"),
              "--kernels", "native", *SMALL, env=portable)  # fmt: skip
    assert r.returncode == 0, r.stderr
    record = recorded(r.stdout)
    assert record["options"]["kernels"] == "native"


@x86_64
def test_a_rerun_takes_the_kernels_its_run_recorded_unless_told_otherwise(model, tmp_path):
    """Whatever the shell's environment: a portable run reruns portable (and matches), a
    native one native; `--kernels` recomputes a run under the other ones, and says so."""
    for mode, shell in (
        ("portable", kernels.native_environment()),
        ("native", kernels.portable_environment()),
    ):
        r = probe("run", "fact-swap", "--model", model, "--out", str(tmp_path / mode),
                  "--kernels", mode, *SMALL, env=shell)  # fmt: skip
        assert r.returncode == 0, r.stderr
        run_dir = json.loads(r.stdout)["run_dir"]
        r = probe("rerun", run_dir, "--out", str(tmp_path / f"{mode}-again"), "--json",
                  "--quiet", env=shell)  # fmt: skip
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["match"] == "exact", doc["differences"][:3]
        again = json.loads((Path(doc["rerun"]) / "run.json").read_text())
        assert again["options"]["kernels"] == mode
    r = probe("rerun", run_dir, "--kernels", "portable", "--out", str(tmp_path / "other"),
              "--json", "--quiet", env=kernels.native_environment())  # fmt: skip
    assert r.returncode in (0, 1), r.stderr  # the numbers may move: that is what it shows
    doc = json.loads(r.stdout)
    assert json.loads((Path(doc["rerun"]) / "run.json").read_text())["options"]["kernels"] == (
        "portable"
    )
    assert "rerun with portable kernels (--kernels); the original ran native ones" in doc["notes"]


def test_a_run_at_the_default_thread_count_records_the_count_it_computed_with(model, tmp_path):
    """The default count depends on the machine and its load: a run resolves it once, into
    the options run.json records and the command that repeats the run."""
    from txl.process_rank import usable_cores

    r = CliRunner().invoke(cli, ["run", "fact-swap", "--model", model, "--out", str(tmp_path),
                                 *[a for a in SMALL if a not in ("--threads", "1")]])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    record = recorded(r.stdout)
    count = record["options"]["threads"]
    assert isinstance(count, int) and 1 <= count <= usable_cores()
    assert record["threads"] == count
    assert record["command"][record["command"].index("--threads") + 1] == str(count)


@x86_64
def test_a_rerun_computes_at_the_thread_count_its_run_recorded(tmp_path):
    """MKL's threaded products split some shapes by the thread count (a Llama's projections of
    300 tokens do, at 1 and 4 threads, portable kernels or not), so a run records the count it
    computed with and its rerun computes with it whatever the rerunning shell or machine would
    choose — also a run recorded before the options held the default count resolved (its
    count only at run.json's top level)."""
    pytest.importorskip("transformers")
    from probes.testing import tiny_transformers

    llama = f"hf:{tiny_transformers(tmp_path / 'llama', 'llama')}"
    shell = {**kernels.native_environment(), "OMP_NUM_THREADS": "1"}
    r = probe("run", "fact-swap", "--model", llama, "--distance", "8-14,200-280", "--n", "2",
              "--threads", "2", "--out", str(tmp_path / "o"), "--json", "--quiet", env=shell)  # fmt: skip
    assert r.returncode == 0, r.stderr
    run_dir = json.loads(r.stdout)["run_dir"]
    record = json.loads((Path(run_dir) / "run.json").read_text())
    assert record["threads"] == 2
    record["options"]["threads"] = None  # as a run at the default count recorded it before
    (Path(run_dir) / "run.json").write_text(json.dumps(record))
    r = probe("rerun", run_dir, "--out", str(tmp_path / "again"), "--json", "--quiet", env=shell)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["match"] == "exact", doc["differences"][:3]
    assert json.loads((Path(doc["rerun"]) / "run.json").read_text())["threads"] == 2


def test_a_mode_this_process_lacks_is_refused_in_one_line(model, tmp_path):
    """Inside another Python process (this test's) nothing restarts: an explicit mode it lacks
    is refused before anything is written, from Python and from the CLI alike."""
    lacking = "native" if kernels.in_effect() == "portable" else "portable"
    with pytest.raises(ProbeInputError, match=f"--kernels {lacking}") as e:
        run("fact-swap", model=model, kernels=lacking, out=str(tmp_path), progress=False)
    assert "\n" not in str(e.value)
    r = CliRunner().invoke(
        cli, ["run", "fact-swap", "--model", model, "--out", str(tmp_path), "--kernels", lacking]
    )
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not any(tmp_path.iterdir())  # nothing written
    r = CliRunner().invoke(cli, ["run", "fact-swap", "--model", model, "--kernels", "fast"])
    assert r.exit_code == 2 and "portable" in r.stderr  # click names the choices


def test_rerun_of_a_tree_reruns_every_run_directory_beneath_it(model, tmp_path):
    """`probe rerun results/curated/*/`: a directory without run.json stands for the run
    directories beneath it (a diagnose run's sub-runs are its own), one line each, exit 1
    when one is refused; a directory with none is refused in one line."""
    invoke = CliRunner().invoke
    for seed in ("0", "1"):
        r = invoke(cli, ["run", "fact-swap", "--model", model, "--out", str(tmp_path / "tree"),
                         "--seed", seed, *SMALL])  # fmt: skip
        assert r.exit_code == 0, r.stderr
    r = invoke(cli, ["rerun", str(tmp_path / "tree"), "--out", str(tmp_path / "again"), "--json"])
    assert r.exit_code == 0, r.stdout
    doc = json.loads(r.stdout)
    assert [x["match"] for x in doc["reruns"]] == ["exact", "exact"] and doc["passed"]

    broken = tmp_path / "tree" / "fact-swap" / "broken"
    broken.mkdir()
    (broken / "run.json").write_text("{")
    r = invoke(cli, ["rerun", str(tmp_path / "tree"), "--out", str(tmp_path / "again")])
    assert r.exit_code == 1
    lines = r.stdout.strip().splitlines()
    assert sum(line.startswith("exact") for line in lines) == 2
    assert any(line.startswith("refused") and "broken" in line for line in lines)
    assert lines[-1] == "2 exact, 1 refused of 3 runs"

    (tmp_path / "empty").mkdir()
    r = invoke(cli, ["rerun", str(tmp_path / "empty")])
    assert r.exit_code == 2 and "holds no run directory" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
