"""context-ablation: every ablated row keeps the scored window and everything from its boundary
on token for token; a shuffle keeps the far context's words; each text's effect is its ablated
row's window loss minus its intact one's, row for row; a model that reads no context gives
exactly 0; sizes it cannot use are refused before anything is written."""

import json
from collections import Counter

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import probes
from probes.adapters.planted import PlantedModel
from probes.api import params as pm
from probes.api.model import horizon, score_rows
from probes.api.probe_base import LengthLimit, RunContext
from probes.cli.main import cli
from probes.library.context_ablation import ABLATIONS, ContextAblation
from probes.texts.synth_ids import SynthTexts
from synth.language import Language

torch.set_num_threads(1)


def planned(model, n=3, **params):
    g = model.default_geometry()
    ctx = RunContext(model, g, horizon(model, g), SynthTexts(Language.default()), n=n, seed=0)
    p = ContextAblation(pm.build(ContextAblation.Params, params))
    p.plan(ctx)
    return p, ctx


def check_rows(p):
    W = p.params.window
    for t in p.texts:
        for k, b in enumerate(t.boundary):
            assert b <= p.context - p.distances[k]  # d intact tokens at least before the window
            drop = t.rows["drop", k]
            assert np.array_equal(drop, np.concatenate([t.tokens[:1], t.tokens[b:]]))
            for kind in ("shuffle", "replace"):
                row = t.rows[kind, k]
                assert len(row) == len(t.tokens) and np.array_equal(row[b:], t.tokens[b:])
                assert row[0] == t.tokens[0]
            far = t.rows["shuffle", k][1:b]
            assert Counter(far.tolist()) == Counter(t.tokens[1:b].tolist())
            assert np.array_equal(t.rows["drop", k][-W:], t.tokens[-W:])


def test_every_ablated_row_keeps_the_window_and_the_tokens_from_its_boundary_on():
    p, _ = planned(PlantedModel(tgt_len=64, mem_len=192), context=200, distance="4,16,64")
    assert p.length == 216 and [len(t.tokens) for t in p.texts] == [216] * 3
    check_rows(p)
    moved = [not np.array_equal(t.rows["shuffle", 0], t.tokens) for t in p.texts]
    assert all(moved)  # a shuffle of 195+ words moves some


def test_a_texts_effect_is_its_ablated_rows_window_loss_minus_the_intact_ones():
    from probes.adapters.txl import load
    from probes.framework.models import resolve_model_path

    m = load(resolve_model_path("default"))
    p, ctx = planned(m, n=2, context=120, distance="8,32")
    t = p.texts[1]
    t.rows["replace", 1] = None  # a cell no draw could fill: the other rows keep their places
    recs = [rec for rec, _ in p._score(ctx, [0, 1])]
    W = p.params.window

    def window_nll(row):
        tok = np.asarray(row)[None]
        pos = np.zeros(tok.shape, bool)
        pos[0, -W:] = True
        nll = score_rows(m, tok, np.zeros_like(tok), pos, ctx.geometry).nll
        return float(nll[0, -W:].mean())

    assert recs[1]["nll_intact"] == pytest.approx(window_nll(t.tokens), abs=1e-6)
    for kind in ABLATIONS:
        for k in range(2):
            row = t.rows[kind, k]
            if row is None:
                assert recs[1][kind][k] is None
            else:
                assert recs[1][kind][k] == pytest.approx(window_nll(row), abs=1e-6)


def test_a_model_that_reads_no_context_gives_exactly_zero_for_shuffle_and_replace(tmp_path):
    """Planted with token noise only: a token's loss is keyed to itself and its position, so a
    far context shuffled or replaced (same length) moves nothing, bit for bit."""
    m = PlantedModel(tgt_len=64, mem_len=192, noise="token")
    p, ctx = planned(m, n=4, context=200, distance="4,16,64")
    out = p.summarize(ctx, [rec for rec, _ in p._score(ctx, range(4))])
    for b in out.bins:
        if b["ablation"] != "drop":
            assert b["delta_mean"] == 0 and b["ci95"] == [0, 0] and b["verdict"] == "negligible"
    assert out.metrics["effective"]["shuffle"] == {"by_mean": 4, "by_interval": 4}


def test_the_same_seed_draws_the_same_texts_whatever_the_distances(tmp_path):
    a, _ = planned(PlantedModel(tgt_len=64, mem_len=192), context=200, distance="4,16")
    b, _ = planned(PlantedModel(tgt_len=64, mem_len=192), context=200, distance="16,64")
    assert all(np.array_equal(x.tokens, y.tokens) for x, y in zip(a.texts, b.texts, strict=True))
    assert all(np.array_equal(x.rows["shuffle", 1], y.rows["shuffle", 0])
               for x, y in zip(a.texts, b.texts, strict=True))  # fmt: skip


def test_a_run_writes_its_table_texts_and_verdicts(tmp_path):
    s = probes.run("context-ablation", model="default", n=4, context=120, distance="8,32",
                   out=tmp_path, progress=False)  # fmt: skip
    assert [(b["ablation"], b["distance"]) for b in s.bins] == [
        (a, d) for a in ABLATIONS for d in (8, 32)
    ]
    assert all(b["n"] == 4 and b["verdict"] in ("significant", "negligible", "inconclusive")
               for b in s.bins)  # fmt: skip
    with np.load(f"{s.run_dir}/texts.npz") as z:
        assert z["tokens"].shape == (4, 136) and z["shuffle"].shape == (4, 2, 136)
        assert z["boundary"].shape == (4, 2)
    doc = json.loads((tmp_path / s.run_dir / "summary.json").read_text())
    assert doc["metrics"]["context"] == 120


@pytest.mark.parametrize(("args", "says"), [
    (["--context", "5000"], "give a shorter --context"),
    (["--context", "100", "--distance", "8,100"], "below the context"),
    (["--distance", "8,4"], "increasing"),
    (["--context", "6"], "leaves nothing to ablate"),
])  # fmt: skip
def test_sizes_it_cannot_use_are_refused_in_one_line_before_any_directory(tmp_path, args, says):
    r = CliRunner().invoke(cli, ["run", "context-ablation", "--model", "default", *args,
                                 "--out", str(tmp_path / "out")])  # fmt: skip
    assert r.exit_code == 2 and says in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_length_limit_says_whether_it_is_the_models_or_the_texts():
    """Probes keep different room below the model's row and below the texts they cut from
    (context-ablation's replaced context is another text of the same source: half of it), so
    each limit says which it is rather than leaving them to read its message."""

    class Source:
        def length_limits(self):
            return [(10_001, "the haystack's 10,001 tokens")]

    class Model:
        def max_row_length(self, geometry):
            return 4_096

    assert RunContext(Model(), None, None, Source(), n=1, seed=0).length_limits() == [
        LengthLimit(4_096, "the model's 4,096 positions", of_model=True),
        LengthLimit(10_001, "the haystack's 10,001 tokens", of_model=False),
    ]
    assert RunContext(object(), None, None, None, n=1, seed=0).length_limits() == []
