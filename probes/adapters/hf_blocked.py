"""Exact causal (and sliding-window) attention for one long row, in blocks of queries.

The `full` evaluator of `probes.adapters.hf` builds an explicit (L, K) mask per attention kind and
runs the model's eager attention, which holds (heads, L, K) scores per layer: at 32 K tokens that
is 16 GiB a layer for Gemma 3 270M, and its sliding layers spend nearly all of it on keys they
never see. A forward of ONE row whose keys are its own text from position 0 (at most a padded
tail, which no real query sees causally) under one visibility rule (carry, or a single document)
needs no mask at all: key k is visible to query
q when k <= q and, in a layer with a sliding window s, q − k < s. This module computes exactly that
with the model's own projections, rotary embeddings and cache (it is registered as an attention
implementation of transformers, so only the attention product changes), BLOCK queries at a time
against the keys they can reach: a global layer reads keys 0 … q, a sliding one the last s. A
model whose attention does not go through transformers' registry (its layers choose their own
kernels) would not be computed this way at all: the adapter checks on a short row, the first
time, that the result is the masked forward's, and keeps the masked path otherwise.

It agrees with the masked eager forward within float32 rounding (the test
`test_a_long_row_through_blocked_attention_scores_as_the_masked_forward` holds it to 1e-5 nats)
and is deterministic for a given shape, so a base and its variant forwarded in identical shapes
still agree bit for bit wherever the edit cannot reach.
"""

from __future__ import annotations

import functools
import hashlib

import torch
import torch.nn.functional as F

NAME = "probes_blocked"
BLOCK = 512  # queries per attention product


def blocked_attention(
    module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask,
    scaling: float | None = None,
    dropout: float = 0.0,
    softcap: float | None = None,
    *,
    windows: tuple[int | None, ...],
    block: int = BLOCK,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' attention signature: query (1, H, L, d), key (1, Hkv, K, d) and value
    (1, Hkv, K, dv) where the L queries are the last L of the K keys → ((1, L, H, dv), None).
    `windows`: every layer's sliding window (None: global), the adapter's own table — the one
    its masks use — since some models slide through their mask only and pass no window."""
    if attention_mask is not None or softcap is not None or kwargs.get("s_aux") is not None:
        raise ValueError("blocked attention takes one unpadded row without mask, softcap or sinks")
    if query.shape[0] != 1:
        raise ValueError(f"blocked attention takes one row, got a batch of {query.shape[0]}")
    sliding_window = windows[module.layer_idx]
    stated = kwargs.get("sliding_window")
    if stated is not None and stated != sliding_window:
        raise ValueError(f"layer {module.layer_idx} slides over {stated}, not {sliding_window}")
    L, K = query.shape[2], key.shape[2]
    start = K - L  # key index of the first query
    gqa = query.shape[1] != key.shape[1]
    out = query.new_empty(*query.shape[:3], value.shape[-1])
    for a in range(0, L, block):
        b = min(a + block, L)
        hi = start + b
        lo = 0 if sliding_window is None else max(0, start + a - sliding_window + 1)
        q_at = torch.arange(start + a, hi, device=query.device)[:, None]
        k_at = torch.arange(lo, hi, device=query.device)[None, :]
        visible = k_at <= q_at
        if sliding_window is not None:
            visible &= q_at - k_at < sliding_window
        out[:, :, a:b] = F.scaled_dot_product_attention(
            query[:, :, a:b],
            key[:, :, lo:hi],
            value[:, :, lo:hi],
            attn_mask=visible,
            scale=scaling,
            enable_gqa=gqa,
        )
    return out.transpose(1, 2).contiguous(), None


def register(windows: tuple[int | None, ...], block: int = BLOCK) -> str:
    """Register blocked attention over these layer windows, `block` queries at a time, as an
    attention implementation of transformers (idempotent) and return its name. Having no mask
    function of that name, transformers builds no mask for a forward that uses it."""
    from transformers import AttentionInterface

    tag = hashlib.sha256(repr((tuple(windows), block)).encode()).hexdigest()[:12]
    name = f"{NAME}_{tag}"
    fn = functools.partial(blocked_attention, windows=tuple(windows), block=block)
    AttentionInterface.register(name, fn)
    return name
