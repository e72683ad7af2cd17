"""Properties 1 and 2: document reset is exact, and carry is not reset.

Convention (docs/design.md, *Documents and `<eod>`*): `<eod>` opens document B and carries B's doc id; the loss of predicting `<eod>`
belongs to A; B's first content token is predicted from `<eod>`. So "B's NLL" is nll[t] for t from
the first token after `<eod>` to B's end.

What reset promises, precisely: B's losses do not depend on anything before its boundary —
(a) whatever A's content at a fixed length, for any mem_len (every variant, absolute ones included);
(b) whatever A's length, so wherever the boundary falls in a segment, when mem_len ≥ len(B): then B
    sees all of itself at every layer whatever its offsets. Relative variants only: an absolute
    variant's window-relative positions legitimately move with the offsets.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from txl_helpers import POS_ENCS, one_thread, tiny_model  # noqa: F401 (one_thread: autouse)

from txl.evaluator import stream_nll
from txl.geometry import Geometry
from txl.model import TransformerXL

VOCAB = 19
EOD = 1


def _model(**overrides) -> TransformerXL:
    return tiny_model(VOCAB, **{"max_pos": 10, **overrides})


MODELS = {p: _model(pos_enc=p) for p in POS_ENCS}
MODELS["rel-pre-ln"] = _model(pre_lnorm=True, untie_r=True)


def _rows(a_lens, b_tokens, rng, n_total):
    """One row per A length: [A (docs 0..2) | <eod> B (doc 3) | padding (doc −1)]."""
    B = len(a_lens)
    tokens = rng.integers(0, VOCAB, size=(B, n_total))
    docs = np.full((B, n_total), -1)
    for b, la in enumerate(a_lens):
        docs[b, :la] = np.sort(rng.integers(0, 3, size=la))
        tokens[b, la : la + len(b_tokens)] = b_tokens
        docs[b, la : la + len(b_tokens)] = 3
    return tokens, docs


def _b_nll(result: np.ndarray, a_lens, len_b: int) -> np.ndarray:
    """(rows, len_b − 1): the NLL of B's content tokens (the first one predicted from <eod>)."""
    return np.stack([result[b, la + 1 : la + len_b] for b, la in enumerate(a_lens)])


def _stream(model, tokens, docs, geometry):
    return stream_nll(model, tokens, docs, geometry, dtype=torch.float64).nll


@st.composite
def geometries(draw, min_mem: int = 0, max_mem: int = 10):
    tgt = draw(st.integers(1, 5))
    mem = draw(st.integers(min_mem, max_mem))
    clamp = draw(st.one_of(st.none(), st.integers(1, 8)))
    same = draw(st.booleans()) if mem > 0 else False
    return Geometry(tgt_len=tgt, mem_len=mem, clamp_len=clamp, same_length=same, reset=True)


@pytest.mark.parametrize("name", [*POS_ENCS, "rel-pre-ln"])
@given(
    a_lens=st.lists(st.integers(1, 16), min_size=1, max_size=3),
    len_b=st.integers(2, 7),
    geometry=geometries(),
    seed=st.integers(0, 2**31 - 1),
)
def test_reset_makes_doc_b_independent_of_doc_a_content(name, a_lens, len_b, geometry, seed):
    """(a) A's tokens and its own doc structure redrawn at the same length, any mem_len."""
    rng = np.random.default_rng(seed)
    b_tokens = np.concatenate([[EOD], rng.integers(2, VOCAB, size=len_b - 1)])
    n_total = max(a_lens) + len_b + 2
    tokens1, docs1 = _rows(a_lens, b_tokens, rng, n_total)
    tokens2, docs2 = _rows(a_lens, b_tokens, rng, n_total)  # another A, same B, same places
    model = MODELS[name]
    b1 = _b_nll(_stream(model, tokens1, docs1, geometry), a_lens, len_b)
    b2 = _b_nll(_stream(model, tokens2, docs2, geometry), a_lens, len_b)
    torch.testing.assert_close(torch.from_numpy(b1), torch.from_numpy(b2), rtol=0.0, atol=1e-6)


@pytest.mark.parametrize("name", ["rel", "shaw", "rel-pre-ln"])
@given(
    a_lens=st.lists(st.integers(1, 16), min_size=2, max_size=4),
    len_b=st.integers(2, 7),
    data=st.data(),
    seed=st.integers(0, 2**31 - 1),
)
def test_reset_makes_doc_b_independent_of_doc_a_length(name, a_lens, len_b, data, seed):
    """(b) mem_len ≥ len(B): B in rows whose A has different lengths (the boundary at different
    offsets in a segment, A starting up to several segments back) has one and the same NLL."""
    geometry = data.draw(geometries(min_mem=len_b, max_mem=len_b + 4))
    rng = np.random.default_rng(seed)
    b_tokens = np.concatenate([[EOD], rng.integers(2, VOCAB, size=len_b - 1)])
    tokens, docs = _rows(a_lens, b_tokens, rng, max(a_lens) + len_b + 2)
    b_nll = _b_nll(_stream(MODELS[name], tokens, docs, geometry), a_lens, len_b)  # (rows, len_b−1)
    expected = np.broadcast_to(b_nll[:1], b_nll.shape)
    torch.testing.assert_close(
        torch.from_numpy(b_nll), torch.from_numpy(expected.copy()), rtol=0.0, atol=1e-6
    )


@pytest.mark.parametrize("name", POS_ENCS)
def test_carry_lets_doc_a_change_doc_b(name):
    """Policy carry (the paper's original stream): a different A changes B's NLL — and the same pair
    under reset does not (so the difference is A's, through the memory and the segment)."""
    rng = np.random.default_rng(7)
    a_lens, len_b = [7, 5], 6
    b_tokens = np.concatenate([[EOD], rng.integers(2, VOCAB, size=len_b - 1)])
    tokens1, docs1 = _rows(a_lens, b_tokens, rng, 14)
    tokens2, docs2 = _rows(a_lens, b_tokens, rng, 14)
    model = MODELS[name]
    for reset in (False, True):
        geometry = Geometry(tgt_len=4, mem_len=4, clamp_len=None, reset=reset)
        b1 = _b_nll(_stream(model, tokens1, docs1, geometry), a_lens, len_b)
        b2 = _b_nll(_stream(model, tokens2, docs2, geometry), a_lens, len_b)
        gap = np.abs(b1 - b2).max(axis=1)  # per row
        if reset:
            assert gap.max() <= 1e-6
        else:
            assert (gap > 1e-3).all(), gap
