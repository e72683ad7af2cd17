"""probes.adapters.hf_state (the `state` evaluator) on tiny random recurrent transformers models
built here from configs (Mamba: a selective scan; RWKV), saved with save_pretrained and loaded
offline. Each property is named after the invariant it proves. Skipped without the `hf` extra
(transformers >= 5): `nox -s hf` runs it."""

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

# `nox -s hf` sets TXL_REQUIRE_HF=1: there a missing extra is a failure, not a skip
REQUIRED = os.environ.get("TXL_REQUIRE_HF") == "1"
transformers = __import__("transformers") if REQUIRED else pytest.importorskip("transformers")

from click.testing import CliRunner  # noqa: E402
from token_rows import rows  # noqa: E402

from probes.adapters import hf_load, hf_state  # noqa: E402
from probes.api.errors import AdapterError  # noqa: E402
from probes.api.horizon import UNBOUNDED  # noqa: E402
from probes.cli.main import cli  # noqa: E402
from probes.testing import RECURRENT_FAMILIES, tiny_transformers  # noqa: E402
from synth.language import Language  # noqa: E402
from txl.geometry import Geometry  # noqa: E402

V = Language.default().vocab.size


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf-state")
    return {f: tiny_transformers(root / f, f) for f in RECURRENT_FAMILIES}


_loaded: dict = {}


def lm(dirs, family, evaluator=None):
    key = (family, evaluator)
    if key not in _loaded:
        _loaded[key] = hf_load.load(dirs[family], evaluator=evaluator)
    return _loaded[key]


def geo(reset=True, mem=0, tgt=8):
    return Geometry(tgt_len=tgt, mem_len=mem, clamp_len=None, reset=reset)


def stepped_nll(model, tokens: np.ndarray) -> np.ndarray:
    """NLL of targets 1 … n − 1 of one row, fed to the model one token per call through its own
    cache (Mamba: `cache`; RWKV: `state`) — the recurrence itself."""
    import torch

    kw = "state" if model.config.model_type == "rwkv" else "cache"
    ids = torch.from_numpy(tokens[None])
    logits, carried = [], None
    with torch.inference_mode():
        for t in range(tokens.size - 1):
            extra = {} if carried is None else {kw: carried}
            out = model(input_ids=ids[:, t : t + 1], use_cache=True, **extra)
            carried = getattr(out, kw)
            logits.append(out.logits.float())
    logp = torch.log_softmax(torch.cat(logits, 1)[0], -1)
    return -logp.gather(-1, torch.from_numpy(tokens[1:])[:, None])[:, 0].double().numpy()


@pytest.mark.parametrize("family", RECURRENT_FAMILIES)
def test_recurrent_models_default_to_state_and_record_it(dirs, family):
    m = lm(dirs, family)
    assert isinstance(m, hf_state.HFStateModel)
    assert m.evaluator == m.info.evaluator == "state"
    assert m.info.extra["library"] == "transformers"
    assert m.info.extra["model_type"] == family
    assert m.default_geometry().mem_len == 0


@pytest.mark.parametrize("family", RECURRENT_FAMILIES)
def test_carry_one_whole_row_forward_equals_one_token_stepping(dirs, family):
    """The state carries: scoring the row in one forward from a fresh state is the recurrence
    stepped token by token through the model's own cache (float32 tolerance)."""
    m = lm(dirs, family)
    tokens, docs, scored = rows(n=40, b=1, boundary=17)
    ours = m.score(tokens, docs, scored, geo(reset=False)).nll[0, 1:]
    np.testing.assert_allclose(ours, stepped_nll(m.model, tokens[0]), atol=2e-5)


@pytest.mark.parametrize("family", RECURRENT_FAMILIES)
def test_reset_scores_each_document_from_a_fresh_state(dirs, family):
    """Under reset, B's tokens after its <eod> score as B alone scored from a fresh state."""
    b = 17
    m = lm(dirs, family)
    tokens, docs, scored = rows(n=40, b=1, boundary=b)
    x = m.score(tokens, docs, scored, geo(reset=True)).nll[0]
    np.testing.assert_allclose(x[b + 1 :], stepped_nll(m.model, tokens[0, b:]), atol=2e-5)
    # B's <eod> is predicted from the end of A, like the attention evaluators do
    np.testing.assert_allclose(x[1 : b + 1], stepped_nll(m.model, tokens[0, : b + 1]), atol=2e-5)


@pytest.mark.parametrize("family", RECURRENT_FAMILIES)
def test_under_reset_Bs_nll_is_independent_of_As_content(dirs, family):
    b = 21
    tokens, docs, scored = rows(n=44, b=1, boundary=b)
    other = tokens.copy()
    other[0, 1:b] = np.random.default_rng(9).integers(0, V, b - 1)
    m = lm(dirs, family)
    x = m.score(
        np.concatenate([tokens, other]), np.repeat(docs, 2, 0), np.repeat(scored, 2, 0), geo()
    )
    assert np.array_equal(x.nll[0, b + 1 :], x.nll[1, b + 1 :])  # bitwise
    assert not np.array_equal(x.nll[0, 2:b], x.nll[1, 2:b])  # A itself did change


@pytest.mark.parametrize("family", RECURRENT_FAMILIES)
@pytest.mark.parametrize("evaluator", hf_state.STATE_EVALUATORS)
def test_an_identical_pair_gives_delta_zero_exactly(dirs, family, evaluator):
    tokens, docs, scored = rows(n=36, b=1, boundary=15)
    m = lm(dirs, family, evaluator)
    for reset in (True, False):
        g = geo(reset, mem=8 if evaluator == "window" else 0, tgt=6)
        x = m.score(np.repeat(tokens, 3, 0), np.repeat(docs, 3, 0), np.repeat(scored, 3, 0), g)
        assert np.array_equal(x.nll[0], x.nll[1], equal_nan=True)
        assert np.array_equal(x.nll[0], x.nll[2], equal_nan=True)


@pytest.mark.parametrize("family", RECURRENT_FAMILIES)
@pytest.mark.parametrize("distance", [3, 40, 150])
def test_a_token_at_any_distance_reaches_under_carry_but_not_across_a_reset(dirs, family, distance):
    """The reach of a state is unbounded: a token changed `distance` back changes the scored
    token's NLL under carry; across a document boundary under reset it changes nothing."""
    t = 160
    tokens, _, _ = rows(n=t + 1, b=1, seed=3)
    docs = np.zeros_like(tokens)
    docs[0, t - 2 :] = 1  # the scored token's query is in a document starting at t − 2
    scored = np.zeros_like(docs, dtype=bool)
    scored[0, t] = True
    v = tokens.copy()
    v[0, t - distance] = (v[0, t - distance] + 1) % V
    both = (np.concatenate([tokens, v]), np.repeat(docs, 2, 0), np.repeat(scored, 2, 0))
    m = lm(dirs, family)
    carry = m.score(*both, geo(reset=False))
    reset = m.score(*both, geo(reset=True))
    assert carry.nll[0, t] != carry.nll[1, t]
    assert reset.nll[0, t] == reset.nll[1, t]
    h = m.horizon(geo(reset=False))
    assert h.unbounded and h.state
    assert h.token(t) == (0, t)  # nothing attended directly, everything through the state
    assert h.to_dict()["direct_window"] == {"min": None, "max": None}
    assert h.to_dict()["state"] is True
    assert h.ranges()[1][1] >= UNBOUNDED


def test_window_on_a_recurrent_model_is_a_fresh_state_over_exactly_W_tokens(dirs):
    """`window` (and score_window): a token at distance W changes the score, one at W + 1 not;
    with W >= the row it equals `state` under carry."""
    m = lm(dirs, "mamba", "window")
    g = geo(reset=False, mem=9, tgt=3)
    t, w = 40, 12
    assert m.horizon(g).token(t) == (w, w)
    tokens, docs, _ = rows(n=t + 1, b=1, seed=5)
    scored = np.zeros_like(docs, dtype=bool)
    scored[0, t] = True
    variants = [tokens]
    for d in (w, w + 1):
        v = tokens.copy()
        v[0, t - d] = (v[0, t - d] + 1) % V
        variants.append(v)
    x = m.score(np.concatenate(variants), np.repeat(docs, 3, 0), np.repeat(scored, 3, 0), g)
    assert x.nll[0, t] != x.nll[1, t]
    assert x.nll[0, t] == x.nll[2, t]
    tokens, docs, scored = rows(n=30, boundary=11)
    for reset in (True, False):
        whole = m.score_window(tokens, docs, scored, 30, geo(reset))
        state = lm(dirs, "mamba").score(tokens, docs, scored, geo(reset))
        np.testing.assert_allclose(whole.nll[:, 1:], state.nll[:, 1:], atol=2e-5)


@pytest.mark.parametrize("family", RECURRENT_FAMILIES)
def test_attention_evaluators_on_a_recurrent_model_are_refused_naming_what_fits(dirs, family):
    for evaluator in ("full", "stream", "sinks"):
        with pytest.raises(AdapterError, match="use state or window") as e:
            hf_load.load(dirs[family], evaluator=evaluator)
        assert str(dirs[family]) in str(e.value) and family in str(e.value)
    with pytest.raises(ValueError, match="--evaluator state carries the recurrent state"):
        lm(dirs, family).check_geometry(geo(mem=64))


def test_state_on_a_transformer_is_refused(tmp_path):
    llama = tiny_transformers(tmp_path / "llama", "llama", max_positions=64)
    with pytest.raises(AdapterError, match="state is for recurrent models"):
        hf_load.load(llama, evaluator="state")


def invoke(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("stream on mamba", "use state or window"),
        ("mem with state", "--evaluator state carries the recurrent state"),
    ],
)
def test_a_recurrent_model_that_does_not_fit_is_one_line_exit_2(dirs, tmp_path, case, needle):
    args = {
        "stream on mamba": ["--evaluator", "stream"],
        "mem with state": ["--evaluator", "state", "--mem", "64"],
    }[case]
    out = tmp_path / "out"
    r = invoke(["run", "fact-swap", "--model", str(dirs["mamba"]), *args, "--out", str(out),
                "--quick", "--quiet"])  # fmt: skip
    assert r.exit_code == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("family", RECURRENT_FAMILIES)
def test_cli_fact_swap_with_state_on_a_saved_model_keeps_the_json_contract(dirs, tmp_path, family):
    start = time.monotonic()
    r = invoke(["run", "fact-swap", "--model", str(dirs[family]), "--evaluator", "state",
                "--quick", "--json", "--threads", "1", "--out", str(tmp_path)])  # fmt: skip
    print(f"{family}: probe run fact-swap --evaluator state --quick: "
          f"{time.monotonic() - start:.1f} s")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert r.stderr == ""
    doc = json.loads(r.stdout)
    assert doc["probe"] == "fact-swap" and isinstance(doc["version"], int)
    assert {"id", "path", "sha256"} <= set(doc["model"]) and len(doc["model"]["sha256"]) == 64
    assert doc["evaluator"] == "state"
    assert doc["geometry"]["mem_len"] == 0 and doc["geometry"]["clamp_len"] is None
    assert doc["horizon"]["unbounded"] is True and doc["horizon"]["state"] is True
    assert doc["n_pairs"] > 0
    assert {"delta_mean", "delta_ci95", "p_value", "accuracy"} <= set(doc["metrics"])
    for b in doc["bins"]:
        assert {"distance_lo", "distance_hi", "n", "delta_mean", "ci95", "p_value", "reach",
                "within_horizon"} <= set(b)  # fmt: skip
        assert b["reach"] == "state" and b["within_horizon"] is True  # a state holds it
    assert doc["checks"]["beyond_reach_zero"]["status"] == "not applicable"
    assert doc["passed"] is True, doc["checks"]
    run = json.loads((Path(doc["run_dir"]) / "run.json").read_text())
    assert run["model"]["evaluator"] == "state"
    assert run["model"]["extra"]["model_type"] == family
    assert run["options"]["evaluator"] == "state"


def diagnose_txl_and_mamba(dirs, tmp_path, probe):
    """`diagnose --models TXL,MAMBA --mem 32 --quick` with one probe of the suite left:
    (its summary, the Transformer-XL's id, the Mamba's)."""
    from probes.suite.plan import suite
    from probes.testing import tiny_checkpoint

    txl = tiny_checkpoint(tmp_path / "txl")
    skip = [a for p in suite() if p != probe for a in ("--skip", p)]
    r = invoke(["diagnose", "--models", f"{txl},{dirs['mamba']}", "--mem", "32", "--quick",
                "--json", "--threads", "1", "--out", str(tmp_path / "out"), *skip])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    txl_id, mamba_id = (m["id"] for m in doc["models"])
    return doc, txl_id, mamba_id


def test_diagnose_models_leaves_a_state_model_at_its_own_geometry_beside_mem(dirs, tmp_path):
    """`--models TXL,MAMBA --mem M`: the Transformer-XL runs at mem M; no memory length applies
    to a recurrent state, so the Mamba keeps its own geometry and the summary says so."""
    doc, txl_id, mamba_id = diagnose_txl_and_mamba(dirs, tmp_path, "fact-swap")
    assert doc["geometry"][txl_id]["mem_len"] == 32
    assert doc["geometry"][mamba_id]["mem_len"] == 0
    assert doc["mem_not_applicable"] == [mamba_id]
    within = next(e for e in doc["effects"] if e["effect"] == "retrieval within the horizon")
    assert within["values"][mamba_id]["n"] > 0  # a fact in the state is within its horizon


def test_boundary_does_not_apply_to_a_state_and_diagnose_runs_it_on_the_other_model(dirs, tmp_path):
    """A recurrent state is carried through every segment start: `probe run boundary` on it is
    refused in one line; `diagnose --models TXL,MAMBA` runs boundary on the Transformer-XL only
    and names what it left out."""
    r = invoke(["run", "boundary", "--model", str(dirs["mamba"]), "--quick",
                "--out", str(tmp_path / "one")])  # fmt: skip
    assert r.exit_code == 2 and "carried through every segment start" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    doc, txl_id, mamba_id = diagnose_txl_and_mamba(dirs, tmp_path, "boundary")
    repair = next(e for e in doc["effects"] if e["effect"] == "boundary repair")
    assert set(repair["values"]) == {txl_id}
    assert any(s.startswith("boundary on ") for s in doc["skipped"])
    assert set(doc["runs"][txl_id]) == {"boundary"} and doc["runs"][mamba_id] == {}


def test_a_state_model_sweeps_its_context_past_its_empty_memory(dirs, tmp_path):
    """A state has no window (its geometry's mem_len is 0): context-sweep's 'auto' contexts run
    to 1,024 tokens unless --max-context says, not to tgt_len."""
    r = invoke(["run", "context-sweep", "--model", str(dirs["mamba"]), "--quick", "--json",
                "--threads", "1", "--out", str(tmp_path)])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["metrics"]["max_context"] == 1024
    r = invoke(["run", "context-sweep", "--model", str(dirs["mamba"]), "--quick", "--json",
                "--threads", "1", "--max-context", "128", "--out", str(tmp_path)])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["metrics"]["max_context"] == 128
