"""PROPERTY: a trainer killed outright (SIGKILL) while it writes a checkpoint, again and again,
leaves a run that the next start cleans (no hidden partial checkpoint left) and resumes from the
last complete checkpoint to the uninterrupted run's losses, bit for bit.

The kill loop watches the run directory and sends SIGKILL the moment a new `.step_*.tmp-*`
directory appears — mid-write, whatever the write was doing."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

WORKER = str(Path(__file__).with_name("train_worker.py"))
ARGS = ("--steps", "24", "--checkpoint-every", "1")


def train_losses(out):
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [(r["step"], r["loss"]) for r in map(json.loads, lines) if r["kind"] == "train"]


def partial(out: Path) -> list[Path]:
    return (
        list((out / "checkpoints").glob(".step_*.tmp-*")) if (out / "checkpoints").is_dir() else []
    )


def kill_mid_checkpoint(out: Path, *args: str, sig=signal.SIGKILL) -> bool:
    """Start the worker and send `sig` as soon as a partial checkpoint appears; False when the
    run finished before one was seen."""
    proc = subprocess.Popen([sys.executable, WORKER, str(out), *ARGS, *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    seen = {p.name for p in partial(out)}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if {p.name for p in partial(out)} - seen:
            proc.send_signal(sig)
            proc.communicate(timeout=60)
            return proc.returncode
        time.sleep(0.001)
    proc.communicate(timeout=60)
    return False


@pytest.mark.slow
def test_kills_during_checkpoint_writes_leave_a_run_that_resumes_bit_for_bit(tmp_path):
    ref = subprocess.run([sys.executable, WORKER, str(tmp_path / "ref"), *ARGS],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert ref.returncode == 0, ref.stderr

    run = tmp_path / "run"
    kills = [kill_mid_checkpoint(run, *(("--resume",) if i else ())) for i in range(3)]
    assert any(k == -signal.SIGKILL for k in kills), "no checkpoint write was caught in flight"
    if kills[-1] == -signal.SIGKILL:
        assert partial(run), "a kill mid-write leaves its partial checkpoint behind"

    done = subprocess.run([sys.executable, WORKER, str(run), *ARGS, "--resume"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert partial(run) == []  # cleaned on the next start
    assert train_losses(run) == train_losses(tmp_path / "ref")


@pytest.mark.slow
def test_sigterm_during_a_checkpoint_write_finishes_it_and_exits_143(tmp_path):
    ref = subprocess.run([sys.executable, WORKER, str(tmp_path / "ref"), *ARGS],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert ref.returncode == 0, ref.stderr
    run = tmp_path / "run"
    code = kill_mid_checkpoint(run, sig=signal.SIGTERM)
    assert code == 128 + signal.SIGTERM, code
    assert partial(run) == []  # the write in flight completed; nothing half-written is left
    done = subprocess.run([sys.executable, WORKER, str(run), *ARGS, "--resume"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert train_losses(run) == train_losses(tmp_path / "ref")
