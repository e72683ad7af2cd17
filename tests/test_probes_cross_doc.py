"""cross-doc on tiny untrained models made here and on a planted LossModel: reset gives leakage
exactly 0 while carry does not, a memory-less model sees nothing beyond its segment, and the
probe's own reset check fails (exit 1) when reset leaks."""

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import probes
from probes.adapters.planted import PlantedModel
from probes.api import params as pm
from probes.api.model import horizon
from probes.api.probe_base import RunContext
from probes.cli.main import cli
from probes.library.cross_doc import CrossDoc
from probes.testing import tiny_checkpoint
from probes.texts.synth_ids import SynthTexts
from synth.language import Language

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {
        "mem": tiny_checkpoint(root / "mem16", mem_len=16, tgt_len=16),
        "mem0": tiny_checkpoint(root / "mem0", mem_len=0, tgt_len=16),
    }


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def samples(summary):
    with open(f"{summary.run_dir}/samples.jsonl") as f:
        return [json.loads(x) for x in f]


def test_reset_gives_leakage_exactly_zero_while_carry_does_not(models, tmp_path):
    # A's fact 2–12 tokens before the boundary: inside the carry reach of B's first tokens.
    s = probes.run(
        "cross-doc", model=models["mem"], distance="2-12", n=6, out=tmp_path, progress=False
    )
    recs = samples(s)
    assert len(recs) == 6 and s.passed
    assert all(r["reset_leak_exact"] and r["reset_leak_max_abs"] == 0.0 for r in recs)
    assert s.metrics["reset_leakage"]["max_abs"] == 0.0
    assert s.checks["reset_leakage_zero"]["passed"]
    # carry: what A holds changes B's losses (A vs the foreign document), on both token sets
    assert any(r["conflict_first"] != 0.0 for r in recs)
    assert any(r["carry_reset_first"] != 0.0 for r in recs)
    assert "reset leakage exactly 0" in s.verdict


def test_planted_model_reset_exact_and_carry_exchangeable():
    lang = Language.default()
    m = PlantedModel(tgt_len=16, mem_len=16, sigma=0.5)
    g = m.default_geometry()
    ctx = RunContext(m, g, horizon(m, g), SynthTexts(lang), n=6, seed=1)
    p = CrossDoc(pm.build(CrossDoc.Params, {"distance": "2-8"}))
    p.plan(ctx)
    out = p.execute(ctx)
    assert out.checks["reset_leakage_zero"]["passed"]
    assert out.metrics["reset_leakage"]["max_abs"] == 0.0
    assert out.metrics["conflict"]["first"]["sd"] > 0  # carry: fresh draws, not exact zeros
    assert (out.arrays["nll_reset"] == out.arrays["nll_reset_foreign"]).all()


def test_memory_less_model_cannot_see_the_previous_document_beyond_its_segment(models, tmp_path):
    # mem_len 0, tgt 16: B's answer (≥ 30 tokens after the boundary) sees only its own segment.
    s = probes.run(
        "cross-doc",
        model=models["mem0"],
        distance="2-12,40-60",
        n=4,
        out=tmp_path,
        progress=False,
    )
    recs = samples(s)
    assert all(r["carry_reset_answer"] == 0.0 and r["conflict_answer"] == 0.0 for r in recs)
    assert all(r["reach"] == "beyond" for r in recs)
    assert s.checks["beyond_reach_zero"]["passed"] and s.checks["beyond_reach_zero"]["n_tokens"]
    answer_bins = [b for b in s.bins if b["tokens"] == "answer" and b["kind"] != "pull"]
    assert all(b["delta_mean"] == 0.0 and not b["significant"] for b in answer_bins)


def test_pairs_keep_b_identical_and_place_the_conflict_at_the_distance(models):
    from probes.adapters import txl as adapters

    lm = adapters.load(models["mem"])
    g = lm.default_geometry()
    ctx = RunContext(lm, g, horizon(lm, g), SynthTexts(Language.default()), n=5, seed=3)
    p = CrossDoc(pm.build(CrossDoc.Params, {"distance": "5-9"}))
    p.plan(ctx)
    lang = ctx.texts.lang
    for pr in p.pairs:
        la = pr["len_a"]
        assert (pr["conf"][la:] == pr["foreign"][la:]).all()  # B is the same text
        assert pr["conf"][la] == lang.vocab.eod_id and 5 <= pr["gap"] <= 9
        assert pr["conf"][pr["fact_end"]] == lang.period_id and pr["fact_end"] == la - pr["gap"]
        stale = pr["conf"][pr["fact_end"] - len(pr["stale"]) : pr["fact_end"]]
        assert (stale == pr["stale"]).all()  # A states the conflicting value …
        assert not np.isin(pr["stale"], pr["conf"][la:]).any()  # … which B never contains
        assert not np.isin(pr["stale"], pr["foreign"]).any()


def test_metric_names_are_documented_and_json_is_the_contract(models, tmp_path):
    r = invoke(
        "run", "cross-doc", "--model", models["mem"], "--out", tmp_path, "--quick",
        "--distance", "2-8", "--json", "--quiet",
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    for name in doc["metrics"]:
        assert name in doc["metric_docs"], name
    assert {"delta_mean", "delta_ci95", "p_value", "accuracy"} <= set(doc["metrics"])
    assert {b["kind"] for b in doc["bins"]} == {"carry-reset", "foreign-reset", "conflict", "pull"}
    assert (tmp_path / "cross-doc").exists()


def test_reset_that_leaks_fails_the_probes_own_check_exit_1(models, tmp_path, monkeypatch):
    from dataclasses import replace

    from probes.adapters import txl as adapters

    original = adapters.CachedTXL.score_shared

    def leaky(self, tokens, doc_ids, positions, geometry, **kw):  # a broken reset mask
        return original(self, tokens, doc_ids, positions, replace(geometry, reset=False), **kw)

    monkeypatch.setattr(adapters.CachedTXL, "score_shared", leaky)
    r = invoke(
        "run", "cross-doc", "--model", models["mem"], "--out", tmp_path,
        "--distance", "2-8", "--n", "3", "--json", "--quiet",
    )  # fmt: skip
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert not doc["checks"]["reset_leakage_zero"]["passed"]
    assert doc["checks"]["reset_leakage_zero"]["max_abs_delta"] > 0
    assert "CHECK FAILED: reset_leakage_zero" in doc["verdict"]


ALL_OF_A = {"carry-reset", "foreign-reset"}  # on B's answer; every kind on B's first tokens


def test_each_row_is_labelled_by_where_what_it_measures_falls(models, tmp_path):
    """carry-reset, foreign-reset and B's first tokens measure all of A (or the foreign document
    in its place): their reach is counted from A's last token, so such a row labelled beyond sees
    nothing of A and its deltas are 0 under carry; B's first tokens, right after A's last token,
    see A directly whatever the distance of A's fact. conflict and pull on B's answer measure
    A's fact and are labelled from it."""
    s = probes.run("cross-doc", model=str(models["mem"]), n=4, b_distance=80, out=tmp_path,
                   progress=False, threads=1)  # fmt: skip
    tol = s.checks["beyond_reach_zero"]["tolerance"]
    whole = [b for b in s.bins if b["tokens"] == "first" or b["kind"] in ALL_OF_A]
    assert {b["reach_from"] for b in whole} == {"A's end"}
    assert {b["reach_from"] for b in s.bins if b not in whole} == {"A's fact"}
    assert {b["reach"] for b in whole if b["tokens"] == "first"} == {"direct"}
    beyond = [b for b in whole if b["reach"] == "beyond"]
    assert beyond  # B's answer lies past the reach of A's last token (b_distance 80)
    for b in beyond:
        assert abs(b["delta_mean"]) <= tol and max(map(abs, b["ci95"])) <= tol, b
    far = max(b["distance_lo"] for b in s.bins)
    fact = [b for b in s.bins if b not in whole and b["distance_lo"] == far]
    assert {b["reach"] for b in fact} == {"beyond"}  # A's fact in the farthest bin


def test_without_the_check_tail_b_ends_at_its_answer_and_the_check_says_why(models, tmp_path):
    padded = probes.run("cross-doc", model=models["mem"], distance="2-12", n=3, out=tmp_path,
                        check_tail="on", progress=False)  # fmt: skip
    short = probes.run("cross-doc", model=models["mem"], distance="2-12", n=3, out=tmp_path,
                       check_tail="off", progress=False)  # fmt: skip
    assert padded.checks["beyond_reach_zero"]["n_tokens"] > 0
    check = short.checks["beyond_reach_zero"]
    assert check["n_tokens"] == 0 and check["status"] == "not applicable"
    assert "--check-tail off" in check["why"]
    assert short.checks["reset_leakage_zero"]["passed"]


def test_auto_leaves_out_padding_that_would_more_than_double_the_texts(models, tmp_path):
    """The padding is a sanity check of the evaluator, not the measurement: where A's reach is
    longer than the texts themselves (a deep model's, or short gaps), auto leaves it out and
    the check says why; asked for, it is kept."""
    auto = probes.run("cross-doc", model=models["mem"], distance="2-12", n=3, out=tmp_path,
                      progress=False)  # fmt: skip
    check = auto.checks["beyond_reach_zero"]
    assert check["n_tokens"] == 0 and check["status"] == "not applicable"
    assert "more than double" in check["why"] and "--check-tail on" in check["why"]
    longer = probes.run("cross-doc", model=models["mem"], n=3, out=tmp_path, progress=False)
    assert longer.checks["beyond_reach_zero"]["n_tokens"] > 0  # auto bins: the texts are long
