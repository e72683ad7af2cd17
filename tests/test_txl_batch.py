"""Property 6: batch independence — a row's NLL depends neither on the other rows nor on padding."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from txl_helpers import POS_ENCS, one_thread, tiny_model  # noqa: F401 (one_thread: autouse)

from txl.evaluator import stream_nll
from txl.geometry import Geometry

VOCAB = 17


MODELS = {p: tiny_model(VOCAB, max_pos=9, pos_enc=p) for p in POS_ENCS}


@st.composite
def batches(draw):
    B = draw(st.integers(2, 3))
    N = draw(st.integers(2, 13))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    tokens = rng.integers(0, VOCAB, size=(B, N))
    docs = np.sort(rng.integers(0, 3, size=(B, N)), axis=1)
    docs[rng.random((B, N)) < draw(st.sampled_from([0.0, 0.2, 0.5]))] = -1
    return tokens, docs, rng


@st.composite
def geometries(draw):
    tgt = draw(st.integers(1, 5))
    mem = draw(st.integers(0, 7))
    same = draw(st.booleans()) if mem > 0 else False
    clamp = draw(st.one_of(st.none(), st.integers(1, 6)))
    return Geometry(tgt, mem, clamp_len=clamp, same_length=same, reset=draw(st.booleans()))


def _nll(model, tokens, docs, geometry):
    return stream_nll(model, tokens, docs, geometry, dtype=torch.float64).nll


def _close(a, b):
    assert np.array_equal(np.isnan(a), np.isnan(b))
    torch.testing.assert_close(
        torch.from_numpy(np.nan_to_num(a)), torch.from_numpy(np.nan_to_num(b)), rtol=0.0, atol=1e-6
    )


@pytest.mark.parametrize("pos_enc", POS_ENCS)
@given(batch=batches(), geometry=geometries())
def test_row_nll_does_not_depend_on_other_rows(pos_enc, batch, geometry):
    tokens, docs, _ = batch
    model = MODELS[pos_enc]
    together = _nll(model, tokens, docs, geometry)
    for b in range(len(tokens)):
        _close(together[b : b + 1], _nll(model, tokens[b : b + 1], docs[b : b + 1], geometry))


@pytest.mark.parametrize("pos_enc", POS_ENCS)
@given(batch=batches(), geometry=geometries())
def test_nll_does_not_depend_on_padding_content(pos_enc, batch, geometry):
    """Redraw every padding token (doc id −1): the loss of any real token predicted from a real
    token is unchanged (padding keys are never attended, in the segment or in the memory)."""
    tokens, docs, rng = batch
    other = np.where(docs < 0, rng.integers(0, VOCAB, size=tokens.shape), tokens)
    model = MODELS[pos_enc]
    real = np.zeros_like(docs, dtype=bool)
    real[:, 1:] = (docs[:, 1:] >= 0) & (docs[:, :-1] >= 0)
    a = _nll(model, tokens, docs, geometry)
    b = _nll(model, other, docs, geometry)
    _close(np.where(real, a, np.nan), np.where(real, b, np.nan))
