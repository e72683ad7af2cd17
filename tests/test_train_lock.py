"""INVARIANT: one training run directory, one trainer. The first `probe train --out X` holds an
exclusive lock (flock on X/.lock) for the run's life; a second one on X — started fresh or with
--resume — exits 2 with one line naming X and that another trainer holds it, and changes
nothing in X. When the first ends, X is free again.

Two child processes: a long tiny training (tests/train_worker.py) and the second trainer."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

WORKER = str(Path(__file__).with_name("train_worker.py"))


def start_long_training(out: Path) -> subprocess.Popen:
    argv = [sys.executable, WORKER, str(out), "--steps", "100000", "--checkpoint-every", "5"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if (out / "metrics.jsonl").is_file() and (out / "checkpoints").is_dir():
            return proc  # training, with a checkpoint on disk
        if proc.poll() is not None:
            raise AssertionError(f"the first trainer ended early: {proc.communicate()}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the first trainer never started")


def assert_refused(p: subprocess.CompletedProcess, out: Path) -> None:
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert str(out) in lines[0] and "another trainer holds it" in lines[0]


def test_a_second_trainer_on_the_same_out_is_refused_while_the_first_runs(tmp_path):
    out = tmp_path / "run"
    first = start_long_training(out)
    try:
        run_json = (out / "run.json").read_text()
        # the probe CLI, fresh: refused before it builds anything
        cli = subprocess.run(
            [sys.executable, "-m", "probes.cli", "train", "--out", str(out), "--steps", "2",
             "--device", "cpu", "--quiet"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert_refused(cli, out)
        # the training loop itself (txl.train), resuming: refused too
        again = subprocess.run(
            [sys.executable, WORKER, str(out), "--steps", "100000", "--resume"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert_refused(again, out)
        assert (out / "run.json").read_text() == run_json  # nothing changed
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=120)
    assert first.returncode == 128 + signal.SIGTERM
    steps = [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, len(steps) + 1))  # one writer: no interleaved lines
    assert not (out / ".lock").exists()  # released, and the directory is free again
    from txl.run_dir import is_locked

    assert not is_locked(out)


def test_the_lock_is_one_mechanism_for_training_and_probe_runs(tmp_path):
    """DirLock refuses a second holder in-process too (flock is per open file) and names it."""
    import pytest

    from probes.framework import results
    from txl.run_dir import DirInUse, DirLock, is_locked

    with DirLock(tmp_path / "d", "another trainer"):
        assert is_locked(tmp_path / "d") and results.is_live(tmp_path / "d")
        with pytest.raises(DirInUse, match="another trainer holds it"):
            DirLock(tmp_path / "d", "another trainer").acquire()
    assert not is_locked(tmp_path / "d") and list((tmp_path / "d").iterdir()) == []
