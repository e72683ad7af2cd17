"""The cached adapter's choice of memory (`--cache kv|hidden|auto`): both kinds score the same
pairs alike, the choice is recorded in run.json, and a rerun of a run recorded before the choice
existed repeats it on hidden states."""

import json

import numpy as np
import pytest
import torch

import probes
from probes.adapters import txl as adapters
from probes.api.errors import AdapterError
from probes.api.model import geometry
from probes.api.probe_base import ProbeInputError
from probes.testing import tiny_checkpoint
from txl.checkpoint import save_checkpoint
from txl.config import TXLConfig
from txl.model import TransformerXL


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    from synth.language import Language

    root = tmp_path_factory.mktemp("cache-models")
    lang = Language.default()
    torch.manual_seed(0)
    absolute = TransformerXL(
        TXLConfig(
            vocab_size=lang.vocab.size,
            n_layer=2,
            d_model=16,
            n_head=2,
            d_head=8,
            d_inner=32,
            tgt_len=16,
            mem_len=16,
            pos_enc="abs",
            init_std=0.5,
        )
    )
    save_checkpoint(root / "abs", absolute, tokenizer=lang.to_json(), training={"note": "test"})
    return {"rel": tiny_checkpoint(root / "rel", mem_len=16, tgt_len=16), "abs": root / "abs"}


def _forked_rows(seed: int = 0):
    rng = np.random.default_rng(seed)
    R, N = 4, 70
    tokens = np.tile(rng.integers(2, 300, size=N), (R, 1))
    tokens[1, 33:] = rng.integers(2, 300, size=N - 33)  # child of 0 from 33
    tokens[2, 50:] = rng.integers(2, 300, size=N - 50)  # child of 0 from 50
    tokens[3] = rng.integers(2, 300, size=N)
    docs = np.zeros((R, N), dtype=np.int64)
    docs[3, 40:] = 1  # a second document: reset applies across the cached positions
    pos = np.ones((R, N), dtype=bool)
    pos[:, 0] = False
    return tokens, docs, pos, np.array([-1, 0, 0, -1]), np.array([0, 33, 50, 0])


@pytest.mark.parametrize("same_length", [False, True])
def test_kv_and_hidden_memory_score_forked_rows_alike(model_dirs, same_length):
    kv = adapters.load(model_dirs["rel"], cache="kv")
    hidden = adapters.load(model_dirs["rel"], cache="hidden")
    assert kv.info.cache["memory"] == "kv" and hidden.info.cache["memory"] == "hidden"
    g = geometry(kv, tgt_len=8, mem_len=20, clamp_len=12, same_length=same_length)
    tokens, docs, pos, parent, shared = _forked_rows()
    a = kv.score_shared(tokens, docs, pos, g, parent=parent, shared=shared)
    b = hidden.score_shared(tokens, docs, pos, g, parent=parent, shared=shared)
    np.testing.assert_allclose(a.nll, b.nll, rtol=0, atol=2e-5)
    plain = kv.score(tokens, docs, pos, g)  # forking changes nothing, bitwise
    np.testing.assert_array_equal(a.nll, plain.nll)


def test_auto_takes_kv_for_relative_positions_and_hidden_for_absolute(model_dirs):
    rel = adapters.load(model_dirs["rel"])
    assert (
        rel.info.cache
        == {
            "memory": "kv",
            "requested": "auto",
            "why": rel.info.cache["why"],
        }
        and "relative" in rel.info.cache["why"]
    )
    absolute = adapters.load(model_dirs["abs"])
    assert absolute.info.cache["memory"] == "hidden"
    assert "window-relative" in absolute.info.cache["why"]
    with pytest.raises(AdapterError, match="not exact"):
        adapters.load(model_dirs["abs"], cache="kv")
    assert "cache" not in adapters.load(model_dirs["rel"], evaluator="recompute").info.to_dict()


def test_a_run_records_its_memory_and_a_run_before_the_choice_reruns_on_hidden_states(
    model_dirs, tmp_path
):
    from probes.rerun import rerun

    summary = probes.run(
        "fact-swap", model=str(model_dirs["rel"]), quick=True, out=str(tmp_path), progress=False
    )
    record = json.loads((tmp_path / summary.run_dir / "run.json").read_text())
    assert record["options"]["cache"] is None and record["model"]["cache"]["memory"] == "kv"

    hidden = probes.run(
        "fact-swap",
        model=str(model_dirs["rel"]),
        quick=True,
        cache="hidden",
        out=str(tmp_path),
        progress=False,
    )
    run_json = tmp_path / hidden.run_dir / "run.json"
    old = json.loads(run_json.read_text())
    assert old["model"]["cache"]["memory"] == "hidden"
    # as a run recorded before --cache existed: no option, no model record of it
    del old["options"]["cache"], old["model"]["cache"]
    run_json.write_text(json.dumps(old))
    again = rerun(hidden.run_dir, out=str(tmp_path / "again"), progress=False)
    assert again["match"] == "exact", again["differences"][:3]
    redone = json.loads((tmp_path / "again" / again["rerun"] / "run.json").read_text())
    assert redone["options"]["cache"] == "hidden"


def test_cache_is_refused_for_a_model_object(model_dirs):
    lm = adapters.load(model_dirs["rel"])
    with pytest.raises(ProbeInputError, match="drop --cache"):
        probes.run("fact-swap", model=lm, quick=True, cache="kv", progress=False)
