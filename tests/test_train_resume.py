"""PROPERTY: on CPU with a fixed thread count, a run killed (SIGTERM, and SIGKILL between
checkpoints) and resumed computes the same per-step losses as an uninterrupted run, bit for bit;
steps replayed after a SIGKILL replace their metrics.jsonl lines rather than duplicating them.

Each run is a subprocess (tests/train_worker.py, one thread) whose toy stream sends the signal to
its own process when it hands out a given batch, so the kill lands at an exact step."""

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = str(Path(__file__).with_name("train_worker.py"))


def worker(out, *args):
    return subprocess.run(
        [sys.executable, WORKER, str(out), "--steps", "8", "--checkpoint-every", "4", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def train_records(out):
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == "train"]


@pytest.mark.slow
def test_killed_and_resumed_run_reproduces_the_uninterrupted_losses_bit_for_bit(tmp_path):
    ref = worker(tmp_path / "ref")
    assert ref.returncode == 0, ref.stderr

    run = tmp_path / "run"
    # SIGTERM while step 2 is in flight: the step finishes, a checkpoint is saved, exit 128+15
    p = worker(run, "--kill", "TERM@2")
    assert p.returncode == 128 + signal.SIGTERM, p.stderr
    assert "SIGTERM at step 2" in p.stderr
    assert [r["step"] for r in train_records(run)] == [1, 2]

    # resumed, then SIGKILL while fetching step 6: last checkpoint is step 4, step 5 is logged
    p = worker(run, "--resume", "--kill", "KILL@6")
    assert p.returncode == -signal.SIGKILL, p.stderr
    assert [r["step"] for r in train_records(run)] == [1, 2, 3, 4, 5]
    assert sorted(c.name for c in (run / "checkpoints").iterdir()) == [
        "step_00000002",
        "step_00000004",
    ]

    # resumed from step 4: step 5 is replayed and replaces its line
    p = worker(run, "--resume")
    assert p.returncode == 0, p.stderr
    got, want = train_records(run), train_records(tmp_path / "ref")
    assert [r["step"] for r in got] == list(range(1, 9))
    assert [r["loss"] for r in got] == [r["loss"] for r in want]
    assert [r["grad_norm"] for r in got] == [r["grad_norm"] for r in want]
    starts = json.loads((run / "run.json").read_text())["starts"]
    assert [s["resumed_from"] for s in starts] == [None, 2, 4]
