"""Property 8: the memory cap, eval mem_len ≠ train mem_len, same_length key counts, float64 vs
float32, every positional variant with and without memory — and the Memory data type itself."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from txl_helpers import POS_ENCS, one_thread, tiny_model  # noqa: F401 (one_thread: autouse)

from txl.evaluator import stream_nll
from txl.geometry import Geometry
from txl.kv_memory import KVMemory
from txl.masking import attention_mask
from txl.memory import Memory
from txl.model import TransformerXL

VOCAB = 17


def _model(**overrides) -> TransformerXL:
    # mem_len 4 is the training mem_len; the tests evaluate with others
    return tiny_model(VOCAB, **{"max_pos": 8, **overrides})


MODELS = {p: _model(pos_enc=p) for p in POS_ENCS}


@given(
    tgt=st.integers(1, 5),
    mem=st.integers(0, 9),
    n_segments=st.integers(1, 5),
    pos_enc=st.sampled_from(POS_ENCS),
)
def test_memory_is_never_longer_than_mem_len(tgt, mem, n_segments, pos_enc):
    """Eval mem_len need not be the training mem_len (4 here): the geometry's rules. The memory
    holds the last min(mem_len, seen) positions: layer 0 the scaled embeddings, with their doc ids."""
    model = MODELS[pos_enc]
    geometry = Geometry(tgt, mem, clamp_len=None)
    g = torch.Generator().manual_seed(tgt * 100 + mem)
    tokens = torch.randint(0, VOCAB, (2, tgt * n_segments), generator=g)
    docs = torch.randint(0, 3, (2, tgt * n_segments), generator=g).sort(dim=1).values
    memory = None
    with torch.no_grad():
        for s in range(n_segments):
            seg = slice(s * tgt, (s + 1) * tgt)
            memory = model(tokens[:, seg], docs[:, seg], memory, geometry=geometry).memory
            seen = (s + 1) * tgt
            length = min(mem, seen)
            assert memory.length == length
            assert all(s.shape == (2, length, 16) for s in memory.states)
            assert torch.equal(memory.doc_ids, docs[:, seen - length : seen])
            emb = model.word_emb(tokens[:, seen - length : seen]) * math.sqrt(16)
            torch.testing.assert_close(memory.states[0], emb, rtol=0.0, atol=0.0)


def test_memory_longer_than_eval_mem_len_is_cut_to_it():
    """A memory made with mem_len 9, read with mem_len 3, acts as its last 3 positions."""
    model = MODELS["rel"]
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, VOCAB, (2, 9), generator=g)
    y = torch.randint(0, VOCAB, (2, 4), generator=g)
    with torch.no_grad():
        long = model(x, geometry=Geometry(9, 9)).memory
        geometry = Geometry(4, 3, clamp_len=None)
        a = model(x[:, :4], memory=long, targets=y, geometry=geometry)
        b = model(x[:, :4], memory=long.truncate(3), targets=y, geometry=geometry)
        c = model(x[:, :4], memory=long, targets=y, geometry=Geometry(4, 9, clamp_len=None))
    torch.testing.assert_close(a.nll, b.nll, rtol=0.0, atol=0.0)
    assert a.memory.length == 3
    assert (a.nll - c.nll).abs().max() > 1e-6  # the cut mattered


@given(
    mem=st.integers(1, 8), mem_actual=st.integers(0, 12), q_len=st.integers(1, 6), data=st.data()
)
def test_same_length_gives_every_query_mem_len_keys(mem, mem_actual, q_len, data):
    """Query at key index p sees keys p − mem_len + 1 … p: exactly mem_len of them once they exist,
    whatever the length of the memory passed in (as the reference, which uses the configured
    mem_len)."""
    docs = torch.zeros(1, q_len, dtype=torch.long)
    doc_k = torch.zeros(1, mem_actual + q_len, dtype=torch.long)
    mask = attention_mask(docs, doc_k, same_length_mem=mem, reset=True)[0, 0]  # (T, K)
    for i in range(q_len):
        p = mem_actual + i
        assert mask[i].sum().item() == min(mem, p + 1)
        assert mask[i, max(0, p - mem + 1) : p + 1].all()


def test_same_length_key_count_in_the_model():
    """Behavioural: with same_length and mem_len 3, a token exactly 3 back is invisible to the last
    layer's query but 2 back is visible (one layer, so no layered reach)."""
    model = _model(n_layer=1)
    x = torch.randint(0, VOCAB, (1, 8), generator=torch.Generator().manual_seed(2))
    geometry = Geometry(8, 3, clamp_len=None, same_length=True)
    with torch.no_grad():
        base = model(x, geometry=geometry, return_logits=True).logits[0, 7]
        far, near = x.clone(), x.clone()
        far[0, 4] = (far[0, 4] + 1) % VOCAB  # distance 3 from query 7
        near[0, 5] = (near[0, 5] + 1) % VOCAB  # distance 2
        torch.testing.assert_close(
            model(far, geometry=geometry, return_logits=True).logits[0, 7], base, rtol=0, atol=0
        )
        assert (
            model(near, geometry=geometry, return_logits=True).logits[0, 7] - base
        ).abs().max() > 1e-6


@pytest.mark.parametrize("cache", ["auto", "hidden"])
@pytest.mark.parametrize("pos_enc", POS_ENCS)
def test_float64_and_float32_agree(pos_enc, cache):
    model = MODELS[pos_enc]
    rng = np.random.default_rng(4)
    tokens = rng.integers(0, VOCAB, size=(2, 23))
    docs = np.sort(rng.integers(0, 2, size=(2, 23)), axis=1)
    geometry = Geometry(5, 6, clamp_len=8, same_length=True)
    f64 = stream_nll(model, tokens, docs, geometry, dtype=torch.float64, cache=cache)
    f32 = stream_nll(model, tokens, docs, geometry, dtype=torch.float32, cache=cache)
    np.testing.assert_allclose(f32.nll, f64.nll, rtol=0, atol=1e-5)
    kv = isinstance(f32.memory, KVMemory)
    assert kv == (cache == "auto" and pos_enc in ("rel", "shaw"))
    assert (f32.memory.keys if kv else f32.memory.states)[0].dtype == torch.float32
    assert next(model.parameters()).dtype == torch.float64  # the caller's model is untouched


@pytest.mark.parametrize("untie_r", [False, True])
@pytest.mark.parametrize("pre_lnorm", [False, True])
@pytest.mark.parametrize("pos_enc", POS_ENCS)
def test_every_variant_runs_with_memory_and_with_mem_0(pos_enc, pre_lnorm, untie_r):
    """mem 0 is the no-recurrence model: a segment's NLL is the same with or without history."""
    model = _model(pos_enc=pos_enc, pre_lnorm=pre_lnorm, untie_r=untie_r, dropout=0.1, dropatt=0.1)
    model.train()
    rng = np.random.default_rng(5)
    tokens = rng.integers(0, VOCAB, size=(2, 14))
    docs = np.zeros_like(tokens)
    x = torch.as_tensor(tokens)
    out = model(x[:, :4], targets=x[:, 1:5])  # training mode, dropout on
    out = model(x[:, 4:8], memory=out.memory, targets=x[:, 5:9])
    out.nll.mean().backward()
    assert out.memory.length == 4 and torch.isfinite(out.nll).all()

    with_mem = stream_nll(model, tokens, docs, Geometry(4, 6, clamp_len=None)).nll
    no_mem = stream_nll(model, tokens, docs, Geometry(4, 0, clamp_len=None))
    assert model.training  # restored after evaluation
    assert no_mem.memory.length == 0
    assert np.isfinite(with_mem[:, 1:]).all() and np.isfinite(no_mem.nll[:, 1:]).all()
    alone = stream_nll(model, tokens[:, 8:], docs[:, 8:], Geometry(4, 0, clamp_len=None)).nll
    np.testing.assert_allclose(no_mem.nll[:, 9:], alone[:, 1:], rtol=0, atol=1e-6)
    assert np.abs(with_mem[:, 9:] - no_mem.nll[:, 9:]).max() > 1e-6


# ----------------------------------------------------------------------------- Memory itself
def test_memory_update_concatenates_cuts_and_detaches():
    empty = Memory.empty(2, 3, 4, dtype=torch.float64)
    assert empty.length == 0 and empty.batch_size == 3 and empty.n_layer == 2
    h = [torch.randn(3, 5, 4, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    ids = torch.arange(5).repeat(3, 1)
    m = empty.update(h, ids, mem_len=3)
    assert m.length == 3 and not m.states[0].requires_grad
    torch.testing.assert_close(m.states[1], h[1][:, 2:].detach())
    m2 = m.update([s[:, :2] for s in h], ids[:, :2], mem_len=4)
    assert m2.length == 4 and m2.doc_ids[0].tolist() == [3, 4, 0, 1]
    assert empty.update(h, ids, mem_len=0).length == 0


def test_memory_select_and_to():
    m = Memory((torch.arange(24.0).view(3, 2, 4),), torch.tensor([[0, 1], [2, 3], [4, 5]]))
    forked = m.select(torch.tensor([2, 2, 0]))
    assert forked.batch_size == 3 and forked.doc_ids[:, 0].tolist() == [4, 4, 0]
    torch.testing.assert_close(forked.states[0][1], m.states[0][2])
    cast = m.to(dtype=torch.float64)
    assert cast.states[0].dtype == torch.float64 and cast.doc_ids.dtype == torch.long
    assert m.truncate(1).doc_ids.tolist() == [[1], [3], [5]] and m.truncate(5) is m
