"""A finished model's compact metrics.jsonl reads back to every step's loss and grad norm."""

import json
import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from probes.training.compare import compare_runs
from txl.metrics_log import COLUMNS_KIND, MetricsLog, compact, dumps, expand


def log(losses, steps=None, every=3):
    steps = steps or list(range(1, len(losses) + 1))
    out = []
    for s, loss in zip(steps, losses, strict=True):
        out.append({"kind": "train", "step": s, "loss": loss, "grad_norm": 2 * loss, "lr": 0.1})
        if s % every == 0:
            out.append({"kind": "eval", "step": s, "nll": 1.0 / s, "recall": [{"lo": 1, "hi": 2}]})
    return out


float32s = st.floats(width=32, allow_nan=False, allow_infinity=False)


@given(st.lists(float32s, min_size=1, max_size=60))
def test_compact_then_expand_keeps_every_step_and_every_evaluation(losses):
    records = json.loads("[" + ",".join(dumps(log(losses)).splitlines()) + "]")
    back = expand(compact(records, keep_every=7))
    assert [(r["step"], r["loss"], r["grad_norm"]) for r in back if r["kind"] == "train"] == [
        (r["step"], r["loss"], r["grad_norm"]) for r in records if r["kind"] == "train"
    ]
    assert [r for r in back if r["kind"] == "eval"] == [r for r in records if r["kind"] == "eval"]


def test_values_that_are_not_float32_and_non_finite_ones_survive_exactly():
    losses = [0.1, math.pi, None, 2.5]  # 0.1 and pi are float64 values: packed as float64
    records = [
        {"kind": "train", "step": s, "loss": v, "grad_norm": v}
        for s, v in zip((3, 5, 9, 10), losses, strict=True)
    ]
    back = expand(compact(records, keep_every=100))
    assert [(r["step"], r["loss"]) for r in back] == [(3, 0.1), (5, math.pi), (9, None), (10, 2.5)]


def test_the_compact_log_is_a_fraction_of_the_full_one():
    rng = np.random.default_rng(0)
    records = log(rng.random(5000).astype(np.float32).tolist(), every=1000)
    for r in records:
        r.update(tokens_per_s=12345.678, elapsed_s=1.5, step_s=0.25, mfu=None, tokens=2048)
    full, small = dumps(records), dumps(compact(records))
    assert len(small) < len(full) / 5
    assert sum(r["kind"] == COLUMNS_KIND for r in compact(records)) == 1


def test_train_compare_finds_a_compact_log_identical_to_the_full_one(tmp_path):
    records = log(np.linspace(3.0, 1.0, 250, dtype=np.float32).tolist(), every=50)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "metrics.jsonl").write_text(dumps(records))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "metrics.jsonl").write_text(
        MetricsLog(tmp_path / "full" / "metrics.jsonl").compact_text()
    )
    c = compare_runs(tmp_path / "full", tmp_path / "model")
    assert c.verdict == "identical" and c.n_loss_identical == 250


def test_a_malformed_columns_record_is_a_one_line_error(tmp_path):
    import pytest

    from probes.training.compare import RunMetricsError, read_metrics

    bad = {"kind": COLUMNS_KIND, "step": 3, "steps": [1, 3], "loss": {"dtype": "<f4", "data": "@@"}}
    (tmp_path / "metrics.jsonl").write_text(json.dumps(bad) + "\n")
    with pytest.raises(RunMetricsError, match="malformed"):
        read_metrics(tmp_path)
