"""Null calibration of the verdict rule through a probe: on null pairs — fact-update pairs scored
by a planted LossModel with no effect at all (probes.adapters.planted: every token whose view changed gets
a fresh, identically distributed loss, so base and variant are exchangeable) — the rate at which
the rule calls a bin significant at α = 0.05 is not significantly above 0.05 (one-sided binomial
test over 2,000 repetitions of an 8-pair bin).

Fast: the pairs are planned once and replicated with other document ids (the planted noise is
keyed to them, so each replica draws fresh losses), and all replicas are scored in one pass of the
paired engine; the rule is then applied to each replica's 8 pair deltas as to a one-bin run."""

import numpy as np
from scipy import stats as sst

import probes
from probes import stats
from probes.adapters.planted import PlantedModel
from probes.api import params as pm
from probes.api.model import horizon
from probes.api.paired import Job
from probes.api.probe_base import RunContext
from probes.engine import paired
from probes.library.fact_update import FactUpdate
from probes.texts.synth_ids import SynthTexts
from synth.example import Pair
from synth.language import Language

REPS = 2000
N_PAIRS = 8


def replica(job: Job, rep: int) -> Job:
    def shift(ex):
        return ex.replace(doc_ids=ex.doc_ids + 1000 * rep)

    pair = Pair(shift(job.pair.base), shift(job.pair.variant), job.pair.alignment, job.pair.meta)
    return Job(rep, pair, job.base_targets, job.variant_targets, job.fact_end, job.sign)


def test_verdict_rule_false_positive_rate_on_null_pairs_is_at_most_alpha():
    model = PlantedModel(tgt_len=8, mem_len=16, n_layer=1, sigma=1.0)  # no effect planted
    g = model.default_geometry()
    ctx = RunContext(model, g, horizon(model, g), SynthTexts(Language.default()), n=N_PAIRS, seed=0)
    probe = FactUpdate(pm.build(FactUpdate.Params, {"distance": "16-17", "answer_distance": 6}))
    probe.plan(ctx)
    assert all(j.distance <= 17 for j in probe.jobs)  # the stale fact is within reach: not 0
    probe.jobs = [replica(j, r) for r in range(REPS) for j in probe.jobs]
    probe.groups = [{"distance_lo": 16, "distance_hi": 17}] * REPS
    records, _ = paired.score_jobs(probe, ctx)  # the pair records: the rule is applied per replica
    deltas = np.zeros((REPS, N_PAIRS))
    fill = np.zeros(REPS, dtype=int)
    for r in records:
        deltas[r["group"], fill[r["group"]]] = r["delta"]
        fill[r["group"]] += 1
    assert (fill == N_PAIRS).all() and np.mean(deltas != 0.0) > 0.99
    hits = sum(stats.grouped([d])[0]["significant"] for d in deltas)
    lo, hi = stats.wilson(hits, REPS)
    print(
        f"null calibration, one Gaussian bin: {hits}/{REPS} = {hits / REPS:.4f} [{lo:.4f}, {hi:.4f}]"
    )
    test = sst.binomtest(hits, REPS, 0.05, alternative="greater")
    assert test.pvalue > 0.05, f"{hits}/{REPS} null bins called significant"
    assert hits > 0  # the rule is not vacuous: it does fire at about its nominal rate


# The real case, through the runner and the engine: every bin of a fact-swap run on a planted
# model with no effect — heavy-tailed (Cauchy) noise rounded to 0.5 nats (ties), exact zeros
# wherever a token cannot see the edit — with Holm across the run's bins. The rule's family-wise
# false-positive rate (runs with any bin called significant) must not be significantly above α;
# docs/user-guide.md's "Null calibration" quotes the figures this test prints.
NULL_MODEL = "planted:tails=cauchy,quantum=0.5,sigma=1.0,tgt_len=16,mem_len=16,n_layer=1"
RUNS = 200


def null_runs(tmp_path):
    from probes.framework.models import model_source

    out = []
    for seed in range(RUNS):
        s = probes.run(
            "fact-swap",
            model=model_source(NULL_MODEL),
            n=12,
            seed=seed,
            out=tmp_path,
            progress=False,
            min_effect=0.0,  # the statistical rule alone: the margin can only lower the rate
        )
        out.append(s)
    return out


def test_null_false_positive_rate_through_the_runner_with_ties_zeros_and_holm(tmp_path):
    runs = null_runs(tmp_path)
    bins = [b for s in runs for b in s.bins if b["n"]]
    assert len({len(s.bins) for s in runs}) == 1 and len(runs[0].bins) >= 3  # several bins: Holm
    zeros = np.mean([b["delta_mean"] == 0.0 and b["ci95"] == [0.0, 0.0] for b in bins])
    assert 0.2 < zeros < 0.8  # bins beyond the reach: every delta exactly 0; the rest are not
    from probes.framework.results import load_samples

    deltas = np.array([r["delta"] for r in load_samples(runs[0].run_dir)])
    moved = deltas[deltas != 0.0]
    assert moved.size > 10 and np.unique(np.abs(moved)).size < moved.size  # noise, with ties
    fw = sum(any(b["significant"] for b in s.bins) for s in runs)
    per_bin = sum(b["significant"] for b in bins)
    lo, hi = stats.wilson(fw, RUNS)
    print(
        f"null calibration: {fw}/{RUNS} runs with a significant bin = {fw / RUNS:.3f} "
        f"[{lo:.3f}, {hi:.3f}]; {per_bin}/{len(bins)} bins"
    )
    test = sst.binomtest(fw, RUNS, 0.05, alternative="greater")
    assert test.pvalue > 0.05, f"{fw}/{RUNS} null runs called some bin significant"
    assert all(s.passed for s in runs)


def test_the_planted_null_runs_through_the_cli(tmp_path):
    import json

    from click.testing import CliRunner

    from probes.cli.main import cli

    r = CliRunner().invoke(
        cli,
        ["run", "fact-swap", "--model", NULL_MODEL, "--n", "6", "--out", str(tmp_path), "--json"],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["model"]["path"] == NULL_MODEL  # what `probe rerun` loads again
    assert all(b["verdict"] in ("significant", "negligible", "inconclusive") for b in doc["bins"])
    r = CliRunner().invoke(
        cli, ["rerun", doc["run_dir"], "--json", "--quiet", "--out", str(tmp_path / "again")]
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["match"] == "exact"
