"""probes.training.recall_eval scores through the probes' adapter: the `inside` flag of [lo, hi)
buckets, the training flag of the model in training, no copy of it per call, and the Wilson
interval of a bucket's accuracy. (The callback's other promises are in
tests/test_train_recall_eval.py.)"""

import copy

import pytest
import torch

from probes.training.recall_eval import make_recall_eval, wilson
from synth.language import Language
from txl.config import TXLConfig
from txl.model import TransformerXL

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def lang():
    return Language.default()


def tiny(lang, tgt=8, mem=8):
    torch.manual_seed(0)
    return TransformerXL(
        TXLConfig(lang.vocab.size, n_layer=1, d_model=16, n_head=2, d_head=8, d_inner=32,
                  tgt_len=tgt, mem_len=mem)
    )  # fmt: skip


def test_a_bucket_is_inside_when_its_farthest_distance_hi_minus_1_is(lang):
    model = tiny(lang)  # training attention span tgt + mem = 16
    fn = make_recall_eval(lang, model.config, {"n_examples": 2, "edges": [6, 17, 18]})
    out = fn(model, 0)
    # [6, 17) reaches 16 = the span: inside; [17, 18) holds only 17: outside
    assert [(r["lo"], r["hi"], r["inside"]) for r in out["recall"]] == [
        (6, 17, True),
        (17, 18, False),
    ]


@pytest.mark.parametrize("training", [True, False])
def test_the_model_keeps_its_training_flag_and_is_never_copied(lang, monkeypatch, training):
    model = tiny(lang).train(training)
    fn = make_recall_eval(lang, model.config, {"n_examples": 2, "edges": [6, 16], "mem_len": 16})

    real = copy.deepcopy

    def no_copy(obj, *a, **k):
        if isinstance(obj, torch.nn.Module):
            raise AssertionError("the evaluation copied the model")
        return real(obj, *a, **k)

    monkeypatch.setattr(copy, "deepcopy", no_copy)
    out = fn(model, 3)
    monkeypatch.undo()
    assert model.training is training
    assert set(out) >= {"recall", "recall_mem16", "filler_nll", "recall_acc"}


@pytest.mark.parametrize(
    ("k", "n", "lo", "hi"),
    [  # Newcombe (1998), Statistics in Medicine 17:857, Table I, method 3 (Wilson score)
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_the_interval_is_the_wilson_score_interval(k, n, lo, hi):
    got = wilson(k, n)
    assert got == pytest.approx((lo, hi), abs=5e-5)
    # its ends solve the score equation (k/n - p)^2 = z^2 p (1 - p) / n, z the normal 97.5 % point
    z = 1.959963984540054
    for p in got:
        if 0.0 < p < 1.0:
            assert (k / n - p) ** 2 == pytest.approx(z * z * p * (1 - p) / n, rel=1e-9)


def test_the_interval_of_no_observations_is_the_whole_unit_interval():
    assert wilson(0, 0) == (0.0, 1.0)
    assert wilson(32, 32) == (pytest.approx(0.8928208017449293), 1.0)  # ends exact at k = n
