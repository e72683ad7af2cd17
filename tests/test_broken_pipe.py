"""INVARIANT: a reader that stops reading is not a failure. When stdout's reader goes away
(`probe report RUN | head -1`, `probe run ... | head -1`, with or without --json) the command
exits 141 — as a process killed by SIGPIPE — quietly, never 1 ("a run failed its own check") or
3 ("internal error"), and what it wrote to disk is complete. A command started with stdout
closed (`>&-`) is refused before it does anything: exit 2, one line, nothing written."""

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from probes.cli.errors import EXIT_PIPE
from probes.cli.main import cli
from probes.testing import tiny_checkpoint

PROBE = [sys.executable, "-m", "probes.cli"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """(model dir, a finished run directory)."""
    root = tmp_path_factory.mktemp("pipe")
    model = tiny_checkpoint(root / "tiny", mem_len=16, tgt_len=16)
    r = CliRunner().invoke(
        cli,
        ["run", "fact-swap", "--model", str(model), "--out", str(root / "res"), "--n", "4",
         "--threads", "1", "--json"],
    )  # fmt: skip
    assert r.exit_code in (0, 1), r.output
    return model, json.loads(r.stdout)["run_dir"]


def closed_reader(argv):
    """Run `argv` with a stdout pipe whose only reader is closed at once: its writes get EPIPE."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_report_into_a_closed_pipe_exits_141_quietly(finished, json_flag):
    code, err = closed_reader([*PROBE, "report", finished[1], *json_flag])
    assert code == EXIT_PIPE == 141, err
    assert err == ""  # no traceback, no "Exception ignored"


def test_run_into_a_closed_pipe_exits_141_and_the_run_is_complete(finished, tmp_path):
    model, _ = finished
    code, err = closed_reader(
        [*PROBE, "run", "fact-swap", "--model", str(model), "--out", str(tmp_path / "res"),
         "--n", "4", "--threads", "1", "--quiet"]
    )  # fmt: skip
    assert code == 141, err
    assert err == ""
    (run_json,) = tmp_path.glob("res/fact-swap/*/*/run.json")
    assert json.loads(run_json.read_text())["status"] in ("complete", "failed-check")
    assert (run_json.parent / "summary.json").is_file()


def test_a_command_started_with_stdout_closed_is_refused_and_writes_nothing(finished, tmp_path):
    model, _ = finished
    argv = [*PROBE, "run", "fact-swap", "--model", str(model), "--out", str(tmp_path / "res"),
            "--n", "4", "--json"]  # fmt: skip
    p = subprocess.run(
        argv, stderr=subprocess.PIPE, text=True, timeout=300, preexec_fn=lambda: os.close(1)
    )
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "stdout is closed" in lines[0], p.stderr
    assert not (tmp_path / "res").exists()
