"""PROPERTY: a training run whose disk fills up while it logs ends in one line naming the file
(exit 2), keeps its last checkpoint, and `--resume` continues it once there is room."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = ("--set", "model.d_model=16", "--set", "model.d_inner=32", "--set", "model.n_head=2",
        "--set", "model.d_head=8", "--set", "batch_size=2", "--set", "eval_every=100",
        "--set", "checkpoint_every=2", "--steps", "6", "--threads", "1", "--quiet")  # fmt: skip

# a child that makes the FAIL_AT-th metrics.jsonl append fail with ENOSPC, then runs the CLI
CHILD = """
import errno, sys
from txl import metrics_log
calls, fail_at = [0], int(sys.argv[1])
append = metrics_log.MetricsLog.append
def full(self, record):
    calls[0] += 1
    if calls[0] == fail_at:
        raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
    append(self, record)
metrics_log.MetricsLog.append = full
from probes.cli.main import main
sys.argv = ["probe", *sys.argv[2:]]
main()
"""


def train(out, *extra, fail_at=0):
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(fail_at), "train", "--out", str(out), *TINY, *extra],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip


@pytest.mark.slow
def test_a_full_disk_while_logging_is_one_line_and_the_run_resumes(tmp_path):
    out = tmp_path / "run"
    r = train(out, fail_at=4)  # the 4th step's line: after the checkpoint at step 2
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.count("\n") == 1 and "metrics.jsonl" in r.stderr and "--resume" in r.stderr
    assert (out / "checkpoints" / "step_00000002").is_dir()
    done = train(out, "--resume")
    assert done.returncode == 0, done.stderr[-2000:]
    steps = [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()
             if json.loads(x)["kind"] == "train"]  # fmt: skip
    assert steps == list(range(1, 7))
