"""fact-update: pairs differ only in the stale statement; on a planted "copy" LossModel the stale
value gains probability mass exactly where the model can see it; a memory-less tiny model shows no
effect of a stale statement beyond its segment."""

import json

import numpy as np
import pytest
import torch

import probes
from probes.adapters.planted import PlantedModel
from probes.api import params as pm
from probes.api.model import horizon
from probes.api.probe_base import RunContext
from probes.library.fact_update import FactUpdate
from probes.testing import tiny_checkpoint
from probes.texts.synth_ids import SynthTexts
from synth.language import Language

torch.set_num_threads(1)


def planned(model, n=6, **params):
    g = model.default_geometry()
    ctx = RunContext(model, g, horizon(model, g), SynthTexts(Language.default()), n=n, seed=0)
    p = FactUpdate(pm.build(FactUpdate.Params, params))
    p.plan(ctx)
    return p, ctx


def test_pairs_differ_only_in_the_stale_statement():
    p, _ = planned(PlantedModel(), distance="30-60", answer_distance=10)
    for job in p.jobs:
        base, var = job.pair.base, job.pair.variant
        diff = np.flatnonzero(base.tokens != var.tokens)
        s, e = job.pair.meta["stale"]
        assert diff.min() >= s and diff.max() < e  # only the stale statement's tokens differ
        assert len(var.facts) == len(base.facts) + 1
        q = var.queries[0]
        answer = tuple(int(t) for t in var.tokens[q.answer.start : q.answer.end])
        assert answer == var.facts[q.fact].value  # the query answers the update B …
        assert tuple(var.tokens[e - 1 - len(job.alt) : e - 1]) == job.alt  # … the stale says A
        assert job.alt != answer and len(job.alt) == len(answer)
        assert 30 <= job.distance <= 60 and job.info["gap"] == job.distance - 10


def test_planted_copy_model_pulls_toward_the_stale_value_only_within_reach():
    m = PlantedModel(tgt_len=16, mem_len=16, sigma=0.3, copy=2.0)
    p, ctx = planned(m, n=8, distance="20-30,120-160", answer_distance=8)
    out = p.execute(ctx)
    near, far = out.bins
    assert near["reach"] != "beyond" and far["reach"] == "beyond"
    assert near["stale_share"] > near["stale_share_without"]  # A is seen: it gains mass
    assert near["stale_share_shift"] > 0 and near["contrast_shift"]["mean"] > 0
    assert far["delta_mean"] == 0.0 and far["stale_share_shift"] == 0.0  # unseen: exactly 0
    assert out.checks["beyond_reach_zero"]["passed"] and out.passed
    for name in out.metrics:
        assert name in out.metric_docs, name


@pytest.fixture(scope="module")
def mem0(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("m") / "mem0", mem_len=0, tgt_len=16)


def test_memory_less_model_ignores_a_stale_statement_beyond_its_segment(mem0, tmp_path):
    s = probes.run("fact-update", model=mem0, distance="40-80", n=4, out=tmp_path, progress=False)
    recs = [json.loads(x) for x in open(f"{s.run_dir}/samples.jsonl")]
    assert all(r["delta"] == 0.0 and r["reach"] == "beyond" for r in recs)
    assert s.bins[0]["stale_share_shift"] == 0.0 and s.passed
