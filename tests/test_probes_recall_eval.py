"""probes.training.recall_eval scores through the probes' adapter: the `inside` flag of [lo, hi) buckets,
the training flag of the model in training, and no copy of it per call. (The callback's other
promises are in tests/test_train_recall_eval.py.)"""

import copy

import pytest
import torch

from probes.stats import wilson as stats_wilson
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


def test_the_interval_is_the_one_of_probes_stats(lang):
    for k, n in [(0, 5), (3, 7), (32, 32)]:
        assert wilson(k, n) == stats_wilson(k, n)
    assert wilson(0, 0) == (0.0, 1.0)
