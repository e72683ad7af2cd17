"""Property 6: batch independence — a row's NLL depends neither on the other rows nor on padding."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from txl.config import TXLConfig
from txl.evaluator import stream_nll
from txl.geometry import Geometry
from txl.model import TransformerXL

VOCAB = 17
POS_ENCS = ("rel", "shaw", "abs", "learned")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _model(pos_enc: str) -> TransformerXL:
    config = TXLConfig(
        vocab_size=VOCAB,
        n_layer=2,
        d_model=16,
        n_head=2,
        d_head=8,
        d_inner=32,
        tgt_len=4,
        mem_len=4,
        init_std=0.3,
        max_pos=9,
        pos_enc=pos_enc,
    )
    torch.manual_seed(0)
    return TransformerXL(config).double().eval()


MODELS = {p: _model(p) for p in POS_ENCS}


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
