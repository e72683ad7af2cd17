"""Per-token evaluation: the streaming (cached) evaluator and the sliding-window recompute baseline.

One alignment everywhere:

    nll[b, t] = −log p(tokens[b, t] | tokens[b, :t])        (and, when streaming, the given memory)

so nll[:, 0] is NaN (nothing predicts the first token), and so are positions not scored and
positions whose token is padding (doc id −1). `correct[b, t]` says whether the argmax prediction
at t − 1 is tokens[b, t]; False wherever nll is NaN.

- `stream_nll`: the Transformer-XL way. The inputs tokens[:, :-1] are cut into segments of
  geometry.tgt_len and run in order, each reading the memory the previous one left (mem_len,
  clamp_len, same_length and the reset policy from the geometry). A token's direct window is
  mem_len + its offset in the segment; its layered reach is longer (docs/design.md, *Three lengths*).
  The memory carries the cached positions' keys and values (`cache="kv"`, txl.kv_memory: each
  segment projects only its own tokens) or their hidden states (`cache="hidden"`, the training
  memory, re-projected by every segment); "auto" takes kv where it is exact ("rel", "shaw").
- `recompute_nll`: the paper's vanilla baseline. Every scored token gets a fresh forward over the
  `window` tokens before it, no memory: the attention length is the same for every token, at the
  cost of a whole window per token (so only requested positions are computed, many windows per
  forward).

Both run under torch.no_grad() in eval mode (the model's training flag is restored afterwards), in
float32 by default; float64 works. A model whose dtype or device differs from the one asked for is
evaluated on a converted copy; the caller's model is never modified.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from txl.geometry import Geometry
from txl.kv_memory import KVMemory, PositionKeys, resolve_cache
from txl.memory import Memory

SCORE_BUDGET = 2**25  # attention scores per layer and forward in recompute_nll's default batching


@dataclass
class StreamResult:
    nll: np.ndarray  # (B, N) float64; NaN at t = 0, unscored positions and padding tokens
    correct: np.ndarray  # (B, N) bool; argmax prediction == tokens[b, t]
    memory: (
        Memory | KVMemory
    )  # the memory after the last input (tokens[:, -2]); empty for recompute


@contextmanager
def _evaluating(model: nn.Module, device, dtype: torch.dtype):
    """Yield the model (or a converted copy) in eval mode, under no_grad; restore its mode after."""
    param = next(model.parameters())
    device = torch.device(device) if device is not None else param.device
    if param.device != device or param.dtype != dtype:
        model = copy.deepcopy(model).to(device=device, dtype=dtype)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield model, device
    finally:
        model.train(was_training)


def _check_arrays(tokens: np.ndarray, doc_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    tokens = np.asarray(tokens)
    doc_ids = np.asarray(doc_ids)
    if tokens.ndim != 2 or tokens.shape != doc_ids.shape:
        raise ValueError(
            f"tokens and doc_ids must be 2-D arrays of the same shape (B, N), "
            f"got {tokens.shape} and {doc_ids.shape}"
        )
    return tokens.astype(np.int64, copy=False), doc_ids.astype(np.int64, copy=False)


def stream_nll(
    model,
    tokens: np.ndarray,
    doc_ids: np.ndarray,
    geometry: Geometry,
    *,
    memory: Memory | KVMemory | None = None,
    device=None,
    dtype: torch.dtype = torch.float32,
    cache: str = "auto",
    position_keys: PositionKeys | None = None,
    positions: np.ndarray | None = None,
) -> StreamResult:
    """Segment-by-segment evaluation with the memory. tokens, doc_ids: (B, N) int.

    To continue a stream after a prefix, pass the returned memory and tokens starting at the
    prefix's LAST token (one-token overlap: that token is the first input, its loss was scored).
    cache: "kv", "hidden" or "auto" (`txl.kv_memory.resolve_cache`; "kv" on an "abs" or "learned"
    model is a ValueError); a memory passed in must be of that kind. position_keys: W_R r_d kept
    across calls on the same weights (None: built for this call). positions: (B, N) bool, the
    targets the caller reads (None: all); in each segment a row with none of them only renews
    the memory (`TransformerXL.forward(output_rows=…)`: no last-layer attention, feed-forward
    or logits for it), and its targets there stay NaN. The memory is the same bits either way;
    the rows that read are computed as a smaller batch, so their scores match within float32
    rounding (bit for bit where every row of the segment reads)."""
    tokens, doc_ids = _check_arrays(tokens, doc_ids)
    B, N = tokens.shape
    if positions is not None:
        positions = np.asarray(positions, dtype=bool)
        if positions.shape != (B, N):
            raise ValueError(
                f"positions must have the shape of tokens {(B, N)}, got {positions.shape}"
            )
    nll = np.full((B, N), np.nan)
    correct = np.zeros((B, N), dtype=bool)
    with _evaluating(model, device, dtype) as (m, dev):
        kind, _ = resolve_cache(cache, m.config.pos_enc)
        if memory is None:
            memory = m.empty_memory(B, kind, dev, dtype)
        else:
            have = "kv" if isinstance(memory, KVMemory) else "hidden"
            if have != kind:
                raise ValueError(
                    f"the memory passed holds {'keys and values' if have == 'kv' else 'hidden states'}"
                    f" but cache {kind!r} was asked for; pass cache={have!r}"
                )
            memory = memory.to(dev, dtype)
        if kind == "kv" and position_keys is None:
            position_keys = PositionKeys()
        x = torch.as_tensor(tokens, device=dev)  # (B, N)
        ids = torch.as_tensor(doc_ids, device=dev)  # (B, N)
        for start in range(0, N - 1, geometry.tgt_len):
            end = min(start + geometry.tgt_len, N - 1)  # inputs start … end−1
            read = np.arange(B)  # the rows whose targets in this segment are read
            if positions is not None:
                read = np.flatnonzero(positions[:, start + 1 : end + 1].any(axis=1))
            rows = None if len(read) == B else torch.as_tensor(read, device=dev)
            out = m(
                x[:, start:end],
                ids[:, start:end],
                memory,
                targets=x[:, start + 1 : end + 1],
                geometry=geometry,
                return_logits=True,
                position_keys=position_keys,
                output_rows=rows,
            )
            memory = out.memory
            if len(read) == 0:
                continue
            nll[read, start + 1 : end + 1] = out.nll.double().cpu().numpy()
            pred = out.logits.argmax(dim=-1).cpu().numpy()  # (b, T)
            correct[read, start + 1 : end + 1] = pred == tokens[read, start + 1 : end + 1]
    pad = doc_ids < 0
    nll[pad] = np.nan
    correct[pad] = False
    return StreamResult(nll=nll, correct=correct, memory=memory)


def recompute_nll(
    model,
    tokens: np.ndarray,
    doc_ids: np.ndarray,
    window: int,
    *,
    positions: np.ndarray | None = None,
    clamp_len: int | None = None,
    reset: bool = True,
    batch_size: int | None = None,
    device=None,
    dtype: torch.dtype = torch.float32,
) -> StreamResult:
    """Sliding-window recompute: each scored token t is predicted by a fresh forward over
    tokens[b, t − window : t] (fewer at the start), without memory.

    positions: (B, N) bool, the tokens to score (None: all t ≥ 1); batch_size: windows per forward
    (None: as many as keep one layer's attention scores near 2^25 values, at most 256). Short windows are left-padded with doc id −1 (never attended; positions count back from the
    window's last token, so padding moves nothing)."""
    tokens, doc_ids = _check_arrays(tokens, doc_ids)
    if window < 1:
        raise ValueError(f"window must be a positive number of tokens, got {window}")
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    B, N = tokens.shape
    if positions is None:
        positions = np.ones((B, N), dtype=bool)
    positions = np.asarray(positions, dtype=bool)
    if positions.shape != (B, N):
        raise ValueError(f"positions must have the shape of tokens {(B, N)}, got {positions.shape}")
    scored = positions & (doc_ids >= 0)
    scored[:, 0] = False
    rows, cols = np.nonzero(scored)  # the (b, t) to score

    nll = np.full((B, N), np.nan)
    correct = np.zeros((B, N), dtype=bool)
    geometry = Geometry(tgt_len=window, mem_len=0, clamp_len=clamp_len, reset=reset)
    offsets = np.arange(-window, 0)  # (W,) window of t: t − window … t − 1
    with _evaluating(model, device, dtype) as (m, dev):
        cfg = m.config
        if batch_size is None:
            batch_size = max(1, min(256, SCORE_BUDGET // (cfg.n_head * window * window)))
        for lo in range(0, len(rows), batch_size):
            b, t = rows[lo : lo + batch_size], cols[lo : lo + batch_size]  # (n,)
            idx = t[:, None] + offsets[None, :]  # (n, W) positions in the row
            inside = idx >= 0
            idx = np.maximum(idx, 0)
            win_tokens = np.where(inside, tokens[b[:, None], idx], 0)  # (n, W)
            win_docs = np.where(inside, doc_ids[b[:, None], idx], -1)  # (n, W)
            hidden, _ = m.forward_hidden(
                torch.as_tensor(win_tokens, device=dev),
                torch.as_tensor(win_docs, device=dev),
                None,
                geometry,
            )  # (n, W, d)
            logits = m.head(hidden[:, -1:])[:, 0]  # (n, V) only the last position is scored
            target = torch.as_tensor(tokens[b, t], device=dev)  # (n,)
            loss = torch.nn.functional.cross_entropy(logits, target, reduction="none")
            nll[b, t] = loss.double().cpu().numpy()
            correct[b, t] = (logits.argmax(dim=-1) == target).cpu().numpy()
        empty = Memory.empty(cfg.n_layer, B, cfg.d_model, dev, dtype)
    return StreamResult(nll=nll, correct=correct, memory=empty)
