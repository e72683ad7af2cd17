"""The recall-by-distance evaluation that `probe train` runs on held-out synth text."""

import json

import numpy as np
import pytest
import torch

from probes.training.recall_eval import (
    RecallEvalConfig,
    default_edges,
    make_buckets,
    make_recall_eval,
    wilson,
)
from synth.generate import MIN_DISTANCE
from synth.language import Language
from txl.config import TXLConfig
from txl.model import TransformerXL


@pytest.fixture(scope="module")
def lang():
    return Language.default()


def test_default_edges_never_straddle_the_training_attention_span():
    edges = default_edges(64, 256)
    assert edges[0] == MIN_DISTANCE and 320 in edges and edges[-1] == 640
    assert list(edges) == sorted(set(edges))


def test_every_fact_lies_at_a_distance_inside_its_bucket(lang):
    cfg = RecallEvalConfig(n_examples=6, extra_facts=1)
    buckets = make_buckets(lang, (6, 16, 40, 100), cfg)
    for b in buckets:
        assert ((b.distances >= b.lo) & (b.distances < b.hi)).all()
        assert b.tokens.shape == b.doc_ids.shape == (6, b.hi + 32)
        for row, answer in enumerate(b.answers):
            assert lang.is_value_token(b.tokens[row, answer]).all()
            assert not b.filler[row, answer].any()


def test_held_out_examples_are_the_same_at_every_evaluation(lang):
    cfg = RecallEvalConfig(n_examples=3)
    a, b = make_buckets(lang, (6, 16), cfg), make_buckets(lang, (6, 16), cfg)
    np.testing.assert_array_equal(a[0].tokens, b[0].tokens)
    c = make_buckets(lang, (6, 16), RecallEvalConfig(n_examples=3, seed=1))
    assert not np.array_equal(a[0].tokens, c[0].tokens)


def test_callback_reports_accuracy_by_bucket_and_leaves_the_model_untouched(lang):
    torch.manual_seed(0)
    model = TransformerXL(
        TXLConfig(
            lang.vocab.size,
            n_layer=1,
            d_model=16,
            n_head=2,
            d_head=8,
            d_inner=32,
            tgt_len=8,
            mem_len=8,
        )
    )
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fn = make_recall_eval(
        lang, model.config, {"n_examples": 3, "edges": [6, 16, 24], "mem_len": 24}
    )
    out = fn(model, 0)
    assert [(r["lo"], r["hi"], r["inside"]) for r in out["recall"]] == [
        (6, 16, True),
        (16, 24, False),
    ]
    assert len(out["recall_mem24"]) == 2
    # at mem 8 the direct window is mem + offset + 1 = 9..16 tokens: these queries' facts, 16..22
    # tokens back, lie beyond it (16 only would fit, at a segment's last offset); at mem 24 all fit
    assert [r["n_direct"] for r in out["recall"]][1] == 0 and out["recall"][1]["acc_direct"] is None
    assert [r["n_direct"] for r in out["recall_mem24"]] == [3, 3]
    assert out["recall_mem24_direct_acc"] == out["recall_mem24_acc"]
    json.dumps(out)  # plain types: the loop appends it to metrics.jsonl
    for r in out["recall"]:
        assert r["acc_ci95"][0] <= r["acc"] <= r["acc_ci95"][1] and r["answer_nll"] > 0
    assert out["filler_nll"] > 0 and out["filler_entropy"] == lang.filler_entropy_rate()
    assert out["filler_entropy"] < out["filler_floor"] < lang.filler_bigram_entropy()
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, before[k], rtol=0, atol=0)


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ({"bogus": 1}, "eval.bogus"),
        ({"n_examples": 0}, "eval.n_examples"),
        ({"edges": [3, 10]}, "eval.edges"),
        ({"edges": [10, 8]}, "eval.edges"),
        ({"mem_len": "x"}, "eval.mem_len"),
    ],
)
def test_bad_eval_table_is_refused_in_one_line(lang, table, needle):
    with pytest.raises(ValueError, match=needle):
        RecallEvalConfig.from_dict(table)


def test_wilson_interval_brackets_the_proportion():
    assert wilson(0, 0) == (0.0, 1.0)
    lo, hi = wilson(30, 32)
    assert lo < 30 / 32 < hi <= 1.0 and lo > 0.75
