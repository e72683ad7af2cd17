"""context-sweep: truncation shows a target exactly c tokens (a planted "copy" LossModel retrieves
an answer only once its fact is within c), the streaming curve sees further, the effective context
matches hand-computed values, and the truncated scorer is the recompute evaluator."""

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from probes.adapters import txl as adapters
from probes.adapters.planted import PlantedModel
from probes.api import params as pm
from probes.api.model import geometry, horizon
from probes.api.probe_base import RunContext
from probes.cli.main import cli
from probes.library.context_sweep import ContextSweep, effective_context
from probes.testing import tiny_checkpoint
from probes.texts.synth_ids import SynthTexts
from synth.language import Language

torch.set_num_threads(1)


def test_truncation_retrieves_only_facts_within_c_and_streaming_sees_further():
    m = PlantedModel(tgt_len=16, mem_len=16, sigma=0.2, copy=3.0)
    g = m.default_geometry()
    ctx = RunContext(m, g, horizon(m, g), SynthTexts(Language.default()), n=4, seed=0)
    p = ContextSweep(pm.build(ContextSweep.Params, {"contexts": "2,8,32,64,128"}))
    p.plan(ctx)
    out = p.execute(ctx)
    dists = np.concatenate([t.distance for t in p.texts])
    assert dists.min() > 8 and dists.max() < 128
    acc = {b["c"]: b["answer_accuracy"] for b in out.bins}
    vis = {b["c"]: b["fact_visible"] for b in out.bins}
    assert acc[2] == acc[8] == 0.0 and acc[128] == 1.0  # no fact within 8; all within 128
    assert all(acc[c] <= vis[c] for c in acc)  # nothing is retrieved that is not visible
    nll = [b["answer_nll"] for b in out.bins]
    assert nll[-1] < nll[1] - 2.0  # the copy effect, once every fact is in view
    # streaming with memory 32 (2 layers, tgt 16) already reaches facts truncation at 32 cannot
    b32 = next(b for b in out.bins if b["c"] == 32)
    assert b32["stream_answer_nll"] < b32["answer_nll"]
    assert out.metrics["effective_context"]["answer"]["c"] == 128
    for name in out.metrics:
        assert name in out.metric_docs, name


def test_effective_context_hand_values():
    contexts = [4, 16, 64]
    # mean NLL 3.0, 2.02, 2.0: the gap at 16 is 1 − e^(2.0 − 2.02) = 1.98 % > 1 % → 64
    means = np.array([[3.0, 3.0], [2.01, 2.03], [2.0, 2.0]])
    assert effective_context(means, contexts) == 64
    # 3.0, 2.005, 2.0: 1 − e^(−0.005) = 0.499 % < 1 % → 16
    means[1] = [2.0, 2.01]
    assert effective_context(means, contexts) == 16
    assert effective_context(np.array([[1.0], [1.0], [1.0]]), contexts) == 4


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("m") / "tiny", mem_len=16, tgt_len=16)


def test_truncated_scorer_is_the_recompute_evaluator(model):
    cached = adapters.load(model)
    recompute = adapters.load(model, evaluator="recompute")
    rng = np.random.default_rng(0)
    tokens = rng.integers(2, 300, size=(2, 70))
    docs = np.zeros_like(tokens)
    pos = np.zeros(tokens.shape, dtype=bool)
    pos[:, 40:] = True
    g = geometry(cached, mem_len=12, tgt_len=8)  # recompute window = 12 + 8
    a = cached.score_window(tokens, docs, pos, 20, g)
    b = recompute.score(tokens, docs, pos, g)
    np.testing.assert_array_equal(a.nll, b.nll)
    np.testing.assert_array_equal(a.correct, b.correct)


@pytest.mark.parametrize("c", [1, 7, 20])
def test_an_opened_window_is_the_opening_token_then_exactly_c_tokens(model, c):
    """With `opening`, each scored token is predicted from [the text's first token, its c
    previous tokens] and nothing else: the number a hand-built row of those c + 2 tokens gets;
    without it, from the c tokens alone."""
    from probes.engine.sweep import SweepText, truncated

    rng = np.random.default_rng(c)
    tokens = rng.integers(2, 300, size=60)
    scored = np.array([30, 41, 59])
    text = SweepText(tokens, np.zeros(60, dtype=np.int64), scored[:1], scored[1:], scored[:1])
    recompute = adapters.load(model, evaluator="recompute")
    g = geometry(recompute, mem_len=24, tgt_len=8)
    for opening in (True, False):
        nll, _ = truncated(recompute, [text], c, g, opening=opening)
        assert np.isnan(np.delete(nll[0], scored)).all()
        for t in scored:
            row = np.r_[tokens[:1] if opening else [], tokens[t - c : t + 1]].astype(np.int64)
            pos = np.zeros((1, row.size), dtype=bool)
            pos[0, -1] = True
            want = recompute.score_window(row[None], np.zeros_like(row)[None], pos, c + 1, g)
            np.testing.assert_allclose(nll[0, t], want.nll[0, -1], rtol=0, atol=1e-5)
    # the opening token is read: a window with it differs from one without
    with_it, _ = truncated(recompute, [text], 1, g, opening=True)
    without, _ = truncated(recompute, [text], 1, g, opening=False)
    assert np.abs(with_it[0, scored] - without[0, scored]).max() > 1e-4


def test_a_window_that_would_reach_the_opening_token_is_refused():
    from probes.engine.sweep import opened

    pos = np.zeros((1, 10), dtype=bool)
    pos[0, 5] = True
    ids, _ = opened(np.arange(10)[None], pos, 4)  # tokens 1–4 before 5: the opening is 0
    assert ids.tolist() == [[0, 1, 2, 3, 4, 5]]
    with pytest.raises(ValueError, match="reaches the opening token"):
        opened(np.arange(10)[None], pos, 5)


class _Positions(PlantedModel):
    """A planted model whose windows end at a position table of 40."""

    def max_window(self):
        return 40


def test_the_opening_token_takes_a_position_of_the_window():
    from probes.api.probe_base import ProbeInputError

    m = _Positions(tgt_len=16, mem_len=48, sigma=0.2, copy=3.0)
    g = m.default_geometry()
    ctx = RunContext(m, g, horizon(m, g), SynthTexts(Language.default()), n=2, seed=0)
    auto = ContextSweep(pm.build(ContextSweep.Params, {}))
    auto.plan(ctx)
    assert auto.contexts[-1] == 39  # 64 (mem + tgt) cut so the opening token fits in 40
    without = ContextSweep(pm.build(ContextSweep.Params, {"opening": False}))
    without.plan(ctx)
    assert without.contexts[-1] == 64  # no opening token: the window is c, mem + tgt
    with pytest.raises(ProbeInputError, match="past the model's 40 positions"):
        ContextSweep(pm.build(ContextSweep.Params, {"contexts": "2,8,40"})).plan(ctx)


def test_cli_json_and_plot(model, tmp_path):
    r = CliRunner().invoke(
        cli,
        [
            "run",
            "context-sweep",
            "--model",
            str(model),
            "--out",
            str(tmp_path),
            "--quick",
            "--contexts",
            "1,4,16,32",
            "--json",
        ],
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [b["c"] for b in doc["bins"]] == [1, 4, 16, 32]
    assert {"answer_nll", "ordinary_nll", "stream_answer_nll", "answer_ci95"} <= set(doc["bins"][0])
    assert set(doc["metrics"]["effective_context"]) == {"answer", "ordinary", "all"}
    for name in doc["metrics"]:
        assert name in doc["metric_docs"], name
    assert doc["plots"] == ["context_sweep.png"]
