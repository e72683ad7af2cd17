"""The evaluators: one alignment (nll[t] is the loss of predicting token t), streaming continuation,
and the recompute baseline (a fresh window per scored token)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from txl_helpers import POS_ENCS, one_thread, tiny_model  # noqa: F401 (one_thread: autouse)

from txl.evaluator import recompute_nll, stream_nll
from txl.geometry import Geometry
from txl.kv_memory import KVMemory

VOCAB = 17
TOL = dict(rtol=0.0, atol=1e-6)


MODELS = {p: tiny_model(VOCAB, max_pos=9, pos_enc=p) for p in POS_ENCS}


def _data(seed: int, B: int = 2, N: int = 15, n_docs: int = 2):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, VOCAB, size=(B, N))
    docs = np.sort(rng.integers(0, n_docs, size=(B, N)), axis=1)
    return tokens, docs


def _close(a, b):
    assert np.array_equal(np.isnan(a), np.isnan(b))
    torch.testing.assert_close(
        torch.from_numpy(np.nan_to_num(a)), torch.from_numpy(np.nan_to_num(b)), **TOL
    )


@pytest.mark.parametrize("pos_enc", POS_ENCS)
def test_stream_nll_at_t_is_the_loss_of_token_t(pos_enc):
    model = MODELS[pos_enc]
    tokens, docs = _data(1)
    docs[1, -3:] = -1  # padding targets are NaN
    result = stream_nll(model, tokens, docs, Geometry(14, 0), dtype=torch.float64)
    with torch.no_grad():
        logits = model(torch.as_tensor(tokens[:, :-1]), torch.as_tensor(docs[:, :-1]),
                       geometry=Geometry(14, 0), return_logits=True).logits  # fmt: skip
    logp = torch.log_softmax(logits, -1).numpy()  # (B, N−1, V) predicts tokens[:, 1:]
    expected = np.full(tokens.shape, np.nan)
    for b in range(2):
        for t in range(1, 15):
            if docs[b, t] >= 0:
                expected[b, t] = -logp[b, t - 1, tokens[b, t]]
    _close(result.nll, expected)
    assert np.isnan(result.nll[:, 0]).all()
    argmax_ok = logp.argmax(-1) == tokens[:, 1:]
    np.testing.assert_array_equal(result.correct[:, 1:], argmax_ok & (docs[:, 1:] >= 0))
    assert not result.correct[:, 0].any()


@pytest.mark.parametrize("pos_enc", POS_ENCS)
@given(tgt=st.integers(1, 5), mem=st.integers(0, 6), seed=st.integers(0, 2**16))
def test_rows_that_read_nothing_in_a_segment_skip_its_outputs_under_every_encoding(
    pos_enc, tgt, mem, seed
):
    """The hidden-state memory (every encoding, absolute ones too) under `positions`: a row's
    read segments score as when everything is read, the others stay NaN, the memory is the
    same bits."""
    model = MODELS[pos_enc]
    tokens, docs = _data(seed)
    read = np.random.default_rng(seed).random(tokens.shape) < 0.1
    g = Geometry(tgt, mem)
    every = stream_nll(model, tokens, docs, g, dtype=torch.float64, cache="hidden")
    few = stream_nll(model, tokens, docs, g, dtype=torch.float64, cache="hidden", positions=read)
    for start in range(0, tokens.shape[1] - 1, tgt):
        cols = slice(start + 1, start + tgt + 1)
        rows = read[:, cols].any(axis=1)
        _close(few.nll[rows, cols], every.nll[rows, cols])
        assert np.isnan(few.nll[~rows, cols]).all()
    for a, b in zip(few.memory.states, every.memory.states, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("pos_enc", POS_ENCS)
@given(k=st.integers(1, 3), tgt=st.integers(1, 4), mem=st.integers(0, 6))
def test_stream_continues_from_returned_memory_with_one_token_overlap(pos_enc, k, tgt, mem):
    """Prefix tokens[:P] then tokens[P−1:] with the returned memory = one stream (segments aligned:
    P − 1 a multiple of tgt_len)."""
    model = MODELS[pos_enc]
    tokens, docs = _data(2, N=16)
    geometry = Geometry(tgt, mem, clamp_len=None)
    P = k * tgt + 1
    whole = stream_nll(model, tokens, docs, geometry, dtype=torch.float64)
    head = stream_nll(model, tokens[:, :P], docs[:, :P], geometry, dtype=torch.float64)
    tail = stream_nll(
        model,
        tokens[:, P - 1 :],
        docs[:, P - 1 :],
        geometry,
        memory=head.memory,
        dtype=torch.float64,
    )
    _close(whole.nll[:, :P], head.nll)
    _close(whole.nll[:, P:], tail.nll[:, 1:])
    np.testing.assert_array_equal(whole.correct[:, P:], tail.correct[:, 1:])
    for a, b in zip(_cached(whole.memory), _cached(tail.memory), strict=True):
        torch.testing.assert_close(a, b, **TOL)


def _cached(memory) -> tuple:
    """The tensors a memory caches per layer: hidden states, or keys and values."""
    if isinstance(memory, KVMemory):
        return (*memory.keys, *memory.values)
    return memory.states


@pytest.mark.parametrize("pos_enc", POS_ENCS)
@given(window=st.integers(1, 8), reset=st.booleans(), clamp=st.one_of(st.none(), st.integers(1, 5)))
def test_recompute_scores_each_token_from_a_fresh_window(pos_enc, window, reset, clamp):
    """nll[b, t] = the last-position loss of one forward over tokens[b, t−window : t], no memory."""
    model = MODELS[pos_enc]
    tokens, docs = _data(3, N=12, n_docs=3)
    result = recompute_nll(
        model, tokens, docs, window, clamp_len=clamp, reset=reset, batch_size=5, dtype=torch.float64
    )
    assert result.memory.length == 0
    expected = np.full(tokens.shape, np.nan)
    with torch.no_grad():
        for b in range(2):
            for t in range(1, 12):
                lo = max(0, t - window)
                x = torch.as_tensor(tokens[b : b + 1, lo:t])
                d = torch.as_tensor(docs[b : b + 1, lo:t])
                y = torch.as_tensor(tokens[b : b + 1, lo + 1 : t + 1])
                g = Geometry(t - lo, 0, clamp_len=clamp, reset=reset)
                expected[b, t] = model(x, d, targets=y, geometry=g).nll[0, -1].item()
    _close(result.nll, expected)


@pytest.mark.parametrize("pos_enc", ["rel", "shaw"])
def test_recompute_with_a_window_covering_everything_equals_one_pass(pos_enc):
    """Relative variants only: an absolute variant numbers positions from each window's end."""
    model = MODELS[pos_enc]
    tokens, docs = _data(4, N=13, n_docs=3)
    one_pass = stream_nll(model, tokens, docs, Geometry(12, 0, clamp_len=None), dtype=torch.float64)
    recompute = recompute_nll(model, tokens, docs, 20, dtype=torch.float64)
    _close(recompute.nll, one_pass.nll)
    np.testing.assert_array_equal(recompute.correct, one_pass.correct)


def test_recompute_scores_only_requested_positions():
    model = MODELS["rel"]
    tokens, docs = _data(5, N=12)
    positions = np.zeros(tokens.shape, dtype=bool)
    positions[0, [0, 3, 11]] = True
    positions[1, 5] = True
    full = recompute_nll(model, tokens, docs, 4, dtype=torch.float64)
    some = recompute_nll(model, tokens, docs, 4, positions=positions, dtype=torch.float64)
    scored = positions.copy()
    scored[:, 0] = False  # nothing predicts the first token
    _close(some.nll, np.where(scored, full.nll, np.nan))
    assert not some.correct[~scored].any()


def test_evaluators_refuse_bad_input_with_one_line():
    model = MODELS["rel"]
    tokens, docs = _data(6)
    with pytest.raises(ValueError, match="same shape"):
        stream_nll(model, tokens, docs[:, :-1], Geometry(4, 4))
    with pytest.raises(ValueError, match="window"):
        recompute_nll(model, tokens, docs, 0)
