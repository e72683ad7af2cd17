"""Two processes under torchrun (gloo, CPU): each rank trains on its own stream shard and the
ranks stay in sync — their parameters are equal after every update because DDP averages the
gradients (the shards differ, so unsynchronised ranks would drift apart)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

WORKER = str(Path(__file__).with_name("train_worker.py"))


@pytest.mark.slow
def test_two_gloo_ranks_on_their_own_shards_keep_equal_parameters(tmp_path):
    out = tmp_path / "ddp"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        WORKER,
        str(out),
        "--steps",
        "3",
        "--checkpoint-every",
        "2",
        "--dump",
    ]
    p = subprocess.run(
        cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    assert p.returncode == 0, p.stderr[-3000:]
    r0 = torch.load(out / "rank0.pt", weights_only=True)
    r1 = torch.load(out / "rank1.pt", weights_only=True)
    assert r0["stream"] != r1["stream"]  # each rank read its own shard
    assert r0["params"].keys() == r1["params"].keys()
    for name in r0["params"]:
        torch.testing.assert_close(r0["params"][name], r1["params"][name], rtol=0, atol=0)
    # one checkpoint holds both ranks' stream states and memories
    state = torch.load(out / "checkpoints" / "step_00000003" / "train_state.pt", weights_only=True)
    assert state["world_size"] == 2 and len(state["ranks"]) == 2
    assert state["ranks"][0]["stream"] != state["ranks"][1]["stream"]
