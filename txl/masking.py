"""Who may attend to whom: causality, `same_length`, document reset and padding.

Keys are [memory; segment] (K = M + T positions), queries are the segment (T positions); query i sits
at key index M + i. A key j is visible to query i iff all of:

- causal:       j ≤ M + i (a query sees itself);
- same_length:  j ≥ M + i − mem_len + 1, so every query sees exactly `mem_len` keys, itself included,
                once that many exist (Dai et al.'s evaluation setting; `mem_len` is the geometry's,
                as the reference uses its configured mem_len, not the length of the memory passed in);
- padding:      doc_k[j] ≥ 0 (doc id −1 marks padding, never attended, under either policy);
- reset:        doc_k[j] == doc_q[i] (policy "reset"; policy "carry" skips this test).

A query row may end up with no visible key (a padding query under reset). The attention gives such a
row an all-zero output (see txl.attention), never NaN.

The model builds the mask once per forward (`score_mask`) and hands every layer a `ScoreMask`: the same mask
as an additive score bias (adding is cheaper than a `torch.where` per layer, and it is what
`scaled_dot_product_attention` takes) plus which query rows see any key at all.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor


@functools.lru_cache(maxsize=32)
def _band(T: int, K: int, same_length_mem: int | None, device: torch.device) -> Tensor:
    """(T, K) bool: causal and, with `same_length`, at most `same_length_mem` keys back. The
    same few shapes recur segment after segment, so the bands are kept (read-only)."""
    q_pos = torch.arange(K - T, K, device=device)[:, None]  # (T, 1) key index of each query
    k_pos = torch.arange(K, device=device)[None, :]  # (1, K)
    visible = k_pos <= q_pos  # (T, K) causal
    if same_length_mem is not None:
        visible = visible & (k_pos > q_pos - same_length_mem)  # (T, K)
    return visible


def attention_mask(
    doc_q: Tensor, doc_k: Tensor, *, same_length_mem: int | None = None, reset: bool = True
) -> Tensor:
    """doc_q: (B, T) long, doc_k: (B, K) long with K ≥ T (the last T keys are the queries).

    same_length_mem: the mem_len of `same_length`, or None when it is off.
    -> (B, 1, T, K) bool, True where the key is visible.
    """
    T, K = doc_q.shape[1], doc_k.shape[1]
    band = _band(T, K, same_length_mem, doc_q.device)[None]  # (1, T, K)
    if reset:
        # a padding query (−1) is given an id no key has, so equal ids also say "not padding"
        # (one pass less over B × T × K)
        doc_q = torch.where(doc_q >= 0, doc_q, -2)
        visible = band & (doc_k[:, None, :] == doc_q[:, :, None])  # (B, T, K)
    else:
        visible = band & (doc_k >= 0)[:, None, :]  # (B, T, K)
    return visible[:, None]  # (B, 1, T, K)


def score_mask(
    doc_q: Tensor,
    doc_k: Tensor,
    n_head: int,
    *,
    same_length_mem: int | None = None,
    reset: bool = True,
) -> ScoreMask:
    """`ScoreMask(attention_mask(...), n_head)`, cheaper where the rows allow: when no key is
    padding and (under reset) every key of every row is in one document, the doc ids change
    nothing and every row has the same (T, K) band — the usual case of a long stream, built
    without touching B × T × K booleans (on a CPU). Exact either way (tests/test_txl_masking.py)."""
    T, K = doc_q.shape[1], doc_k.shape[1]
    # on a GPU the B × T × K tests cost less than the host syncs that would decide to skip them
    shared = (
        doc_q.device.type == "cpu"
        and bool((doc_k >= 0).all())
        and (not reset or bool((doc_k == doc_k[:, :1]).all()))
    )
    if shared:
        band = _shared_band(T, K, same_length_mem, doc_q.device, n_head,
                            torch.is_inference_mode_enabled())  # fmt: skip
        return band.for_rows(doc_q.shape[0])
    visible = attention_mask(doc_q, doc_k, same_length_mem=same_length_mem, reset=reset)
    return ScoreMask(visible, n_head)


@functools.lru_cache(maxsize=32)
def _shared_band(
    T: int, K: int, same_length_mem: int | None, device: torch.device, n_head: int, inference: bool
) -> ScoreMask:
    """The ScoreMask of a band every row shares, kept per shape as the bands are: segment after
    segment of a stream builds the same one, and its bias and `has_key` (which do not depend on
    the number of rows) are read, never written; each forward takes it `for_rows` its batch.
    Kept apart for inference mode (`inference`): tensors made there cannot be saved for a
    backward pass, so a training step must never be handed one."""
    return ScoreMask(_band(T, K, same_length_mem, device)[None, None], n_head, batch=1)


def relative_distances(q_len: int, k_len: int, limit: int, device=None) -> Tensor:
    """Distance from each query to each key, (M + i) − j, clamped to [0, limit] -> (T, K) long.

    Future keys (negative distance) get 0: they are masked, the value only has to be a valid index.
    Kept per shape like the bands (read-only).
    """
    return _relative_distances(q_len, k_len, limit, torch.device(device or "cpu"))


@functools.lru_cache(maxsize=32)
def _relative_distances(q_len: int, k_len: int, limit: int, device: torch.device) -> Tensor:
    M = k_len - q_len
    q_pos = torch.arange(M, k_len, device=device)[:, None]  # (T, 1)
    k_pos = torch.arange(k_len, device=device)[None, :]  # (1, K)
    return (q_pos - k_pos).clamp(0, limit)  # (T, K)


class ScoreMask:
    """A boolean mask as the attention consumes it, built once per forward and shared by all layers.

    bias(dtype): (B, T, K), or (1, T, K) when every row has the same mask (`score_mask`; it
        broadcasts over the batch wherever it is added): 0 where visible and half the dtype's
        most negative finite value where not. Not −inf: a row with no visible key then
        softmaxes to a finite row instead of NaN, and its output is zeroed by `has_key`. Half: a
        score added to it cannot overflow to −inf (in float16 the full minimum would), while in
        any row with a visible key a masked key's probability still underflows to exactly 0 —
        the same result as replacing the score. Built on first use per dtype (under autocast
        the scores are bf16, whose minimum is not float32's). The same for every head: a
        position term of (H, B, T, K) adds it by broadcasting.
    per_head(dtype): the bias per head and row, (n_head·B, T, K), heads first as the attention
        lays out its scores (for the encodings without a position term, whose score is added
        onto the bias itself).
    has_key: (B, T, 1) bool (or (1, T, 1)), whether the query row sees any key.
    """

    def __init__(self, visible: Tensor, n_head: int, batch: int | None = None):
        """visible: (B, 1, T, K) bool, True = visible (as `attention_mask` returns it), or
        (1, 1, T, K) shared by `batch` rows."""
        self.visible = visible[:, 0]  # (B, T, K) or (1, T, K)
        self.n_head = n_head
        self.batch = self.visible.shape[0] if batch is None else batch
        # (B, T, 1); a max over bytes: Tensor.any over the last dim of a bool tensor is several
        # times slower on a CPU
        self.has_key = self.visible.view(torch.uint8).amax(dim=-1, keepdim=True).bool()
        self._bias: dict[torch.dtype, Tensor] = {}
        self._per_head: dict[torch.dtype, Tensor] = {}

    def bias(self, dtype: torch.dtype) -> Tensor:
        if dtype not in self._bias:
            hidden = torch.tensor(
                torch.finfo(dtype).min / 2, dtype=dtype, device=self.visible.device
            )
            zero = torch.zeros((), dtype=dtype, device=self.visible.device)
            self._bias[dtype] = torch.where(self.visible, zero, hidden)  # (B, T, K)
        return self._bias[dtype]

    def for_rows(self, batch: int) -> ScoreMask:
        """This mask for `batch` rows, when every row has the same one (visible (1, T, K)): the
        band, its bias and `has_key` shared, the per-row tensors (`per_head`) its own."""
        assert self.visible.shape[0] == 1, "only a mask every row shares holds for any batch"
        out = ScoreMask.__new__(ScoreMask)
        out.visible, out.n_head, out.batch = self.visible, self.n_head, batch
        out.has_key, out._bias, out._per_head = self.has_key, self._bias, {}
        return out

    def select(self, rows: Tensor) -> ScoreMask:
        """The mask of batch rows `rows` ((b,) long): a band shared by every row stays one band,
        fewer rows."""
        if self.visible.shape[0] == 1:  # shared (or a single row, which `rows` can only repeat)
            return self.for_rows(len(rows))
        return ScoreMask(self.visible[rows.to(self.visible.device)][:, None], self.n_head)

    def per_head(self, dtype: torch.dtype) -> Tensor:
        if dtype not in self._per_head:
            bias = self.bias(dtype)
            bias = bias.expand(self.batch, *bias.shape[1:])  # (B, T, K)
            self._per_head[dtype] = bias.repeat(self.n_head, 1, 1)  # (H·B, T, K)
        return self._per_head[dtype]
