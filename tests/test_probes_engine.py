"""The paired engine on tiny untrained models made here (never the shipped one): exact zeros,
prefix forking, reach-aware checks, both evaluators."""

import itertools
import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import probes
from probes.adapters import txl as adapters
from probes.api.model import LossModel, geometry, horizon
from probes.api.paired import Job, PairedProbe
from probes.api.probe_base import RunContext
from probes.testing import tiny_checkpoint
from probes.texts.synth_ids import SynthTexts


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {
        "mem": tiny_checkpoint(root / "mem16", mem_len=16, tgt_len=16),
        "mem0": tiny_checkpoint(root / "mem0", mem_len=0, tgt_len=16),
    }


def samples(summary):
    lines = (summary.run_dir and open(f"{summary.run_dir}/samples.jsonl").read().splitlines()) or []
    return [json.loads(x) for x in lines]


def test_adapter_satisfies_the_protocol(models):
    lm = adapters.load(models["mem"])
    assert isinstance(lm, LossModel)
    assert lm.info.sha256 and lm.info.n_layer == 2 and lm.info.dtype == "float32"
    g = lm.default_geometry()
    assert (g.mem_len, g.tgt_len, g.clamp_len, g.reset) == (16, 16, 32, True)


def test_forked_scores_equal_unforked_scores(models):
    lm = adapters.load(models["mem"])
    g = geometry(lm, tgt_len=8)
    rng = np.random.default_rng(0)
    R, N = 5, 61
    tokens = np.tile(rng.integers(2, 300, size=N), (R, 1))
    tokens[1, 30:] = rng.integers(2, 300, size=N - 30)  # child of 0 from 30
    tokens[2, :45] = tokens[1, :45]
    tokens[2, 45:] = rng.integers(2, 300, size=N - 45)  # child of 1 from 45
    tokens[3, 3:] = rng.integers(2, 300, size=N - 3)  # child of 0 from 3 (no whole segment shared)
    tokens[4] = rng.integers(2, 300, size=N)  # unrelated root
    docs = np.zeros((R, N), dtype=np.int64)
    pos = np.ones((R, N), dtype=bool)
    pos[:, 0] = False
    pos[3, 40:] = False
    forked = lm.score_shared(
        tokens, docs, pos, g, parent=np.array([-1, 0, 1, 0, -1]), shared=np.array([0, 30, 45, 3, 0])
    )
    plain = lm.score(tokens, docs, pos, g)
    np.testing.assert_array_equal(forked.nll, plain.nll)
    np.testing.assert_array_equal(forked.correct, plain.correct)
    assert np.isnan(forked.nll[3, 40:]).all() and np.isnan(forked.nll[:, 0]).all()


@pytest.mark.parametrize("cache", ["kv", "hidden"])
def test_a_fork_gets_the_shared_targets_it_reads_even_where_its_parent_reads_none(models, cache):
    """Rows read only a few targets; a fork's targets before its fork point come from its
    parent's stream (and, two forks deep, from its grandparent's), which must compute them
    although the parent itself reads none of them: each row's scores as when it is scored
    alone (within float32 rounding: the rows that read are computed as smaller batches)."""
    lm = adapters.load(models["mem"], cache=cache)
    g = geometry(lm, tgt_len=8)
    rng = np.random.default_rng(1)
    R, N = 3, 61
    tokens = np.tile(rng.integers(2, 300, size=N), (R, 1))
    tokens[1, 30:] = rng.integers(2, 300, size=N - 30)  # child of 0, forks at 24
    tokens[2, :45] = tokens[1, :45]
    tokens[2, 45:] = rng.integers(2, 300, size=N - 45)  # child of 1, forks at 40
    docs = np.zeros((R, N), dtype=np.int64)
    pos = np.zeros((R, N), dtype=bool)
    pos[0, 58:] = True  # the parent reads only its end
    pos[1, [10, 11, 33]] = True  # 10, 11: before row 1's fork, from row 0's stream
    pos[2, [5, 42, 60]] = True  # 5: from row 0's stream through row 1's, 42: its own
    forked = lm.score_shared(
        tokens, docs, pos, g, parent=np.array([-1, 0, 1]), shared=np.array([0, 30, 45])
    )
    alone = [lm.score(tokens[r : r + 1], docs[r : r + 1], pos[r : r + 1], g) for r in range(R)]
    assert np.isfinite(forked.nll[pos]).all() and np.isnan(forked.nll[~pos]).all()
    np.testing.assert_allclose(
        forked.nll[pos], np.concatenate([a.nll for a in alone])[pos], rtol=0, atol=1e-5
    )
    np.testing.assert_array_equal(forked.correct, np.concatenate([a.correct for a in alone]))


class IdentityProbe(PairedProbe):
    """Fact examples paired with themselves."""

    name = "identity-test"
    version = 1

    def plan(self, ctx):
        from synth.edits import identity
        from synth.generate import make_example

        self.groups = [{"distance_lo": 8, "distance_hi": 40}]
        self.jobs = []
        rng = ctx.rng("identity")
        for i in range(ctx.n):
            base = make_example(ctx.texts.lang, rng, [8 + 4 * i], lead=5 + i)
            pair = identity(base, rng, ctx.texts.lang)
            bt, vt = pair.aligned_targets()
            q = base.queries[0]
            fact_end = base.facts[q.fact].span.end - 1
            self.jobs.append(Job(0, pair, bt, vt, fact_end, alt=tuple(base.facts[0].value)))


def test_a_paired_probe_overriding_what_the_engine_no_longer_calls_is_refused_at_definition():
    """summarize, _score_batch, _record and _checks were the engine's methods on the probe; an
    override of one would now be skipped, so defining one is a TypeError naming it."""
    with pytest.raises(TypeError, match="Stale defines _checks, summarize, which the paired"):
        type("Stale", (IdentityProbe,), {"summarize": lambda self: 0, "_checks": lambda self: 0})
    type("Hooked", (IdentityProbe,), {"extra_metrics": lambda self, ctx, r, b: {}})  # hooks: fine


@pytest.mark.parametrize("evaluator", ["cached", "recompute"])
def test_identical_pair_gives_delta_exactly_zero(models, evaluator):
    from synth.language import Language

    lm = adapters.load(models["mem"], evaluator=evaluator)
    g = lm.default_geometry()
    ctx = RunContext(lm, g, horizon(lm, g), SynthTexts(Language.default()), n=6, seed=0)
    p = IdentityProbe(None)
    p.plan(ctx)
    out = p.execute(ctx)
    b = out.bins[0]
    assert b["delta_mean"] == 0.0 and b["ci95"] == [0.0, 0.0] and b["p_value"] == 1.0
    assert (out.arrays["nll_base"] == out.arrays["nll_variant"]).all()
    assert out.metrics["contrast_shift"]["mean"] == 0.0
    assert out.passed


@pytest.mark.parametrize("evaluator", ["cached", "recompute"])
def test_mem0_model_has_exactly_zero_delta_beyond_its_segment(models, tmp_path, evaluator):
    s = probes.run(
        "fact-swap",
        model=models["mem0"],
        distance="17-40,60-90",  # beyond the 16-token segment (recompute: window 0 + 16)
        n=6,
        out=tmp_path,
        evaluator=evaluator,
        progress=False,
    )
    recs = samples(s)
    assert len(recs) == 12
    assert all(r["delta"] == 0.0 for r in recs)
    assert all(r["reach"] == "beyond" for r in recs)
    assert all(r["contrast_base"] == r["contrast_variant"] for r in recs)
    assert [b["reach"] for b in s.bins] == ["beyond", "beyond"]
    assert all(b["delta_mean"] == 0.0 and not b["significant"] for b in s.bins)
    assert s.checks["beyond_reach_zero"]["passed"] and s.checks["beyond_reach_zero"]["n_tokens"] > 0
    assert s.passed


def test_memory_model_reads_inside_its_reach_and_not_beyond(models, tmp_path):
    s = probes.run(
        "fact-swap",
        model=models["mem"],
        distance="8-14,100-140",
        n=6,
        out=tmp_path,
        progress=False,
    )
    recs = samples(s)
    near = [r for r in recs if r["distance"] <= 14]
    far = [r for r in recs if r["distance"] >= 100]
    assert any(r["delta"] != 0.0 for r in near)  # the untrained model does read what it sees
    assert all(r["delta"] == 0.0 and r["reach"] == "beyond" for r in far)
    assert s.bins[0]["reach"] == "direct" and s.bins[1]["reach"] == "beyond"
    assert s.checks["identical_prefix"]["max_abs_delta"] == 0.0


def test_run_directory_contents(models, tmp_path):
    s = probes.run(
        "fact-delete", model=models["mem"], distance="8-20", n=3, out=tmp_path, progress=False
    )
    d = tmp_path / "fact-delete"
    (run_dir,) = list(d.glob("*/*"))
    assert str(run_dir) == s.run_dir
    names = {p.name for p in run_dir.iterdir()}
    assert {
        "run.json",
        "summary.json",
        "samples.jsonl",
        "tokens.npz",
        "delta_by_distance.png",
    } <= names
    run = json.loads((run_dir / "run.json").read_text())
    for key in (
        "schema_version", "argv", "probe", "params", "model", "geometry", "dtype", "evaluator",
        "threads", "seeds", "git", "package_version", "synth", "versions", "machine", "status",
    ):  # fmt: skip
        assert key in run, key
    assert run["status"] == "complete" and run["model"]["sha256"] == s.model["sha256"]
    assert run["synth"]["language_fingerprint"] and "dirty" in run["git"]
    with np.load(run_dir / "tokens.npz", allow_pickle=False) as z:
        assert len(z["nll_base"]) == len(z["pair"]) >= 3


def test_same_seed_same_numbers(models, tmp_path):
    a = probes.run(
        "fact-swap", model=models["mem"], distance="8-20", n=4, out=tmp_path, progress=False
    )
    b = probes.run(
        "fact-swap", model=models["mem"], distance="8-20", n=4, out=tmp_path, progress=False
    )
    c = probes.run(
        "fact-swap", model=models["mem"], distance="8-20", n=4, seed=1, out=tmp_path, progress=False
    )
    assert a.bins == b.bins and a.metrics == b.metrics
    assert a.bins != c.bins


def test_fact_delete_no_fill_shifts_tokens_and_skips_the_beyond_check(models, tmp_path):
    s = probes.run(
        "fact-delete", model=models["mem0"], distance="8-12,60-80", n=3, fill=False,
        out=tmp_path, progress=False,
    )  # fmt: skip
    assert s.params["fill"] is False and s.passed
    assert s.checks["beyond_reach_zero"]["n_tokens"] == 0  # not applicable: later tokens moved


def test_fact_insert_grid_and_heatmap(models, tmp_path):
    s = probes.run(
        "fact-insert", model=models["mem"], distance="8-12,60-80", depth="8,40", n=2,
        out=tmp_path, progress=False,
    )  # fmt: skip
    assert [(b["depth"], b["distance_lo"]) for b in s.bins] == [(8, 8), (8, 60), (40, 8), (40, 60)]
    grid = s.metrics["grid"]
    assert grid["rows_depth"] == [8, 40] and len(grid["delta_mean"][0]) == 2
    assert "insert_heatmap.png" in s.plots and s.passed
    far = [b for b in s.bins if b["distance_lo"] == 60]
    assert all(b["delta_mean"] == 0.0 and b["reach"] == "beyond" for b in far)


class CountingModel:
    """A LossModel that passes everything to `inner` and keeps the rows it was asked to score."""

    def __init__(self, inner):
        self.inner = inner
        self.rows: list[tuple[int, ...]] = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _keep(self, tokens, doc_ids):
        self.rows += [tuple(t[d >= 0].tolist()) for t, d in zip(tokens, doc_ids, strict=True)]

    def score(self, tokens, doc_ids, positions, geometry):
        self._keep(tokens, doc_ids)
        return self.inner.score(tokens, doc_ids, positions, geometry)

    def score_shared(self, tokens, doc_ids, positions, geometry, *, parent, shared):
        self._keep(tokens, doc_ids)
        return self.inner.score_shared(
            tokens, doc_ids, positions, geometry, parent=parent, shared=shared
        )


def test_distractor_cells_share_their_clean_bases(models, tmp_path):
    lm = CountingModel(adapters.load(models["mem"]))
    s = probes.run(
        "distractor", model=lm, k="1,2", distance="32-40", n=3, out=tmp_path, progress=False
    )
    cells = [(b["kind"], b["k"]) for b in s.bins]
    assert cells == [
        ("same_attribute", 1), ("same_attribute", 2), ("same_entity", 1), ("same_entity", 2),
        ("near_miss", 1),
    ]  # fmt: skip
    assert s.metrics["skipped_cells"] == [
        {"kind": "near_miss", "k": 2, "why": s.metrics["skipped_cells"][0]["why"]}
    ]
    recs = samples(s)
    by_base = {}
    for r in recs:
        by_base.setdefault(r["base"], set()).add(r["nll_base"])
    assert all(len(v) == 1 for v in by_base.values())
    # scored once: one row per clean base and one per variant, no text twice
    assert len(lm.rows) == len(by_base) + len(recs) == 3 + 5 * 3
    assert len(set(lm.rows)) == len(lm.rows)
    assert s.passed


def test_probe_from_a_file_runs_and_reruns(models, tmp_path):
    f = tmp_path / "outside.py"
    f.write_text(
        "from dataclasses import dataclass\n"
        "from probes.library.fact_swap import FactSwap\n"
        "from probes.api.registry import probe\n"
        "@probe('outside-swap', version=2)\n"
        "class OutsideSwap(FactSwap):\n"
        "    '''fact-swap under another name'''\n"
        "    @dataclass(frozen=True)\n"
        "    class Params(FactSwap.Params):\n"
        "        pass\n"
    )
    s = probes.run(
        f"{f}:OutsideSwap",
        model=models["mem"],
        distance="8-12",
        n=2,
        out=tmp_path / "o",
        progress=False,
    )
    assert s.probe == "outside-swap" and s.version == 2
    from probes.rerun import rerun

    res = rerun(s.run_dir, str(tmp_path / "again"), progress=False, allow_file_probes=True)
    assert res["match"] == "exact", res["differences"][:3]


def test_an_external_loss_model_goes_through_probes_run(models, tmp_path):
    """Anything with the LossModel protocol (info, tokenizer, default_geometry, score) runs a
    probe like a checkpoint: here the planted model, with no torch and no checkpoint."""
    from probes.adapters.planted import PlantedModel
    from synth.language import Language

    lm = PlantedModel(mem_len=16, tgt_len=16, copy=2.0, tokenizer=Language.default().to_json())
    assert isinstance(lm, LossModel)
    s = probes.run("fact-swap", model=lm, distance="8-14", n=4, mem=8, out=tmp_path, progress=False)
    assert s.model["id"] == lm.info.id and s.geometry["mem_len"] == 8 and s.passed
    assert s.bins[0]["delta_mean"] > 0  # the planted copy reads the fact inside its reach


def test_an_external_model_in_another_language_is_refused(tmp_path):
    from probes.adapters.planted import PlantedModel
    from synth.language import Language, LanguageConfig

    other = Language(LanguageConfig(n_entities=40, seed=3)).to_json()
    with pytest.raises(probes.ProbeInputError, match="language mismatch"):
        probes.run("fact-swap", model=PlantedModel(tokenizer=other), out=tmp_path, progress=False)
    assert not (tmp_path / "fact-swap").exists()


def test_a_library_run_leaves_torch_thread_count_as_it_found_it(models, tmp_path):
    import torch

    before = torch.get_num_threads()
    want = 1 if before != 1 else 2
    s = probes.run(
        "fact-swap", model=models["mem"], distance="8-14", n=2, threads=want, out=tmp_path,
        progress=False,
    )  # fmt: skip
    run = json.loads((tmp_path / "fact-swap").glob("*/*/run.json").__next__().read_text())
    assert run["threads"] == want and s.passed
    assert torch.get_num_threads() == before


def test_the_adapter_states_its_vocabulary_and_leaves_a_model_as_it_is(models):
    import torch

    from txl.checkpoint import load_checkpoint

    model = load_checkpoint(models["mem"]).model.train()
    lm = adapters.wrap(model)
    assert lm.model is model and lm.info.vocab_size == model.config.vocab_size
    tokens = np.arange(2, 42).reshape(1, 40)
    pos = np.zeros(tokens.shape, dtype=bool)
    pos[0, 1:] = True
    a = lm.score(tokens, np.zeros_like(tokens), pos, lm.default_geometry())
    assert model.training  # the training flag is as it was
    model.eval()
    b = lm.score(tokens, np.zeros_like(tokens), pos, lm.default_geometry())
    assert not model.training
    np.testing.assert_array_equal(a.nll, b.nll)
    assert next(model.parameters()).dtype == torch.float32


@given(
    costs=st.lists(st.integers(0, 400_000), max_size=40),
    per_call=st.integers(1, 20),
    group_sizes=st.lists(st.integers(1, 4), min_size=40, max_size=40),
)
def test_a_scoring_call_holds_at_most_its_work_budget_unless_one_group_is_more(
    costs, per_call, group_sizes
):
    """Long texts are scored a few at a time, so progress and samples.jsonl advance; items
    keep their order, every item is scored once, a cut for work never separates items of one
    key (variants sharing a base), and a call closes only when it must."""
    from probes.api.rows import CHUNK_WORK, chunked

    keys = [g for g, size in enumerate(group_sizes) for _ in range(size)][: len(costs)]
    order = list(range(100, 100 + len(costs)))
    chunks = chunked(order, per_call, costs, keys)
    assert [i for c in chunks for i in c] == order
    cost = {i: costs[i - 100] for i in order}
    key = {i: keys[i - 100] for i in order}
    for c in chunks:
        assert 1 <= len(c) <= per_call
        if sum(cost[i] for i in c) > CHUNK_WORK:
            assert len({key[i] for i in c}) == 1  # one group, costlier than a call
    for a, b in itertools.pairwise(chunks):
        if len(a) == per_call:
            continue
        assert key[a[-1]] != key[b[0]]  # cut for work between groups only ...
        group = [i for i in order if key[i] == key[b[0]]]
        assert sum(cost[i] for i in [*a, *group]) > CHUNK_WORK  # ... and only when it must
    assert chunked(order, per_call, None) == [
        order[s : s + per_call] for s in range(0, len(order), per_call)
    ]
