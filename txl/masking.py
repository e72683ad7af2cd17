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
