"""The evaluation memory of keys and values (txl.kv_memory) computes what the hidden-state memory
computes: the same NLL within float32 rounding over random geometries, cache policies, batch
rows, position encodings and LayerNorm placements, through continuation, forking and truncation;
bit-exact zeros where the hidden-state path has them; and it is refused where it is not exact."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from txl_helpers import one_thread  # noqa: F401 (autouse)

from probes.api.horizon import Horizon
from txl.config import TXLConfig
from txl.evaluator import stream_nll
from txl.geometry import Geometry
from txl.kv_memory import KVMemory, PositionKeys, resolve_cache
from txl.memory import Memory
from txl.model import TransformerXL

VOCAB = 23
F32 = dict(rtol=0.0, atol=2e-5)  # float32 rounding of matmuls of other shapes, in nats


def _model(pos_enc: str, pre_lnorm: bool, untie_r: bool, n_layer: int = 2) -> TransformerXL:
    torch.manual_seed(1)
    config = TXLConfig(
        vocab_size=VOCAB,
        n_layer=n_layer,
        d_model=16,
        n_head=2,
        d_head=8,
        d_inner=32,
        tgt_len=4,
        mem_len=4,
        pos_enc=pos_enc,
        pre_lnorm=pre_lnorm,
        untie_r=untie_r,
        max_pos=12,  # a short Shaw table: distances past it reuse its last row
        init_std=0.4,
    )
    return TransformerXL(config).eval()


MODELS = {
    (p, pre, untie): _model(p, pre, untie)
    for p in ("rel", "shaw")
    for pre in (False, True)
    for untie in (False, True)
}
DEEP = _model("rel", True, False, n_layer=3)


@st.composite
def geometries(draw, max_mem: int = 9):
    tgt = draw(st.integers(1, 5))
    mem = draw(st.integers(0, max_mem))
    clamp = draw(st.one_of(st.none(), st.integers(1, 12)))
    same_length = mem > 0 and draw(st.booleans())
    return Geometry(tgt, mem, clamp_len=clamp, same_length=same_length, reset=draw(st.booleans()))


@st.composite
def streams(draw, max_rows: int = 3, max_len: int = 24):
    """Rows of tokens with sorted doc ids and, in some rows, trailing padding (doc id −1)."""
    rows = draw(st.integers(1, max_rows))
    n = draw(st.integers(2, max_len))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, VOCAB, size=(rows, n))
    docs = np.sort(rng.integers(0, 3, size=(rows, n)), axis=1)
    for r in range(rows):
        pad = int(rng.integers(0, n // 2 + 1)) if rng.random() < 0.5 else 0
        if pad:
            docs[r, n - pad :] = -1
    return tokens, docs


def _both(model, tokens, docs, geometry, **kw):
    kv = stream_nll(model, tokens, docs, geometry, cache="kv", **kw)
    hidden = stream_nll(model, tokens, docs, geometry, cache="hidden", **kw)
    return kv, hidden


def _close(a: np.ndarray, b: np.ndarray) -> None:
    assert np.array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_allclose(np.nan_to_num(a), np.nan_to_num(b), **F32)


@given(
    key=st.sampled_from(sorted(MODELS)), data=streams(), geometry=geometries(), deep=st.booleans()
)
def test_kv_memory_nll_equals_hidden_memory_nll(key, data, geometry, deep):
    model = DEEP if deep else MODELS[key]
    tokens, docs = data
    kv, hidden = _both(model, tokens, docs, geometry)
    assert isinstance(kv.memory, KVMemory) and isinstance(hidden.memory, Memory)
    _close(kv.nll, hidden.nll)
    assert kv.memory.length == hidden.memory.length
    assert torch.equal(kv.memory.doc_ids, hidden.memory.doc_ids)


@given(key=st.sampled_from(sorted(MODELS)), data=streams(max_len=30), geometry=geometries())
def test_kv_memory_continues_a_stream_like_the_hidden_memory(key, data, geometry):
    """Prefix, then the rest from the returned memory (one-token overlap), both kinds alike."""
    model = MODELS[key]
    tokens, docs = data
    N, T = tokens.shape[1], geometry.tgt_len
    P = min(N - 1, T * max(1, (N // 2) // T)) + 1  # a segment boundary inside the row
    out = {}
    for cache in ("kv", "hidden"):
        head = stream_nll(model, tokens[:, :P], docs[:, :P], geometry, cache=cache)
        tail = stream_nll(
            model, tokens[:, P - 1 :], docs[:, P - 1 :], geometry, memory=head.memory, cache=cache
        )
        out[cache] = np.concatenate([head.nll, tail.nll[:, 1:]], axis=1)
    _close(out["kv"], out["hidden"])


@given(key=st.sampled_from(sorted(MODELS)), data=streams(max_len=30), geometry=geometries())
def test_two_continuations_of_one_kv_memory_do_not_disturb_each_other(key, data, geometry):
    """A memory's keys and values are appended in place after its window; continuing the same
    memory twice (the second finds the space taken and copies), then the first's memory once
    more, gives the scores of continuing a fresh copy every time."""
    model = MODELS[key]
    tokens, docs = data
    N, T = tokens.shape[1], geometry.tgt_len
    P = min(N - 1, T * max(1, (N // 2) // T)) + 1
    head = stream_nll(model, tokens[:, :P], docs[:, :P], geometry, cache="kv")
    rest = tokens[:, P - 1 :], docs[:, P - 1 :]
    other = (np.roll(rest[0], 1, axis=1), rest[1])  # another continuation of the same prefix

    def fresh(t, d):
        again = stream_nll(model, tokens[:, :P], docs[:, :P], geometry, cache="kv")
        return stream_nll(model, t, d, geometry, memory=again.memory, cache="kv")

    first = stream_nll(model, *rest, geometry, memory=head.memory, cache="kv")
    second = stream_nll(model, *other, geometry, memory=head.memory, cache="kv")
    third = stream_nll(model, *rest, geometry, memory=first.memory, cache="kv")
    np.testing.assert_array_equal(first.nll, fresh(*rest).nll)
    np.testing.assert_array_equal(second.nll, fresh(*other).nll)
    np.testing.assert_array_equal(third.nll, stream_nll(
        model, *rest, geometry, memory=fresh(*rest).memory, cache="kv").nll)  # fmt: skip


def test_a_stream_appends_its_keys_in_place_until_the_store_is_full():
    """Segment after segment the memory's store is the same tensor (no copy of the memory per
    segment), until its room of 8 segments is used up."""
    model = MODELS[("rel", True, False)]
    geometry = Geometry(4, 4, clamp_len=None)
    tokens = np.arange(2 * 4 * 12 + 1).reshape(1, -1) % VOCAB
    docs = np.zeros_like(tokens)
    memory, stores = None, []
    for s in range(0, tokens.shape[1] - 1, 4):
        out = stream_nll(model, tokens[:, s : s + 5], docs[:, s : s + 5], geometry,
                         memory=memory, cache="kv")  # fmt: skip
        memory = out.memory
        stores.append(memory.stores[0])  # kept alive: no store is freed and its id reused
    changes = sum(a is not b for a, b in itertools.pairwise(stores))
    assert changes == (len(stores) - 1) // 9, stores  # a new store once per 9 segments


@given(
    key=st.sampled_from(sorted(MODELS)),
    data=streams(max_len=30),
    geometry=geometries(),
    index=st.lists(st.integers(0, 2), min_size=1, max_size=4),
)
def test_rows_selected_into_a_store_with_room_append_in_place_and_score_the_same(
    key, data, geometry, index
):
    """`select(index, room)` gathers the rows into stores with space after them: the next
    segment writes there (the same store, no copy) and every score is the bits of a plain
    `select`."""
    model = MODELS[key]
    tokens, docs = data
    index = torch.tensor([i % tokens.shape[0] for i in index])
    N, T = tokens.shape[1], geometry.tgt_len
    P = min(N - 1, T) + 1
    head = stream_nll(model, tokens[:, :P], docs[:, :P], geometry, cache="kv")
    rest = tokens[index.numpy(), P - 1 :], docs[index.numpy(), P - 1 :]
    roomy = head.memory.select(index, room=2 * T)
    plain = stream_nll(model, *rest, geometry, memory=head.memory.select(index), cache="kv")
    got = stream_nll(model, *rest, geometry, memory=roomy, cache="kv")
    np.testing.assert_array_equal(got.nll, plain.nll)
    assert torch.equal(roomy.doc_ids, head.memory.doc_ids[index])
    if roomy.length and rest[0].shape[1] > 1:  # the next segment runs on a non-empty memory
        fresh = head.memory.select(index, room=2 * T)  # `roomy`'s space is taken by now
        one = stream_nll(model, rest[0][:, : T + 1], rest[1][:, : T + 1], geometry,
                         memory=fresh, cache="kv")  # fmt: skip
        assert one.memory.stores[0] is fresh.stores[0]


@given(
    key=st.sampled_from(sorted(MODELS)),
    data=streams(max_len=20),
    geometry=geometries(),
    index=st.lists(st.integers(0, 2), min_size=1, max_size=4),
    shorter=st.integers(0, 9),
)
def test_forked_and_truncated_kv_memory_equals_hidden_memory(key, data, geometry, index, shorter):
    """Fork rows of a memory (`select`, rows may repeat) and continue them under a geometry with
    a shorter mem_len (the memory is cut to it): the same NLL from either kind of memory."""
    model = MODELS[key]
    tokens, docs = data
    rows = tokens.shape[0]
    index = torch.tensor([i % rows for i in index])
    N, T = tokens.shape[1], geometry.tgt_len
    P = min(N - 1, T) + 1
    later = Geometry(
        T,
        min(shorter, geometry.mem_len),
        clamp_len=geometry.clamp_len,
        same_length=geometry.same_length and min(shorter, geometry.mem_len) > 0,
        reset=geometry.reset,
    )
    out = {}
    for cache in ("kv", "hidden"):
        head = stream_nll(model, tokens[:, :P], docs[:, :P], geometry, cache=cache)
        forked = head.memory.select(index)
        rest = stream_nll(
            model,
            tokens[index.numpy(), P - 1 :],
            docs[index.numpy(), P - 1 :],
            later,
            memory=forked,
            cache=cache,
        )
        out[cache] = rest.nll
    _close(out["kv"], out["hidden"])


def _memory_tensors(memory) -> list[torch.Tensor]:
    if isinstance(memory, KVMemory):
        return [*memory.keys, *memory.values, memory.doc_ids]
    return [*memory.states, memory.doc_ids]


@given(
    key=st.sampled_from(sorted(MODELS)),
    data=streams(max_len=30),
    geometry=geometries(),
    deep=st.booleans(),
    cache=st.sampled_from(["kv", "hidden"]),
    seed=st.integers(0, 2**16),
)
def test_reading_a_few_targets_computes_them_alone_and_leaves_the_memory_bit_for_bit(
    key, data, geometry, deep, cache, seed
):
    """`positions` names the targets read: in each segment the rows with none of them skip the
    last layer's attention and feed-forward (and the logits), and stay NaN there. The rows that
    read are computed as a smaller batch: the same scores within float32 rounding (a matmul of
    fewer rows may round otherwise), the same bits where every row reads; the memory after the
    stream is the same bits."""
    model = DEEP if deep else MODELS[key]
    tokens, docs = data
    B, N = tokens.shape
    T = geometry.tgt_len
    read = np.random.default_rng(seed).random((B, N)) < 0.08
    every = stream_nll(model, tokens, docs, geometry, cache=cache)
    few = stream_nll(model, tokens, docs, geometry, cache=cache, positions=read)
    for start in range(0, N - 1, T):
        cols = slice(start + 1, min(start + T, N - 1) + 1)  # this segment's targets
        rows = read[:, cols].any(axis=1)
        if rows.all():
            np.testing.assert_array_equal(few.nll[:, cols], every.nll[:, cols])
            np.testing.assert_array_equal(few.correct[:, cols], every.correct[:, cols])
        _close(few.nll[rows, cols], every.nll[rows, cols])
        assert np.isnan(few.nll[~rows, cols]).all() and not few.correct[~rows, cols].any()
    assert few.memory.length == every.memory.length
    for a, b in zip(_memory_tensors(few.memory), _memory_tensors(every.memory), strict=True):
        assert torch.equal(a, b)


@given(key=st.sampled_from(sorted(MODELS)), data=streams(max_rows=1), geometry=geometries())
def test_identical_rows_score_bitwise_equal_under_kv_memory(key, data, geometry):
    """Exact zeros need equal shapes: a row and its copy in one batch give the same bits."""
    tokens, docs = data
    two = stream_nll(
        MODELS[key], np.repeat(tokens, 2, 0), np.repeat(docs, 2, 0), geometry, cache="kv"
    )
    assert np.array_equal(two.nll[0], two.nll[1], equal_nan=True)


@given(
    key=st.sampled_from(sorted(MODELS)),
    geometry=geometries(max_mem=5),
    seed=st.integers(0, 2**16),
    where=st.integers(1, 8),
)
def test_tokens_beyond_the_layered_reach_are_bitwise_unaffected_under_kv_memory(
    key, geometry, seed, where
):
    """Change one token; every later token whose layered reach (probes.api.horizon.Horizon) does not
    include it scores the same bits with the KV memory (one document, so reset changes
    nothing)."""
    rng = np.random.default_rng(seed)
    N = 28
    tokens = rng.integers(0, VOCAB, size=(1, N))
    docs = np.zeros_like(tokens)
    changed = tokens.copy()
    changed[0, where] = (changed[0, where] + 1) % VOCAB
    both = stream_nll(
        MODELS[key], np.r_[tokens, changed], np.r_[docs, docs], geometry, cache="kv"
    ).nll
    horizon = Horizon.of(geometry, n_layer=2)
    for t in range(where + 1, N):
        _, reach = horizon.token(t)
        if t - where > reach:  # the edit is beyond what token t can see
            assert both[0, t] == both[1, t], (t, reach)


@given(seed=st.integers(0, 2**16), len_a=st.integers(1, 12), geometry=geometries())
def test_reset_keeps_doc_b_bitwise_independent_of_doc_a_content_under_kv_memory(
    seed, len_a, geometry
):
    rng = np.random.default_rng(seed)
    N = len_a + 10
    tokens = rng.integers(0, VOCAB, size=(1, N))
    docs = np.r_[np.zeros(len_a, dtype=np.int64), np.ones(N - len_a, dtype=np.int64)][None]
    other = tokens.copy()
    other[0, :len_a] = rng.integers(0, VOCAB, size=len_a)
    g = Geometry(
        geometry.tgt_len,
        geometry.mem_len,
        geometry.clamp_len,
        same_length=geometry.same_length,
        reset=True,
    )
    nll = stream_nll(MODELS["rel", True, False], np.r_[tokens, other], np.r_[docs, docs], g).nll
    # B's <eod> (position len_a) is predicted from A; every later B token sees only B
    assert np.array_equal(nll[0, len_a + 1 :], nll[1, len_a + 1 :])


def test_position_keys_are_projected_once_per_layer_per_evaluation():
    """W_R r is computed once per layer for a whole stream, not once per segment."""
    model = DEEP
    calls = []
    hooks = [
        layer.attn.r_proj.register_forward_hook(lambda *_: calls.append(1))
        for layer in model.layers
    ]
    try:
        rng = np.random.default_rng(0)
        tokens = rng.integers(0, VOCAB, size=(2, 41))
        keys = PositionKeys()
        stream_nll(model, tokens, np.zeros_like(tokens), Geometry(4, 9), position_keys=keys)
        assert len(calls) == model.config.n_layer
        stream_nll(model, tokens, np.zeros_like(tokens), Geometry(4, 9, clamp_len=3))
        assert len(calls) == 2 * model.config.n_layer  # a new evaluation builds its own
        calls.clear()
        stream_nll(model, tokens, np.zeros_like(tokens), Geometry(4, 9), cache="hidden")
        assert len(calls) == model.config.n_layer * 10  # the hidden path: per layer and segment
    finally:
        for h in hooks:
            h.remove()


@pytest.mark.parametrize("pos_enc", ["abs", "learned"])
def test_absolute_positions_fall_back_to_hidden_memory_and_refuse_kv(pos_enc):
    torch.manual_seed(0)
    model = TransformerXL(
        TXLConfig(
            vocab_size=VOCAB,
            n_layer=1,
            d_model=8,
            n_head=2,
            d_head=4,
            d_inner=16,
            tgt_len=4,
            mem_len=4,
            pos_enc=pos_enc,
            max_pos=16,
        )
    ).eval()
    kind, why = resolve_cache("auto", pos_enc)
    assert kind == "hidden" and "window-relative" in why
    tokens = np.arange(12)[None] % VOCAB
    out = stream_nll(model, tokens, np.zeros_like(tokens), Geometry(4, 4))
    assert isinstance(out.memory, Memory)
    with pytest.raises(ValueError, match="not exact"):
        stream_nll(model, tokens, np.zeros_like(tokens), Geometry(4, 4), cache="kv")
    with torch.no_grad(), pytest.raises(ValueError, match="not exact"):
        model(torch.as_tensor(tokens[:, :4]), memory=model.empty_memory(1, "kv"))


def test_kv_memory_is_refused_with_gradients_and_a_mismatched_memory():
    model = MODELS["rel", False, False]
    x = torch.zeros(1, 4, dtype=torch.long)
    with pytest.raises(RuntimeError, match="evaluation"):
        model(x, memory=model.empty_memory(1, "kv"))  # gradients on
    tokens = np.zeros((1, 9), dtype=np.int64)
    hidden = stream_nll(model, tokens, np.zeros_like(tokens), Geometry(4, 4), cache="hidden")
    with pytest.raises(ValueError, match="pass cache='hidden'"):
        stream_nll(model, tokens, tokens, Geometry(4, 4), memory=hidden.memory, cache="kv")
