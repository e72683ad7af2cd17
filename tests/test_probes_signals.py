"""A probe run stopped by a signal ends in a state a reader can trust: SIGTERM records
"interrupted", says so on stderr and exits 143; after SIGKILL run.json still says "running", but
nobody holds the directory's lock, so `probe report` calls it dead (and reports the others)."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from probes.testing import tiny_checkpoint


def start_run(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    model = tiny_checkpoint(tmp_path / "tiny", mem_len=16, tgt_len=16)
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "probes.cli", "run", "fact-swap", "--model", str(model),
            "--out", str(out), "--n", "400", "--threads", "1", "--quiet"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = list(out.glob("fact-swap/*/*/samples.jsonl"))
        if found:  # the run is scoring
            return proc, found[0].parent
        if proc.poll() is not None:
            pytest.fail(f"the run ended early: {proc.communicate()}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail("the run never started scoring")


def test_sigterm_records_interrupted_says_so_and_exits_143(tmp_path):
    proc, run_dir = start_run(tmp_path)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143
    assert err.strip().splitlines()[-1] == "terminated (SIGTERM)"
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"


def test_sigint_records_interrupted_says_so_and_exits_130(tmp_path):
    proc, run_dir = start_run(tmp_path)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("interrupted")
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "interrupted" and not (run_dir / "summary.json").exists()


def test_a_killed_run_reads_as_dead_and_report_lists_it_as_skipped(tmp_path):
    from click.testing import CliRunner

    from probes.cli.main import cli
    from probes.framework.results import status

    proc, run_dir = start_run(tmp_path)
    proc.kill()
    proc.communicate(timeout=60)
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "running"  # nothing could write the end
    assert status(run_dir, record) == "dead"
    r = CliRunner().invoke(cli, ["report", str(run_dir)])
    assert r.exit_code == 2 and "dead" in r.stderr
