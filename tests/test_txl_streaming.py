"""Properties 3, 4 and 8 (clamp_len, same_length): streaming evaluation against independent references.

The reference below reuses the model's weights but not its code: a full-sequence forward, layer by
layer, where query p (in segment s = p // tgt_len) may see key j iff

    j ≤ p,  j ≥ s·tgt_len − mem_len       (block-banded: what segment recurrence implies, every layer)
    j ≥ p − mem_len + 1                    (same_length)
    doc rules                               (reset: same doc id; never a padding key)

and attention scores are built with an explicit loop over the relative distance, with the sinusoid
and the distance clamp written out. All in float64.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from txl_helpers import POS_ENCS, one_thread, tiny_model  # noqa: F401 (one_thread: autouse)

from txl.evaluator import stream_nll
from txl.geometry import Geometry
from txl.model import TransformerXL

TOL = dict(rtol=0.0, atol=1e-6)


VOCAB = 17


def _model(**overrides) -> TransformerXL:
    model = tiny_model(VOCAB, **{"n_layer": 3, "max_pos": 12, **overrides})
    with torch.no_grad():  # every parameter matters, biases and LayerNorm shifts included
        model.out_bias.normal_(0.0, 0.3)
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.bias.normal_(0.0, 0.3)
    return model


MODELS = {
    "rel-post-ln": _model(),
    "rel-pre-ln-untie-r": _model(pre_lnorm=True, untie_r=True, tie_weight=False),
    "shaw-post-ln": _model(pos_enc="shaw"),
}
CAUSAL_MODELS = {p: _model(pos_enc=p, n_layer=2) for p in POS_ENCS}


# ----------------------------------------------------------------------------- reference
def _position_term(model: TransformerXL, layer: int, q: torch.Tensor, distance: int):
    """The score term of relative distance `distance` (already clamped) for queries q (B, P, H, D)."""
    cfg = model.config
    attn = model.layers[layer].attn
    H, D = cfg.n_head, cfg.d_head
    if cfg.pos_enc == "rel":
        # r_d: sin and cos halves, frequencies 1/10000^(2i/d) (float32 as the reference code)
        freq = (1.0 / 10000 ** (torch.arange(0.0, cfg.d_model, 2.0) / cfg.d_model)).double()
        r = torch.cat([torch.sin(distance * freq), torch.cos(distance * freq)])  # (d,)
        wr = (attn.r_proj.weight @ r).view(H, D)  # W_R r_d
        v = attn.bias_v if cfg.untie_r else model.bias_v
        return ((q + v) * wr).sum(-1)  # (B, P, H)
    # shaw: q·e_d + b_d, the table's last row reused past its end
    row = min(distance, attn.shaw.emb.shape[0] - 1)
    return (q * attn.shaw.emb[row]).sum(-1) + attn.shaw.bias[row]  # (B, P, H)


def reference_nll(model: TransformerXL, tokens, doc_ids, geometry: Geometry) -> np.ndarray:
    """nll[b, t] of predicting tokens[b, t], NaN at t = 0 — the block-banded full-sequence forward."""
    cfg = model.config
    tokens = torch.as_tensor(tokens)
    doc_ids = torch.as_tensor(doc_ids)
    x, y, docs = tokens[:, :-1], tokens[:, 1:], doc_ids[:, :-1]
    B, P = x.shape
    H, D = cfg.n_head, cfg.d_head
    T, mem = geometry.tgt_len, geometry.mem_len

    visible = torch.zeros(B, P, P, dtype=torch.bool)  # [b, query p, key j]
    for p in range(P):
        lo = max(0, (p // T) * T - mem)
        if geometry.same_length:
            lo = max(lo, p - mem + 1)
        for j in range(lo, p + 1):
            ok = docs[:, j] >= 0
            if geometry.reset:
                ok = ok & (docs[:, j] == docs[:, p])
            visible[:, p, j] = ok

    def ln(z, norm):
        return F.layer_norm(z, (cfg.d_model,), norm.weight, norm.bias)

    with torch.no_grad():
        h = model.word_emb.weight[x] * math.sqrt(cfg.d_model)  # (B, P, d)
        for i, layer in enumerate(model.layers):
            a = layer.attn
            z = ln(h, a.norm) if cfg.pre_lnorm else h
            q = (z @ a.q_proj.weight.T).view(B, P, H, D)
            k = (z @ a.k_proj.weight.T).view(B, P, H, D)
            v = (z @ a.v_proj.weight.T).view(B, P, H, D)
            u = a.bias_u if cfg.untie_r else model.bias_u
            score = torch.full((B, H, P, P), -math.inf, dtype=torch.float64)
            for dist in range(P):  # explicit loop over the relative distance p − j
                d_used = dist if geometry.clamp_len is None else min(dist, geometry.clamp_len)
                p_idx = torch.arange(dist, P)
                j_idx = p_idx - dist
                content = ((q[:, p_idx] + u) * k[:, j_idx]).sum(-1)  # (B, n, H)
                position = _position_term(model, i, q[:, p_idx], d_used)  # (B, n, H)
                score[:, :, p_idx, j_idx] = ((content + position) / math.sqrt(D)).transpose(1, 2)
            score = score.masked_fill(~visible[:, None], -math.inf)
            has_key = visible.any(-1)[:, None, :, None]  # (B, 1, P, 1)
            prob = torch.where(has_key, torch.softmax(score, -1), 0.0)
            out = (prob @ v.transpose(1, 2)).transpose(1, 2).reshape(B, P, H * D)
            h_att = h + out @ a.o_proj.weight.T
            h = h_att if cfg.pre_lnorm else ln(h_att, a.norm)
            f = layer.ff
            z = ln(h, f.norm) if cfg.pre_lnorm else h
            z = F.relu(z @ f.fc1.weight.T + f.fc1.bias) @ f.fc2.weight.T + f.fc2.bias
            h = h + z if cfg.pre_lnorm else ln(h + z, f.norm)
        weight = model.word_emb.weight if cfg.tie_weight else model.out_weight
        logits = h @ weight.T + model.out_bias
        nll = -torch.log_softmax(logits, -1).gather(-1, y[..., None])[..., 0]
    out = np.full(tokens.shape, np.nan)
    out[:, 1:] = nll.numpy()
    out[doc_ids.numpy() < 0] = np.nan
    return out


# ----------------------------------------------------------------------------- strategies
@st.composite
def streams(draw, max_len: int = 20, max_batch: int = 3):
    """tokens, doc_ids (B, N): nondecreasing doc ids per row, optional padding runs (id −1)."""
    B = draw(st.integers(1, max_batch))
    N = draw(st.integers(2, max_len))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, VOCAB, size=(B, N))
    n_docs = draw(st.integers(1, 3))
    doc_ids = np.sort(rng.integers(0, n_docs, size=(B, N)), axis=1)
    if draw(st.booleans()):
        doc_ids[rng.random((B, N)) < 0.15] = -1
    return tokens, doc_ids


@st.composite
def geometries(draw, max_tgt: int = 6, max_mem: int = 9):
    tgt = draw(st.integers(1, max_tgt))
    mem = draw(st.integers(0, max_mem))
    clamp = draw(st.one_of(st.none(), st.integers(1, 8)))
    same = draw(st.booleans()) if mem > 0 else False
    reset = draw(st.booleans())
    return Geometry(tgt_len=tgt, mem_len=mem, clamp_len=clamp, same_length=same, reset=reset)


def _stream(model, tokens, doc_ids, geometry):
    return stream_nll(model, tokens, doc_ids, geometry, dtype=torch.float64).nll


def _assert_nll_equal(a: np.ndarray, b: np.ndarray) -> None:
    assert np.array_equal(np.isnan(a), np.isnan(b))
    torch.testing.assert_close(
        torch.from_numpy(np.nan_to_num(a)), torch.from_numpy(np.nan_to_num(b)), **TOL
    )


# ----------------------------------------------------------------------------- property 3
@pytest.mark.parametrize("name", ["rel-post-ln", "rel-pre-ln-untie-r", "shaw-post-ln"])
@given(data=streams(), tgt=st.integers(1, 6), clamp=st.one_of(st.none(), st.integers(1, 8)))
def test_streaming_with_full_memory_equals_one_pass(name, data, tgt, clamp):
    """mem_len ≥ everything before: segment by segment = one forward over the whole sequence."""
    model = MODELS[name]
    tokens, doc_ids = data
    N = tokens.shape[1]
    streamed = _stream(model, tokens, doc_ids, Geometry(tgt, mem_len=N, clamp_len=clamp))
    one_pass = _stream(model, tokens, doc_ids, Geometry(N, mem_len=0, clamp_len=clamp))
    _assert_nll_equal(streamed, one_pass)


@pytest.mark.parametrize("name", ["rel-post-ln", "rel-pre-ln-untie-r", "shaw-post-ln"])
@given(data=streams(), geometry=geometries())
def test_streaming_equals_block_banded_reference(name, data, geometry):
    """Any mem_len (also < tgt_len), clamp_len, same_length, reset/carry: the streamed NLL equals the
    independent full-sequence forward with the mask that segment recurrence implies."""
    model = MODELS[name]
    tokens, doc_ids = data
    _assert_nll_equal(
        _stream(model, tokens, doc_ids, geometry), reference_nll(model, tokens, doc_ids, geometry)
    )


def test_reference_sees_the_layered_reach():
    """The reference is not trivially local: with mem_len < tgt_len and 3 layers, a token two
    segments back changes the last segment's NLL (information climbs one layer per segment)."""
    model = MODELS["rel-post-ln"]
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, VOCAB, size=(1, 13))
    docs = np.zeros_like(tokens)
    geometry = Geometry(tgt_len=4, mem_len=2, clamp_len=None)
    changed = tokens.copy()
    changed[0, 3] = (changed[0, 3] + 1) % VOCAB  # input of segment 0; the last segment is 8 … 11
    base, other = (
        reference_nll(model, tokens, docs, geometry),
        reference_nll(model, changed, docs, geometry),
    )
    assert np.abs(base[0, 10:] - other[0, 10:]).max() > 1e-6
    _assert_nll_equal(_stream(model, changed, docs, geometry), other)


# ----------------------------------------------------------------------------- property 8 (clamp, same_length)
@given(data=streams(), tgt=st.integers(1, 5), mem=st.integers(1, 9), clamp=st.integers(1, 4))
def test_clamp_len_equals_explicit_clamp_of_distances(data, tgt, mem, clamp):
    model = MODELS["rel-post-ln"]
    tokens, doc_ids = data
    geometry = Geometry(tgt, mem, clamp_len=clamp, reset=False)
    _assert_nll_equal(
        _stream(model, tokens, doc_ids, geometry), reference_nll(model, tokens, doc_ids, geometry)
    )


def test_clamp_len_changes_long_distances_only():
    """The clamp has an effect (the test above can fail): distances > clamp_len exist here."""
    model = MODELS["rel-post-ln"]
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, VOCAB, size=(1, 12))
    docs = np.zeros_like(tokens)
    clamped = _stream(model, tokens, docs, Geometry(12, 0, clamp_len=2))
    free = _stream(model, tokens, docs, Geometry(12, 0, clamp_len=None))
    _assert_nll_equal(clamped[:, :4], free[:, :4])  # distances ≤ 2 only
    assert np.abs(clamped[0, 4:] - free[0, 4:]).max() > 1e-6


@given(data=streams(), tgt=st.integers(1, 6), mem=st.integers(1, 9))
def test_same_length_sees_the_last_mem_len_keys(data, tgt, mem):
    model = MODELS["rel-pre-ln-untie-r"]
    tokens, doc_ids = data
    geometry = Geometry(tgt, mem, clamp_len=None, same_length=True, reset=False)
    _assert_nll_equal(
        _stream(model, tokens, doc_ids, geometry), reference_nll(model, tokens, doc_ids, geometry)
    )


# ----------------------------------------------------------------------------- property 4
@pytest.mark.parametrize("pos_enc", ["rel", "shaw", "abs", "learned"])
@given(data=streams(max_len=18), geometry=geometries(), where=st.floats(0.0, 1.0))
def test_changing_token_t_never_changes_earlier_nll(pos_enc, data, geometry, where):
    model = CAUSAL_MODELS[pos_enc]
    tokens, doc_ids = data
    t = min(int(where * tokens.shape[1]), tokens.shape[1] - 1)
    changed = tokens.copy()
    changed[:, t] = (changed[:, t] + 1 + np.arange(len(tokens))) % VOCAB
    base = _stream(model, tokens, doc_ids, geometry)
    other = _stream(model, changed, doc_ids, geometry)
    _assert_nll_equal(base[:, :t], other[:, :t])
    if t >= 1 and np.isfinite(base[:, t]).any():
        assert not np.allclose(base[:, t], other[:, t], equal_nan=True)  # the target itself changed
