"""Products over a batch of rows whose result for one row does not depend on the other rows.

A (B, T, d) @ (d, n) product computed as one (B·T, d) matrix lets the BLAS kernel tile all B·T
rows together, and a row at another index can be rounded differently; a batched matmul is no
cure (on an AMD EPYC, at one thread, two identical elements of one `bmm` came out with different
bits). Evaluation compares base and variant bit for bit ("exactly 0" where a token cannot see the
edit), so there every product runs once per row, each call of the same shape: a row's arithmetic
then depends on its own values and that shape only, wherever it sits in the batch. Training keeps
the single product (nothing is compared bit for bit there, and it is faster).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def exact() -> bool:
    """Whether products must be row-independent: outside autograd (evaluation)."""
    return not torch.is_grad_enabled()


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """F.linear of x (B, T, d) -> (B, T, n), one product per row in evaluation."""
    if x.dim() != 3 or x.shape[0] <= 1 or not exact():
        return F.linear(x, weight, bias)
    return torch.stack([F.linear(row, weight, bias) for row in x.unbind(0)])  # (B, T, n)


def grid(q: Tensor, keys: Tensor, rows: int, bias: Tensor | None = None) -> Tensor:
    """q (H, B·T, D) @ keys (H, D, K) [+ bias (H, 1, K)], q holding B = `rows` rows of T queries
    each (as `q.view(H, B, T, D)` reads them) -> (H, B·T, K); one product per row in
    evaluation."""
    H, BT, D = q.shape

    def one(x: Tensor) -> Tensor:
        return torch.bmm(x, keys) if bias is None else torch.baddbmm(bias, x, keys)

    if rows <= 1 or not exact():
        return one(q)
    per_row = q.view(H, rows, BT // rows, D).unbind(1)  # B × (H, T, D)
    return torch.stack([one(x.contiguous()) for x in per_row], 1).view(H, BT, -1)


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, **kw) -> Tensor:
    """F.scaled_dot_product_attention of (H, B, T, D) queries over (H, B, K, D) keys and values
    with an (H, B, T, K) additive mask -> (H, B, T, D), one call per row in evaluation."""
    if q.shape[1] <= 1 or not exact():
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kw)
    return torch.cat(
        [
            F.scaled_dot_product_attention(
                q[:, b : b + 1], k[:, b : b + 1], v[:, b : b + 1], attn_mask=mask[:, b : b + 1],
                **kw,
            )
            for b in range(q.shape[1])
        ],
        1,
    )  # fmt: skip
