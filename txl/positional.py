"""Positional encodings: the relative sinusoid of Transformer-XL and the three ablation variants.

Every encoding here is indexed by a non-negative integer that is already clamped by the caller:

- "rel"     (Dai et al. 2019, §3.3): the sinusoid of the relative distance i − j, sin and cos halves
            concatenated, built at d_model and projected by the attention's W_R.
- "shaw"    (Shaw et al. 2018): a learned vector and scalar bias per relative distance, per layer.
- "abs"     (Vaswani et al. 2017): the same sinusoid, of a window-relative absolute position, added
            to layer 0's input.
- "learned" (Al-Rfou et al. 2019): a learned vector per window-relative absolute position, added to
            every layer's input.

Window-relative positions (both absolute variants). With memory, the reference code adds the position
encodings to [memory; segment] at each use — positions are not cached with the states. It counts them
back from the last key of the window: key j of a window of K keys has position K − 1 − j, so the last
token of a segment is always position 0 whatever the memory length (and left padding never moves
it). That is what makes absolute positions ambiguous across segments: the same token gets another
position in the next segment's window.

Finite learned tables ("shaw", "learned"): an index past the last row reuses the last row (the edge),
as the reference repeats its edge row.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def inverse_frequencies(d_model: int) -> Tensor:
    """1 / 10000^(2i/d_model) for i = 0 … d_model/2 − 1, computed in float32 exactly as the reference
    (a float64 model converts these float32 values, as the reference's buffer does)."""
    return 1.0 / (10000 ** (torch.arange(0.0, d_model, 2.0) / d_model))  # (d_model/2,)


def sinusoid(positions: Tensor, inv_freq: Tensor) -> Tensor:
    """Sinusoid encoding (Vaswani et al. §3.5, as used in Dai et al. §3.3): [sin(p·f), cos(p·f)].

    positions: (N,) float; inv_freq: (d/2,) -> (N, d), sin half first, cos half second.
    """
    angles = positions[:, None] * inv_freq[None, :]  # (N, d/2)
    return torch.cat([angles.sin(), angles.cos()], dim=-1)  # (N, d)


class SinusoidEncoding(nn.Module):
    """The fixed sinusoid table, evaluated at integer indices 0 … n − 1 (distances or positions).

    `inv_freq` is a non-persistent buffer: it follows `.to(dtype)` but is not stored in checkpoints.
    `compute=False` leaves it uncomputed (a model built only for its shapes).
    """

    def __init__(self, d_model: int, compute: bool = True):
        super().__init__()
        if d_model % 2:
            raise ValueError(f"the sinusoid encoding needs an even d_model, got {d_model}")
        inv_freq = inverse_frequencies(d_model) if compute else torch.empty(d_model // 2)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, n: int) -> Tensor:
        idx = torch.arange(n, device=self.inv_freq.device, dtype=self.inv_freq.dtype)  # (n,)
        return sinusoid(idx, self.inv_freq)  # (n, d_model)


class ShawRelative(nn.Module):
    """Learned relative encoding of one layer: score term q_i·e_{i−j} + b_{i−j} (per head).

    emb: (table_len, n_head, d_head); bias: (table_len, n_head). Row d is distance d.
    """

    def __init__(self, table_len: int, n_head: int, d_head: int):
        super().__init__()
        self.emb = nn.Parameter(torch.empty(table_len, n_head, d_head))
        self.bias = nn.Parameter(torch.empty(table_len, n_head))

    @property
    def table_len(self) -> int:
        return self.emb.shape[0]


class LearnedAbsolute(nn.Module):
    """Learned absolute encoding of one layer (Al-Rfou et al.): weight (table_len, d_model).

    Row p is window-relative position p (counted back from the window's last key)."""

    def __init__(self, table_len: int, d_model: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(table_len, d_model))

    def forward(self, positions: Tensor) -> Tensor:
        """positions: (K,) long, already clamped to the table -> (K, d_model)."""
        return self.weight[positions]


def window_positions(n_keys: int, limit: int, device: torch.device | None = None) -> Tensor:
    """Window-relative absolute positions of the keys [memory; segment]: K − 1 − j, capped at `limit`.

    -> (K,) long; the last key is position 0.
    """
    pos = torch.arange(n_keys - 1, -1, -1, device=device)  # (K,)
    return pos.clamp(max=limit)
