"""speed: the Table-9 comparison runs on a tiny model made here and reports its own metric names
(timings are measured, never asserted)."""

import json

import pytest
import torch
from click.testing import CliRunner

from probes.cli.main import cli
from probes.testing import tiny_checkpoint

torch.set_num_threads(1)


def test_speed_reports_per_token_times_and_their_ratio(tmp_path):
    model = tiny_checkpoint(tmp_path / "m", mem_len=16, tgt_len=8)
    r = CliRunner().invoke(
        cli,
        [
            "run",
            "speed",
            "--model",
            str(model),
            "--mem",
            "32",
            "--tokens",
            "16",
            "--repeats",
            "1",
            "--out",
            str(tmp_path / "out"),
            "--json",
        ],
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [b["mem_len"] for b in doc["bins"]] == [4, 8, 16, 32]  # mem/8 … mem
    for b in doc["bins"]:
        assert b["attn_len"] == b["mem_len"] + 8
        assert b["cached_ms_per_token"] > 0 and b["recompute_ms_per_token"] > 0
        # ms = 1e3 · s on both sides: equal up to rounding (exact equality flakes)
        assert b["ratio"] == pytest.approx(b["recompute_ms_per_token"] / b["cached_ms_per_token"])
        assert b["ratio_range"][0] <= b["ratio_range"][1]
    assert doc["metrics"]["lengths"] == [12, 16, 24, 40]
    for name in doc["metrics"]:
        assert name in doc["metric_docs"], name
    assert doc["plots"] == ["speed.png"]


def test_speed_needs_a_memory(tmp_path):
    model = tiny_checkpoint(tmp_path / "m0", mem_len=0, tgt_len=8)
    r = CliRunner().invoke(cli, ["run", "speed", "--model", str(model), "--out", str(tmp_path)])
    assert r.exit_code == 2 and "nothing to compare" in r.stderr
