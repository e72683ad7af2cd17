"""topic-shift: only distant filler changes topic (facts, queries and the scored window are
untouched); on a planted LossModel the delta is exactly 0 where the changed region is out of
reach; the answer tokens are reported beside the ordinary ones."""

import numpy as np
import torch

import probes
from probes.adapters.planted import PlantedModel
from probes.api import params as pm
from probes.api.model import horizon
from probes.api.probe_base import RunContext
from probes.library.topic_shift import TopicShift
from probes.testing import tiny_checkpoint
from probes.texts.synth_ids import SynthTexts
from synth.language import Language

torch.set_num_threads(1)


def planned(model, n=4, **params):
    g = model.default_geometry()
    ctx = RunContext(model, g, horizon(model, g), SynthTexts(Language.default()), n=n, seed=0)
    p = TopicShift(pm.build(TopicShift.Params, params))
    p.plan(ctx)
    return p, ctx


def test_only_distant_filler_changes_and_scored_tokens_are_untouched():
    p, ctx = planned(PlantedModel(), distance="8-20", region=32, window=8)
    for job in p.jobs:
        base, var = job.pair.base, job.pair.variant
        changed = np.flatnonzero(base.tokens != var.tokens)
        assert changed.size and changed.max() <= job.fact_end < job.base_targets.min()
        assert base.filler_mask()[changed].all()  # facts and queries untouched
        assert (base.tokens[job.base_targets] == var.tokens[job.base_targets]).all()
        new = ctx.texts.lang.grammar  # the replaced filler comes from another topic
        assert job.info["old_topic"] != job.info["new_topic"] and new is not None
    kinds = [p.groups[j.group]["tokens"] for j in p.jobs]
    assert kinds.count("ordinary") == kinds.count("answer") == len(p.jobs) // 2


def test_planted_model_gives_exact_zeros_out_of_reach_and_reports_both_token_sets():
    m = PlantedModel(tgt_len=16, mem_len=16, sigma=0.5)
    p, ctx = planned(m, n=6, distance="8-12,80-100", region=32, window=8)
    out = p.execute(ctx)
    far = [b for b in out.bins if b["distance_lo"] == 80]
    assert all(b["reach"] == "beyond" and b["delta_mean"] == 0.0 for b in far)
    near = next(b for b in out.bins if b["distance_lo"] == 8 and b["tokens"] == "ordinary")
    assert near["reach"] == "direct" and near["delta_sd"] > 0
    assert set(out.metrics["by_tokens"]) == {"ordinary", "answer"}
    assert out.metrics["delta_mean"] == out.metrics["by_tokens"]["ordinary"]["mean"]
    assert "answer tokens" in out.verdict and out.passed
    for name in out.metrics:
        assert name in out.metric_docs, name


def test_runs_on_a_tiny_model(tmp_path_factory, tmp_path):
    model = tiny_checkpoint(tmp_path_factory.mktemp("m") / "tiny", mem_len=16, tgt_len=16)
    s = probes.run("topic-shift", model=model, quick=True, out=tmp_path, progress=False)
    assert s.passed and s.n_pairs == 2 * 6 * len({b["distance_lo"] for b in s.bins})
    assert s.plots == ["delta_by_distance.png"]
