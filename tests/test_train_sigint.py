"""PROPERTY: `probe train` stopped by Ctrl-C (SIGINT) finishes the step in flight, saves a
checkpoint of it and exits 130 without a traceback (resuming from such a checkpoint is
tests/test_train_resume.py's)."""

import json
import signal
import subprocess
import sys
import time

import pytest
from test_train_disk_full import ROOT, TINY


@pytest.mark.slow
def test_sigint_of_probe_train_checkpoints_the_last_step_and_exits_130(tmp_path):
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "probes.cli", "train", "--out", str(out), *TINY[:-5],
            "--steps", "100000", "--threads", "1", "--quiet"]  # fmt: skip
    proc = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (out / "metrics.jsonl").is_file():
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    record = json.loads((out / "run.json").read_text())
    ckpts = sorted(p.name for p in (out / "checkpoints").iterdir() if not p.name.startswith("."))
    assert ckpts, "SIGINT saves a checkpoint"
    logged = [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()
              if json.loads(x)["kind"] == "train"]  # fmt: skip
    assert int(ckpts[-1].split("_")[-1]) == logged[-1]  # the checkpoint is of the last step
    assert record["config"]["steps"] == 100000
