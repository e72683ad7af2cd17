"""probes.adapters.hf on tiny random transformers models built here from configs (GPT-2-style:
learned absolute positions; Llama-style: rotary; Mistral-style: rotary + sliding_window), saved
with save_pretrained and loaded offline. Each property is named after the invariant it proves.
Skipped without the `hf` extra (transformers >= 5): `nox -s hf` runs it."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

# `nox -s hf` sets TXL_REQUIRE_HF=1: there a missing extra is a failure, not a skip
REQUIRED = os.environ.get("TXL_REQUIRE_HF") == "1"
transformers = __import__("transformers") if REQUIRED else pytest.importorskip("transformers")

from click.testing import CliRunner  # noqa: E402
from token_rows import fact_swap_units, rows  # noqa: E402

from probes.adapters import hf, hf_load  # noqa: E402
from probes.api.errors import AdapterError  # noqa: E402
from probes.cli.main import cli  # noqa: E402
from probes.testing import TRANSFORMERS_FAMILIES, tiny_checkpoint, tiny_transformers  # noqa: E402
from synth.language import Language  # noqa: E402
from txl.geometry import Geometry  # noqa: E402

V = Language.default().vocab.size
SW = 12  # the Mistral-style model's sliding window


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    return {
        f: tiny_transformers(root / f, f, max_positions=128, sliding_window=SW)
        for f in TRANSFORMERS_FAMILIES
    }


_loaded: dict = {}


def lm(dirs, family, evaluator, sinks=None):
    key = (family, evaluator, sinks)
    if key not in _loaded:
        _loaded[key] = hf_load.load(dirs[family], evaluator=evaluator, sinks=sinks)
    return _loaded[key]


def geo(mem, tgt, reset=True):
    return Geometry(tgt_len=tgt, mem_len=mem, clamp_len=None, reset=reset)


@pytest.mark.parametrize("family", TRANSFORMERS_FAMILIES)
def test_full_equals_the_models_own_forward_on_one_document(dirs, family):
    """The explicit mask and positions reproduce the model's own (causal, sliding) attention."""
    import torch

    m = lm(dirs, family, "full")
    tokens, docs, scored = rows(n=40, b=1)
    ours = m.score(tokens, docs, scored, geo(0, 8)).nll[0, 1:]
    with torch.inference_mode():
        logits = m.model(input_ids=torch.from_numpy(tokens)).logits.float()
    logp = torch.log_softmax(logits[0, :-1], -1)
    theirs = -logp.gather(-1, torch.from_numpy(tokens[0, 1:])[:, None])[:, 0].numpy()
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


@pytest.mark.parametrize("family", TRANSFORMERS_FAMILIES)
@pytest.mark.parametrize("reset", [True, False])
def test_window_with_W_at_least_the_row_equals_full(dirs, family, reset):
    tokens, docs, scored = rows(n=40, boundary=17)
    g = geo(40, 8, reset)
    full = lm(dirs, family, "full").score(tokens, docs, scored, g)
    win = lm(dirs, family, "window").score_window(tokens, docs, scored, 40, g)
    np.testing.assert_allclose(win.nll[:, 1:], full.nll[:, 1:], atol=1e-5)
    assert (win.correct == full.correct).all()


@pytest.mark.parametrize("family", TRANSFORMERS_FAMILIES)
@pytest.mark.parametrize("tgt", [1, 5, 16])
@pytest.mark.parametrize("reset", [True, False])
def test_stream_with_mem_covering_everything_before_equals_full(dirs, family, tgt, reset):
    tokens, docs, scored = rows(n=40, boundary=23)
    g = geo(40, tgt, reset)
    full = lm(dirs, family, "full").score(tokens, docs, scored, g)
    for evaluator in ("stream", "sinks"):
        out = lm(dirs, family, evaluator).score(tokens, docs, scored, g)
        np.testing.assert_allclose(out.nll[:, 1:], full.nll[:, 1:], atol=1e-5)


@pytest.mark.parametrize("family", TRANSFORMERS_FAMILIES)
@pytest.mark.parametrize("evaluator", hf.EVALUATORS)
def test_under_reset_Bs_nll_is_independent_of_As_content(dirs, family, evaluator):
    """A varies in content at fixed length (docs/design.md, *Memory, reset and geometry*); with
    positions restarting at the boundary this holds for learned absolute positions too."""
    b = 21
    tokens, docs, scored = rows(n=44, b=1, boundary=b)
    other = tokens.copy()
    other[0, 1:b] = np.random.default_rng(9).integers(0, V, b - 1)
    g = geo(12, 5)
    m = lm(dirs, family, evaluator)
    x = m.score(np.concatenate([tokens, other]), np.repeat(docs, 2, 0), np.repeat(scored, 2, 0), g)
    # B's first content token is predicted from its <eod> (position b): targets b + 1 …
    assert np.array_equal(x.nll[0, b + 1 :], x.nll[1, b + 1 :])
    assert not np.array_equal(x.nll[0, 2:b], x.nll[1, 2:b])  # A itself did change


@pytest.mark.parametrize("family", TRANSFORMERS_FAMILIES)
@pytest.mark.parametrize("evaluator", hf.EVALUATORS)
def test_an_identical_pair_gives_delta_zero_exactly(dirs, family, evaluator):
    tokens, docs, scored = rows(n=36, b=1, boundary=15)
    m = lm(dirs, family, evaluator)
    for reset in (True, False):
        x = m.score(np.repeat(tokens, 3, 0), np.repeat(docs, 3, 0), np.repeat(scored, 3, 0),
                    geo(8, 6, reset))  # fmt: skip
        assert np.array_equal(x.nll[0], x.nll[1], equal_nan=True)
        assert np.array_equal(x.nll[0], x.nll[2], equal_nan=True)


CASES = [  # (family, evaluator, mem, tgt, scored position)
    ("llama", "stream", 10, 6, 60),
    ("gpt2", "stream", 7, 4, 50),
    ("mistral", "stream", 16, 8, 70),  # the model's window (12) binds inside the cache's
    ("llama", "sinks", 10, 6, 60),
    ("llama", "window", 13, 4, 60),
    ("gpt2", "window", 9, 3, 40),
    ("mistral", "window", 30, 4, 70),  # reach 1 + 2·(12 − 1) = 23 < W = 34
    ("mistral", "full", 0, 8, 70),
    # Gemma 3's local and global layers: a sliding first layer (12) under a global last one
    ("gemma3", "stream", 16, 8, 70),
    ("gemma3", "window", 30, 4, 70),
    ("gemma3", "sinks", 10, 6, 60),
]


@pytest.mark.parametrize(("family", "evaluator", "mem", "tgt", "t"), CASES)
def test_the_horizon_is_exact(dirs, family, evaluator, mem, tgt, t):
    """A token at distance = reach changes the scored token's NLL; one at reach + 1 does not
    (exactly); and the reported direct window is the last distance the last layer reads."""
    m = lm(dirs, family, evaluator)
    g = geo(mem, tgt, reset=False)
    h = m.horizon(g)
    direct, reach = h.token(t)
    assert reach < t - hf.DEFAULT_SINKS  # perturbations stay clear of the row start and sinks
    tokens, docs, _ = rows(n=t + 1, b=1, seed=3)
    scored = np.zeros_like(docs, dtype=bool)
    scored[0, t] = True
    variants = [tokens]
    for d in (reach, reach + 1):
        v = tokens.copy()
        v[0, t - d] = (v[0, t - d] + 1) % V
        variants.append(v)
    x = m.score(np.concatenate(variants), np.repeat(docs, 3, 0), np.repeat(scored, 3, 0), g)
    assert x.nll[0, t] != x.nll[1, t], "the token at distance = reach must be seen"
    assert x.nll[0, t] == x.nll[2, t], "the token at distance reach + 1 must not be seen"
    assert direct <= reach


def test_sinks_are_seen_at_any_distance_and_stream_forgets_them(dirs):
    tokens, docs, _ = rows(n=61, b=1, seed=4)
    scored = np.zeros_like(docs, dtype=bool)
    scored[0, 60] = True
    v = tokens.copy()
    v[0, 2] = (v[0, 2] + 1) % V  # inside the first 4 tokens, far beyond the stream's reach
    g = geo(10, 6, reset=False)
    both = (np.concatenate([tokens, v]), np.repeat(docs, 2, 0), np.repeat(scored, 2, 0), g)
    sinks = lm(dirs, "llama", "sinks").score(*both)
    stream = lm(dirs, "llama", "stream").score(*both)
    assert sinks.nll[0, 60] != sinks.nll[1, 60]
    assert stream.nll[0, 60] == stream.nll[1, 60]
    assert lm(dirs, "llama", "sinks").info.extra["sinks"] == hf.DEFAULT_SINKS


def test_a_sliding_window_model_reports_its_window_in_the_horizon(dirs):
    h = lm(dirs, "mistral", "stream").horizon(geo(64, 8))
    assert h.to_dict()["sliding_window"] == SW
    assert h.to_dict()["direct_window"] == {"min": SW, "max": SW}
    assert lm(dirs, "mistral", "full").info.extra["sliding_window"] == SW


def test_rows_beyond_the_models_positions_are_refused_naming_the_limit(dirs):
    tokens, docs, scored = rows(n=140, b=1)
    for family, evaluator in (("llama", "full"), ("gpt2", "full"), ("gpt2", "stream")):
        with pytest.raises(AdapterError, match="128 positions"):
            lm(dirs, family, evaluator).score(tokens, docs, scored, geo(16, 8, reset=False))
    # rotary positions continue past the table in stream (scores depend on distance only)
    out = lm(dirs, "llama", "stream").score(tokens, docs, scored, geo(16, 8, reset=False))
    assert np.isfinite(out.nll[0, 1:]).all()


def test_a_directory_that_is_not_a_usable_model_is_refused_naming_the_path(dirs, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(AdapterError, match=r"has no config\.json") as e:
        hf_load.load(empty)
    assert str(empty) in str(e.value)
    no_type = tmp_path / "no-type"
    no_type.mkdir()
    (no_type / "config.json").write_text("{}")
    with pytest.raises(AdapterError, match="no model_type"):
        hf_load.load(no_type)
    no_weights = tmp_path / "no-weights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text((Path(dirs["llama"]) / "config.json").read_text())
    with pytest.raises(AdapterError, match="no safetensors weights"):
        hf_load.load(no_weights)
    with pytest.raises(AdapterError, match="does not fit a transformers model"):
        hf_load.load(dirs["llama"], evaluator="cached")


def test_the_transformer_xl_cache_option_is_refused_for_a_transformers_model(dirs):
    from probes.api.probe_base import ProbeInputError
    from probes.framework.models import ModelCache

    with pytest.raises(ProbeInputError, match="drop --cache"):
        ModelCache().get(Path(dirs["llama"]), evaluator=None, device="cpu", dtype="float32",
                         cache="kv")  # fmt: skip


def invoke(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


@pytest.fixture(scope="module")
def small_vocab(tmp_path_factory):
    return tiny_transformers(tmp_path_factory.mktemp("v") / "small", "llama", vocab_size=V - 10)


@pytest.fixture(scope="module")
def txl_model(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("t") / "txl")


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("cached on transformers", "does not fit a transformers model"),
        ("stream on Transformer-XL", "does not fit the Transformer-XL checkpoint"),
        ("small vocabulary", "is smaller than the language's"),
        ("hf: missing", "has no config.json"),
        ("clamp-len", "--clamp-len is a Transformer-XL option"),
        ("sinks without sinks", "--sinks applies to --evaluator sinks only"),
    ],
)
def test_a_model_that_does_not_fit_is_one_line_exit_2(
    dirs, small_vocab, txl_model, tmp_path, case, needle
):
    llama = str(dirs["llama"])
    args = {
        "cached on transformers": ["--model", llama, "--evaluator", "cached"],
        "stream on Transformer-XL": ["--model", str(txl_model), "--evaluator", "stream"],
        "small vocabulary": ["--model", str(small_vocab)],
        "hf: missing": ["--model", f"hf:{tmp_path}"],
        "clamp-len": ["--model", llama, "--clamp-len", "8"],
        "sinks without sinks": ["--model", llama, "--evaluator", "stream", "--sinks", "2"],
    }[case]
    out = tmp_path / "out"
    r = invoke(["run", "fact-swap", *args, "--out", str(out), "--quick", "--quiet"])
    assert r.exit_code == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("spec", ["dir", "hf:"])
def test_cli_fact_swap_with_stream_on_a_saved_model_keeps_the_json_contract(dirs, tmp_path, spec):
    model = str(dirs["llama"]) if spec == "dir" else f"hf:{dirs['mistral']}"
    r = invoke(["run", "fact-swap", "--model", model, "--evaluator", "stream", "--mem", "64",
                "--quick", "--json", "--threads", "1", "--out", str(tmp_path)])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert r.stderr == ""
    doc = json.loads(r.stdout)
    assert doc["probe"] == "fact-swap" and isinstance(doc["version"], int)
    assert {"id", "path", "sha256"} <= set(doc["model"]) and len(doc["model"]["sha256"]) == 64
    assert doc["evaluator"] == "stream"
    assert doc["geometry"]["mem_len"] == 64 and doc["geometry"]["clamp_len"] is None
    assert {"direct_window", "layered_reach", "n_layer"} <= set(doc["horizon"])
    assert doc["n_pairs"] > 0
    assert {"delta_mean", "delta_ci95", "p_value", "accuracy"} <= set(doc["metrics"])
    for b in doc["bins"]:
        assert {"distance_lo", "distance_hi", "n", "delta_mean", "ci95", "p_value", "reach",
                "within_horizon"} <= set(b)  # fmt: skip
    assert doc["passed"] is True, doc["checks"]
    assert doc["checks"]["beyond_reach_zero"]["status"] == "passed"
    run = json.loads((Path(doc["run_dir"]) / "run.json").read_text())
    assert run["model"]["evaluator"] == "stream"
    assert run["model"]["extra"]["library"] == "transformers"
    assert run["options"]["evaluator"] == "stream"


def test_full_without_a_sliding_window_reads_the_whole_row_so_nothing_is_beyond(dirs, tmp_path):
    long = tiny_transformers(tmp_path / "llama-512", "llama", max_positions=512)
    """`full` has an unbounded horizon (probes.api.horizon.UNBOUNDED): auto bins stay within a short
    text, every bin is direct and the beyond-reach check is not applicable."""
    h = lm(dirs, "llama", "full").horizon(geo(0, 8))
    assert h.unbounded and h.to_dict()["layered_reach"] == {"min": None, "max": None}
    assert not lm(dirs, "mistral", "full").horizon(geo(0, 8)).unbounded  # its window binds
    r = invoke(["run", "fact-swap", "--model", str(long), "--evaluator", "full",
                "--quick", "--json", "--threads", "1", "--out", str(tmp_path / "out")])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["horizon"]["unbounded"] is True
    assert {b["reach"] for b in doc["bins"]} == {"direct"}
    assert doc["checks"]["beyond_reach_zero"]["status"] == "not applicable"


@pytest.mark.slow
def test_diagnose_runs_on_a_transformers_model(dirs, tmp_path):
    r = invoke(["diagnose", "--model", str(dirs["llama"]), "--quick", "--json", "--threads", "1",
                "--out", str(tmp_path)])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["passed"] is True
    assert {"fact-swap", "cross-doc", "boundary"} <= {row["probe"] for row in doc["rows"]}


def shared_rows(n=44, seed=6):
    """Row 0 a root; 1 and 2 fork from 0 after 13 and 30 shared tokens; 3 from 1 after 21; 4
    unrelated; 5 shares less than one segment with 0."""
    tokens, docs, scored = rows(n=n, b=6, boundary=19, seed=seed)
    rng = np.random.default_rng(seed + 1)
    shared = np.array([0, 13, 30, 21, 0, 2])
    parent = np.array([-1, 0, 0, 1, -1, 0])
    for r in (1, 2, 3, 5):
        p, k = parent[r], shared[r]
        tokens[r, :k] = tokens[p, :k]
        tokens[r, k] = (tokens[p, k] + 1 + rng.integers(0, V - 1)) % V
    scored[3, 35:] = False  # rows end at different places
    return tokens, docs, scored, parent, shared


@pytest.mark.parametrize("family", TRANSFORMERS_FAMILIES)
@pytest.mark.parametrize("evaluator", ["stream", "sinks", "full"])
@pytest.mark.parametrize(("mem", "tgt", "reset"), [(10, 6, True), (7, 4, False), (40, 8, False)])
def test_score_shared_equals_score(dirs, family, evaluator, mem, tgt, reset):
    """Forking a parent's cache inside the shared prefix — at its last segment boundary when
    streaming, where it ends under `full` — scores every row as `score` does; a fork's shared
    targets are its parent's scores, and rows forked at the same place from rows with the same
    tokens compute what follows in identical shapes (bitwise equal)."""
    tokens, docs, scored, parent, shared = shared_rows()
    m = lm(dirs, family, evaluator)
    g = geo(mem, tgt, reset)
    plain = m.score(tokens, docs, scored, g)
    forked = m.score_shared(tokens, docs, scored, g, parent=parent, shared=shared)
    np.testing.assert_allclose(forked.nll, plain.nll, atol=1e-5)
    assert np.isnan(forked.nll).tolist() == np.isnan(plain.nll).tolist()
    assert (forked.correct == plain.correct).all()
    # row 2 forked from row 0 at the last boundary <= 29 (full: one-token segments)
    b = 29 if evaluator == "full" else (29 // tgt) * tgt
    assert np.array_equal(forked.nll[2, 1 : b + 1], forked.nll[0, 1 : b + 1])


def test_full_forks_a_contrast_row_where_its_answer_starts(dirs):
    """A base, its variant (an edit at 5) and each one's contrast row (the answer at 30
    replaced): the contrast rows cost their answers only, and base and variant are computed in
    identical shapes, so a target the edit cannot change (another document under reset) keeps
    exactly its base score in the variant."""
    tokens, docs, scored = rows(n=40, b=4, boundary=20, seed=3)
    tokens[1] = tokens[0]
    tokens[1, 5] = (tokens[0, 5] + 1) % V
    tokens[2], tokens[3] = tokens[0], tokens[1]
    tokens[2:, 30:33] = (tokens[0, 30:33] + 2) % V
    docs[:] = docs[0]
    m = lm(dirs, "llama", "full")
    g = geo(0, 8, True)
    parent, shared = np.array([-1, 0, 0, 1]), np.array([0, 5, 30, 30])
    forked = m.score_shared(tokens, docs, scored, g, parent=parent, shared=shared)
    plain = m.score(tokens, docs, scored, g)
    np.testing.assert_allclose(forked.nll, plain.nll, atol=1e-5)
    later = np.flatnonzero(scored[0] & (np.arange(40) > 20))  # B's tokens, blind to A's edit
    assert later.size and np.array_equal(forked.nll[0, later], forked.nll[1, later])


def test_the_row_memory_estimate_grows_with_the_memory_it_is_asked_about(dirs):
    from probes.api.model import geometry, row_bytes

    m = lm(dirs, "llama", "stream")
    small, big = (row_bytes(m, geometry(m, mem_len=k)) for k in (16, 4096))
    assert 0 < small < big and m.max_rows(geometry(m, mem_len=16)) >= 1


@pytest.mark.parametrize(
    ("device", "gpus", "accelerate", "want"),
    [
        ("cpu", 4, True, {}),
        ("cuda", 1, True, {}),
        ("cuda", 2, False, {}),
        ("cuda", 2, True, {"device_map": "auto"}),
        ("cuda:1", 2, True, {}),
    ],
)
def test_a_model_is_spread_over_gpus_only_with_several_and_accelerate(
    monkeypatch, device, gpus, accelerate, want
):
    import importlib.util

    import torch

    real = importlib.util.find_spec
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: (object() if accelerate else None) if name == "accelerate" else real(name),
    )
    assert hf_load.placement(device) == want


@pytest.mark.cuda
@pytest.mark.skipif(
    not __import__("torch").cuda.is_available(), reason="needs CUDA (run where a GPU exists)"
)
@pytest.mark.parametrize("family", ["llama", "mistral"])
def test_on_cuda_the_adapter_scores_as_on_the_cpu(dirs, family):
    tokens, docs, scored = rows(n=40, b=2, boundary=17)
    g = geo(16, 8)
    cpu = hf_load.load(dirs[family], evaluator="stream").score(tokens, docs, scored, g)
    gpu_lm = hf_load.load(dirs[family], evaluator="stream", device="cuda")
    assert gpu_lm.info.device == "cuda"
    gpu = gpu_lm.score(tokens, docs, scored, g)
    np.testing.assert_allclose(gpu.nll[scored], cpu.nll[scored], atol=1e-4)
    bf16 = hf_load.load(dirs[family], evaluator="stream", device="cuda", dtype="bfloat16")
    assert bf16.info.dtype == "bfloat16"
    got = bf16.score(tokens, docs, scored, g)
    assert np.isfinite(got.nll[scored]).all()


def test_full_keeps_a_shared_bases_variants_in_its_shapes_so_blind_tokens_stay_exact(dirs):
    """One base, two variants (edits at 3 and at f2) and the mistral model's sliding window:
    tokens past the first edit's reach are blind to it, so variant 1 must score them bitwise as
    the base does — whatever the other variant's fork point cuts into the base."""
    m = lm(dirs, "mistral", "full")
    n = 120
    tokens, docs, scored = rows(n=n, b=3, seed=3)
    docs[:] = docs[0]
    tokens[1], tokens[2] = tokens[0], tokens[0]
    tokens[1, 3] = (tokens[0, 3] + 1) % V
    reach = m.n_layer * SW
    blind = np.arange(3 + reach + 2, n)
    for f2 in range(3 + reach + 4, n - 1, 9):
        t = tokens.copy()
        t[2, f2] = (t[0, f2] + 1) % V
        x = m.score_shared(t, docs, scored, geo(0, 8, False), parent=np.array([-1, 0, 0]),
                           shared=np.array([0, 3, f2]))  # fmt: skip
        assert np.array_equal(x.nll[0, blind], x.nll[1, blind]), f2


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_full_forwards_a_base_and_its_variant_at_one_index_of_calls_of_one_shape(
    dirs, family, monkeypatch
):
    """Units of several pairs go to one forward (hf_lockstep), yet every piece of text a base
    and its identical variant both forward is forwarded at the same batch index of calls of the
    same shape (so they round alike at any thread count), and the scores equal `score`'s."""
    m = lm(dirs, family, "full")
    tokens, docs, scored, parent, shared = fact_swap_units((44, 40, 36, 41, 30, 38), V)
    seen, batches = {}, []
    body = m._body

    def spy(ids, pos, visible, cache=None):
        v = visible if isinstance(visible, np.ndarray) else next(iter(visible.values()))
        batches.append(len(ids))
        for i, row in enumerate(ids):
            seen.setdefault(tuple(row.tolist()), set()).add((i, ids.shape, v.shape))
        return body(ids, pos, visible, cache)

    monkeypatch.setattr(m, "_body", spy)
    x = m.score_shared(tokens, docs, scored, geo(0, 8, False), parent=parent, shared=shared)
    monkeypatch.undo()
    assert max(batches) > 1, batches
    assert all(len(where) == 1 for where in seen.values()), [w for w in seen.values() if len(w) > 1]
    for u in range(6):
        assert np.array_equal(x.nll[4 * u], x.nll[4 * u + 1], equal_nan=True)
    plain = m.score(tokens, docs, scored, geo(0, 8, False))
    np.testing.assert_allclose(x.nll, plain.nll, atol=1e-5)


@pytest.mark.parametrize("family", TRANSFORMERS_FAMILIES)
@pytest.mark.parametrize(
    ("reset", "boundary"), [(False, None), (False, 50), (True, None), (True, 50)]
)
def test_a_long_row_through_blocked_attention_scores_as_the_masked_forward(
    dirs, family, reset, boundary, monkeypatch
):
    """`full` forwards one row of BLOCKED_KEYS keys or more with no mask, by blocks of queries
    (`hf_blocked`) — unless its documents must not see each other (reset, two documents): the
    scores equal the masked forward's within float32 rounding, blocks smaller than the sliding
    windows and a padded tail included, every layer at its own window, and a base and its
    identical variant still agree bit for bit."""
    from probes.adapters import hf_blocked

    m = hf_load.load(dirs[family], evaluator="full")  # its own check of blocked attention
    tokens, docs, scored = rows(n=100, b=3, boundary=boundary, seed=4)
    tokens[1:] = tokens[0]
    docs[2, 90:] = -1  # a padded tail, which no real token sees
    scored[2, 90:] = False
    g = geo(0, 8, reset)
    masked = m.score(tokens, docs, scored, g)
    windows = []
    attend = hf_blocked.blocked_attention

    def spy(module, *args, **kw):
        windows.append(kw["windows"][module.layer_idx])
        return attend(module, *args, **kw)

    monkeypatch.setattr(hf, "BLOCKED_KEYS", 16)
    monkeypatch.setattr(hf_blocked, "blocked_attention", spy)
    assert m._blocked_implementation() is not None
    m._blocked_name = hf_blocked.register(m.layer_windows, block=7)  # blocks below the windows
    windows.clear()
    blocked = m.score(tokens, docs, scored, g)
    whole_rows = list(windows)  # (score_shared's first piece, before the boundary, is one document)
    shared = m.score_shared(
        tokens[:2], docs[:2], scored[:2], g, parent=np.array([-1, 0]), shared=np.array([0, 30])
    )
    monkeypatch.undo()
    hf_blocked.register(m.layer_windows)  # the real function under the shared name again
    one_rule = not (reset and boundary)
    assert bool(whole_rows) == one_rule, len(whole_rows)
    if one_rule:
        assert len(whole_rows) == 3 * m.n_layer
        assert set(whole_rows) == set(m.layer_windows)
    np.testing.assert_allclose(blocked.nll, masked.nll, atol=1e-5)
    np.testing.assert_allclose(shared.nll, masked.nll[:2], atol=1e-5)
    assert np.array_equal(shared.nll[0], shared.nll[1], equal_nan=True)
    assert np.array_equal(blocked.nll[0, :90], blocked.nll[2, :90], equal_nan=True)


def test_a_model_whose_blocked_attention_differs_keeps_the_masked_forward(dirs, monkeypatch):
    """Blocked attention is checked against the masked forward before a model uses it; a model
    where it computes something else (here: attention that ignores causality, as a model whose
    layers pick their own kernels would without a mask) scores every row masked."""
    from probes.adapters import hf_blocked

    def everything_visible(module, query, key, value, attention_mask, scaling=None, **kw):
        import torch

        out = torch.nn.functional.scaled_dot_product_attention(
            query, key, value, scale=scaling, enable_gqa=query.shape[1] != key.shape[1]
        )
        return out.transpose(1, 2).contiguous(), None

    m = hf_load.load(dirs["llama"], evaluator="full")
    tokens, docs, scored = rows(n=60, b=1, seed=2)
    masked = m.score(tokens, docs, scored, geo(0, 8, False))
    monkeypatch.setattr(hf, "BLOCKED_KEYS", 16)
    monkeypatch.setattr(hf_blocked, "blocked_attention", everything_visible)
    assert m._blocked_implementation() is None
    again = m.score(tokens, docs, scored, geo(0, 8, False))
    monkeypatch.undo()
    hf_blocked.register(m.layer_windows)
    assert np.array_equal(again.nll, masked.nll, equal_nan=True)


def test_a_parent_that_names_no_row_is_refused(dirs):
    m = lm(dirs, "llama", "full")
    tokens, docs, scored = rows(n=20, b=2)
    with pytest.raises(ValueError, match="row index below 2"):
        m.score_shared(tokens, docs, scored, geo(0, 8), parent=np.array([-1, 9]),
                       shared=np.array([0, 0]))  # fmt: skip


def test_a_contrast_row_under_full_forwards_its_answer_only(dirs, monkeypatch):
    """Base, variant and each one's contrast row (3 answer tokens replaced at 30): the two
    contrast rows add 3 + 3 forwarded tokens, not two more rows."""
    m = lm(dirs, "llama", "full")
    tokens, docs, scored = rows(n=34, b=4, seed=5)
    tokens[1:] = tokens[0]
    tokens[1, 5] = (tokens[0, 5] + 1) % V
    tokens[3] = tokens[1]
    tokens[2:, 30:33] = (tokens[0, 30:33] + 2) % V
    scored[:] = False
    scored[:, 30:33] = True
    forwarded = []
    body = m._body
    monkeypatch.setattr(
        m, "_body", lambda ids, *a, **k: forwarded.append(np.size(ids)) or body(ids, *a, **k)
    )
    m.score_shared(tokens, docs, scored, geo(0, 8, False), parent=np.array([-1, 0, 0, 1]),
                   shared=np.array([0, 5, 30, 30]))  # fmt: skip
    # base: inputs 0 … 31; variant from 4 (fork_plan: b + 1 <= shared); each contrast row
    # from 29 to its last input 31
    assert sum(forwarded) == 32 + (32 - 4) + 3 + 3, forwarded


def test_long_nll_under_sinks_is_stream_until_the_cache_first_cuts(dirs, tmp_path):
    """Both evaluators see the whole text until the cache is first cut (mem 16: the targets up
    to 17 at least), bitwise; after it the kept first tokens change the scores."""
    out = {}
    for ev in ("stream", "sinks"):
        sinks = ["--sinks", "2"] if ev == "sinks" else []
        r = invoke(["run", "long-nll", "--model", str(dirs["llama"]), "--evaluator", ev, *sinks,
                    "--mem", "16", "--tgt-len", "8", "--length", "96", "--n", "2", "--json",
                    "--threads", "1", "--out", str(tmp_path)])  # fmt: skip
        assert r.exit_code == 0, r.stderr
        with np.load(Path(json.loads(r.stdout)["run_dir"]) / "tokens.npz") as z:
            out[ev] = (z["position"], z["nll"])
    (pos, stream), (_, sinks) = out["stream"], out["sinks"]
    early = pos <= 17
    assert np.array_equal(stream[early], sinks[early])
    assert not np.array_equal(stream[pos > 24], sinks[pos > 24])


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_cache_positions_keep_every_distance_so_a_window_scores_as_with_text_positions(
    dirs, family
):
    """Under `stream` every cached key is a recent one, so re-indexing positions inside the
    cache (re-rotating the kept keys to their slots) changes no query–key distance: the scores
    equal text positions' within float32 rounding, bitwise before the first cut. Under `sinks`
    the sinks come closer to every query, and the scores move."""
    tokens, docs, scored = rows(n=60, b=2, seed=4)
    g = geo(12, 4, reset=False)
    moved = {}
    for ev in ("stream", "sinks"):
        text = hf_load.load(dirs[family], evaluator=ev)
        cache = hf_load.load(dirs[family], evaluator=ev, cache_positions=True)
        assert cache.info.extra["cached_positions"] == "cache"
        a, b = text.score(tokens, docs, scored, g).nll, cache.score(tokens, docs, scored, g).nll
        assert np.array_equal(a[:, 1:17], b[:, 1:17])  # nothing cut yet (mem 12 + tgt 4)
        moved[ev] = np.abs(a[:, 1:] - b[:, 1:]).max()
    assert moved["stream"] < 1e-4 < moved["sinks"]


def test_cache_positions_are_refused_where_there_is_nothing_to_reindex(dirs):
    for family, ev in (("llama", "full"), ("llama", "window"), ("gpt2", "stream")):
        with pytest.raises(AdapterError, match="--cache-positions"):
            hf_load.load(dirs[family], evaluator=ev, cache_positions=True)


def test_cache_positions_refusals_name_what_would_work(dirs, tmp_path):
    mamba = tiny_transformers(tmp_path / "mamba", "mamba")
    with pytest.raises(AdapterError, match="not state"):  # before the weights are read
        hf_load.load(mamba, cache_positions=True)
    m = hf_load.load(dirs["llama"], evaluator="sinks", cache_positions=True)
    tokens, docs, scored = rows(n=40, b=1, boundary=20, seed=2)
    with pytest.raises(AdapterError, match="--carry"):
        m.score(tokens, docs, scored, geo(8, 4, True))
    m.score(tokens, docs, scored, geo(8, 4, False))  # one stream of slots: fine under carry


def test_the_sinks_report_judges_every_claim_from_runs_of_one_cache_size(dirs, tmp_path):
    """long-nll under full, window, stream and 1 / 4 / 8 sinks at a cache of 16 (sinks + recent),
    and stream at another size: the claims rest on the runs of one size, each with an interval."""
    from probes.report import sinks as report

    runs = []
    for ev, k, mem in (
        ("full", None, 16),
        ("window", None, 16),
        ("stream", None, 16),
        ("stream", None, 8),
        ("sinks", 1, 15),
        ("sinks", 4, 12),
        ("sinks", 8, 8),
    ):
        extra = ["--sinks", str(k)] if k else []
        r = invoke(["run", "long-nll", "--model", str(dirs["llama"]), "--evaluator", ev, *extra,
                    "--mem", str(mem), "--tgt-len", "8", "--length", "96", "--n", "3", "--json",
                    "--threads", "1", "--out", str(tmp_path)])  # fmt: skip
        assert r.exit_code == 0, r.stderr
        runs.append(json.loads(r.stdout)["run_dir"])
    out = tmp_path / "sinks.md"
    assert report.main([*runs, "--out", str(out)]) == 0
    (table,) = json.loads(out.with_suffix(".json").read_text())
    sizes = {}
    for c in table["claims"]:
        sizes.setdefault(c["claim"].split("(cache ")[1].split(")")[0], []).append(c)
    assert sorted(sizes) == ["16", "8"] and len(sizes["16"]) == len(sizes["8"]) == 4
    assert all(c["difference"]["ci95"] and c["result"] != "not measured" for c in sizes["16"])
    assert all(c["result"] == "not measured" for c in sizes["8"])  # no other policy at 8
