"""The transformers adapters' exact guarantees at any thread count, and what their numbers mean:
float64 runs its loss in float64, sinks are within every later token's reach, a learned-position
model's default geometry fits its position table, the window evaluator's memory estimate covers
the forwards it runs. Skipped without the `hf` extra (`nox -s hf` runs it)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REQUIRED = os.environ.get("TXL_REQUIRE_HF") == "1"
transformers = __import__("transformers") if REQUIRED else pytest.importorskip("transformers")

from click.testing import CliRunner  # noqa: E402
from token_rows import rows  # noqa: E402

from probes.adapters import hf_load  # noqa: E402
from probes.cli.main import cli  # noqa: E402
from probes.testing import (  # noqa: E402
    RECURRENT_FAMILIES,
    TRANSFORMERS_FAMILIES,
    tiny_transformers,
)
from synth.language import Language  # noqa: E402
from txl.geometry import Geometry  # noqa: E402

V = Language.default().vocab.size
HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf-exact")
    for f in TRANSFORMERS_FAMILIES + RECURRENT_FAMILIES:
        tiny_transformers(root / f, f, max_positions=128, sliding_window=12)
    return root


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_exact_zeros_reset_and_forks_hold_at_any_thread_count(root, threads):
    """Identical inputs in identical shapes: one row (a recurrent model: one piece) per forward,
    so a row's numbers do not depend on where it sits in a batch (at 2 threads an AMD EPYC
    rounded them differently), for every evaluator of attention and recurrent models."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, str(HERE / "hf_exact_worker.py"), str(root), str(V),
         ",".join(TRANSFORMERS_FAMILIES + RECURRENT_FAMILIES)],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]
    assert f"threads {threads}: 0 failures" in out.stdout


def test_float64_computes_the_loss_in_float64(root):
    import torch

    m = hf_load.load(root / "llama", evaluator="full", dtype="float64")
    tokens, docs, scored = rows(n=30, b=1)
    nll = m.score(tokens, docs, scored, Geometry(tgt_len=8, mem_len=0, clamp_len=None)).nll[0, 1:]
    with torch.inference_mode():
        logits = m.model(input_ids=torch.from_numpy(tokens)).logits[0, :-1]
    assert logits.dtype == torch.float64
    logp = torch.log_softmax(logits, -1)
    theirs = -logp.gather(-1, torch.from_numpy(tokens[0, 1:])[:, None])[:, 0].numpy()
    np.testing.assert_allclose(nll, theirs, rtol=0, atol=1e-12)
    assert (nll.astype(np.float32).astype(np.float64) != nll).any()  # not float32 in disguise


def test_a_sink_is_seen_by_every_later_token_unless_every_layer_slides(root):
    g = Geometry(tgt_len=6, mem_len=10, clamp_len=None, reset=False)
    llama = hf_load.load(root / "llama", evaluator="sinks").horizon(g)
    assert llama.label(500, 2) == "direct" and llama.within_reach(500, 3)
    assert llama.label(500, 4) == "beyond"  # the fifth token is no sink
    assert hf_load.load(root / "llama", evaluator="stream").horizon(g).label(500, 2) == "beyond"
    # Mistral's own window masks the sinks: `sinks` computes what `stream` does
    assert hf_load.load(root / "mistral", evaluator="sinks").horizon(g).label(500, 2) == "beyond"
    # Gemma 3: the global last layer sees them
    assert hf_load.load(root / "gemma3", evaluator="sinks").horizon(g).label(500, 2) == "direct"


def test_cross_doc_with_sinks_does_not_claim_b_is_blind_to_a(root, tmp_path):
    r = CliRunner().invoke(
        cli,
        ["run", "cross-doc", "--model", str(root / "llama"), "--evaluator", "sinks", "--mem",
         "16", "--tgt-len", "8", "--n", "1", "--quick", "--json", "--out", str(tmp_path)],
    )  # fmt: skip
    assert r.exit_code == 0, r.output


@pytest.fixture(scope="module")
def gpt2_2048(tmp_path_factory):
    return tiny_transformers(tmp_path_factory.mktemp("gpt2") / "m", "gpt2", max_positions=2048)


def test_a_learned_position_models_default_geometry_fits_its_positions(gpt2_2048, tmp_path):
    for evaluator in ("stream", "sinks"):
        r = CliRunner().invoke(
            cli,
            ["run", "fact-swap", "--model", str(gpt2_2048), "--evaluator", evaluator, "--n", "1",
             "--json", "--out", str(tmp_path)],
        )  # fmt: skip
        assert r.exit_code == 0, r.output


def test_distances_past_a_learned_position_table_are_refused_before_a_run_exists(
    gpt2_2048, tmp_path
):
    r = CliRunner().invoke(
        cli,
        ["run", "fact-swap", "--model", str(gpt2_2048), "--distance", "3000-3100", "--n", "1",
         "--out", str(tmp_path / "out")],
    )  # fmt: skip
    assert r.exit_code == 2
    assert "positions" in r.output and "Traceback" not in r.output
    assert not (tmp_path / "out").exists()


MEMORY_CHILD = """
import resource, sys
import numpy as np
from probes.adapters import hf_load
from txl.geometry import Geometry
m = hf_load.load(sys.argv[1], evaluator="window")
W = 2048
g = Geometry(tgt_len=64, mem_len=W - 64, clamp_len=None, reset=False)
rng = np.random.default_rng(0)
tok = rng.integers(0, 300, (1, W + 8))
docs = np.zeros_like(tok)
pos = np.zeros(tok.shape, dtype=bool)
pos[0, -4:] = True
warm = pos.copy()
warm[:] = False
warm[0, 20] = True
m.score(tok, docs, warm, g)  # a short forward: what the first call allocates once
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
m.score(tok, docs, pos, g)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(after - before, m.row_bytes(g))
"""


def test_the_window_evaluators_memory_estimate_covers_its_forwards(tmp_path):
    """Peak RSS of W = 2,048 windows (measured in a child) within the estimate checked before a
    run (it once counted tgt_len queries where the evaluator forwards all W)."""
    d = tiny_transformers(tmp_path / "m", "llama", max_positions=4096, hidden=64, n_head=8)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", MEMORY_CHILD, str(d)], env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    measured, estimate = (int(x) for x in out.stdout.split())
    assert measured <= estimate + 32 * 2**20, (measured, estimate)


def test_a_fork_born_where_its_parent_stops_scoring_starts_from_the_parents_cache(root):
    """A parent whose scored tokens end at its fork's segment still lends its cache there."""
    m = hf_load.load(root / "llama", evaluator="stream")
    tokens, docs, _ = rows(n=40, b=1, seed=5)
    two = np.repeat(tokens, 2, 0)
    two[1, 25:] = (two[1, 25:] + 1) % V
    scored = np.zeros_like(two, dtype=bool)
    scored[0, 1:17] = True
    scored[1, 21:39] = True
    g = Geometry(tgt_len=8, mem_len=16, clamp_len=None, reset=False)
    d2 = np.repeat(docs, 2, 0)
    forked = m.score_shared(two, d2, scored, g, parent=np.array([-1, 0]), shared=np.array([0, 20]))
    assert np.array_equal(forked.nll, m.score(two, d2, scored, g).nll, equal_nan=True)


def test_float64_on_a_recurrent_model_is_float64_or_refused(root):
    """transformers' Mamba casts its logits to float32 whatever its weights: float64 there
    would be float32 in disguise, so it is refused; RWKV keeps float64."""
    from probes.api.errors import AdapterError

    with pytest.raises(AdapterError, match="returns float32 logits"):
        hf_load.load(root / "mamba", evaluator="state", dtype="float64")
    m = hf_load.load(root / "rwkv", evaluator="state", dtype="float64")
    tokens, docs, scored = rows(n=20, b=1)
    values = m.score(tokens, docs, scored, Geometry(8, 0, clamp_len=None)).nll[0, 1:]
    assert (values.astype(np.float32).astype(np.float64) != values).any()


def test_full_on_a_long_context_model_is_not_refused_for_its_position_table(tmp_path):
    d = tiny_transformers(tmp_path / "m", "llama", max_positions=131072)
    r = CliRunner().invoke(
        cli,
        ["run", "fact-swap", "--model", str(d), "--evaluator", "full", "--n", "1", "--mem", "0",
         "--tgt-len", "8", "--distance", "8-16", "--json", "--out", str(tmp_path / "o")],
    )  # fmt: skip
    assert r.exit_code == 0, r.output


def test_a_bin_whose_facts_sit_among_the_sinks_is_not_labelled_beyond(root, tmp_path):
    r = CliRunner().invoke(
        cli,
        ["run", "fact-swap", "--model", str(root / "llama"), "--evaluator", "sinks", "--sinks",
         "64", "--mem", "8", "--tgt-len", "8", "--distance", "60-70", "--lead", "1-8", "--n",
         "2", "--json", "--out", str(tmp_path)],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    import json

    b = json.loads(r.output)["bins"][0]
    assert b["reach"] == "direct", b
