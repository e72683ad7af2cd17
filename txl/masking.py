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

The model builds the boolean mask once per forward and hands every layer a `ScoreMask`: the same mask
as an additive score bias (adding is cheaper than a `torch.where` per layer, and it is what
`scaled_dot_product_attention` takes) plus which query rows see any key at all.
"""

from __future__ import annotations

import torch
from torch import Tensor


def attention_mask(
    doc_q: Tensor, doc_k: Tensor, *, same_length_mem: int | None = None, reset: bool = True
) -> Tensor:
    """doc_q: (B, T) long, doc_k: (B, K) long with K ≥ T (the last T keys are the queries).

    same_length_mem: the mem_len of `same_length`, or None when it is off.
    -> (B, 1, T, K) bool, True where the key is visible.
    """
    T, K = doc_q.shape[1], doc_k.shape[1]
    M = K - T
    q_pos = torch.arange(M, K, device=doc_q.device)[:, None]  # (T, 1) key index of each query
    k_pos = torch.arange(K, device=doc_q.device)[None, :]  # (1, K)
    visible = k_pos <= q_pos  # (T, K) causal
    if same_length_mem is not None:
        visible = visible & (k_pos > q_pos - same_length_mem)  # (T, K)
    visible = visible[None] & (doc_k >= 0)[:, None, :]  # (B, T, K)
    if reset:
        visible = visible & (doc_k[:, None, :] == doc_q[:, :, None])  # (B, T, K)
    return visible[:, None]  # (B, 1, T, K)


def relative_distances(q_len: int, k_len: int, limit: int, device=None) -> Tensor:
    """Distance from each query to each key, (M + i) − j, clamped to [0, limit] -> (T, K) long.

    Future keys (negative distance) get 0: they are masked, the value only has to be a valid index.
    """
    M = k_len - q_len
    q_pos = torch.arange(M, k_len, device=device)[:, None]  # (T, 1)
    k_pos = torch.arange(k_len, device=device)[None, :]  # (1, K)
    return (q_pos - k_pos).clamp(0, limit)  # (T, K)


class ScoreMask:
    """A boolean mask as the attention consumes it, built once per forward and shared by all layers.

    bias(dtype): (B, T, K): 0 where visible and half the dtype's most negative finite value where
        not. Not −inf: a row with no visible key then softmaxes to a finite row instead of NaN,
        and its output is zeroed by `has_key`. Half: a score added to it cannot overflow to −inf
        (in float16 the full minimum would), while in any row with a visible key a masked key's
        probability still underflows to exactly 0 — the same result as replacing the score.
        Built on first use per dtype (under autocast the scores are bf16, whose minimum is not
        float32's). The same for every head: a position term of (H, B, T, K) adds it by
        broadcasting.
    per_head(dtype): the bias repeated per head, (n_head·B, T, K), heads first as the attention
        lays out its scores (for the encodings without a position term, whose score is added
        onto the bias itself).
    has_key: (B, T, 1) bool, whether the query row sees any key.
    """

    def __init__(self, visible: Tensor, n_head: int):
        """visible: (B, 1, T, K) bool, True = visible (as `attention_mask` returns it)."""
        self.visible = visible[:, 0]  # (B, T, K)
        self.n_head = n_head
        self.has_key = self.visible.any(dim=-1, keepdim=True)  # (B, T, 1)
        self._bias: dict[torch.dtype, Tensor] = {}
        self._per_head: dict[torch.dtype, Tensor] = {}

    def bias(self, dtype: torch.dtype) -> Tensor:
        if dtype not in self._bias:
            bias = torch.zeros(self.visible.shape, dtype=dtype, device=self.visible.device)
            bias.masked_fill_(~self.visible, torch.finfo(dtype).min / 2)  # (B, T, K)
            self._bias[dtype] = bias
        return self._bias[dtype]

    def per_head(self, dtype: torch.dtype) -> Tensor:
        if dtype not in self._per_head:
            self._per_head[dtype] = self.bias(dtype).repeat(self.n_head, 1, 1)  # (H·B, T, K)
        return self._per_head[dtype]
