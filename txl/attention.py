"""Multi-head attention over [SG(memory); segment], with Transformer-XL's relative positions.

Dai et al. 2019, §3.3. For query i (a position of the current segment) and key j (a position of
[memory; segment]), with E_x the content, R the sinusoid of the relative distance i − j, W_q, W_k,E,
W_k,R the query / content-key / position-key projections and u, v learned per head:

    A_ij^rel = E_xi^T W_q^T W_k,E E_xj   (a)   +   E_xi^T W_q^T W_k,R R_{i−j}   (b)
             + u^T W_k,E E_xj             (c)   +   v^T W_k,R R_{i−j}            (d)
             = (q_i + u)·k_j  +  (q_i + v)·(W_R r_{i−j}),        score = A_ij^rel / √d_head

(the 1/√d_head is applied to q_i + u and q_i + v, which is the same product with T·D multiplies
instead of T·K).

K and V come from [SG(mem); h], Q from h only: scores are T × (M + T), not square. The memory is
detached by the caller (txl.memory); this module never sees where it came from.

The position term (b)+(d) is computed once per distance, (q_i + v)·W_R r_d for d = 0 … R − 1, and
then gathered into the (i, j) grid by the index d(i, j) = clamp(M + i − j, 0, limit) (txl.masking).
That is the reference's "rel-shift" written as an explicit gather: it is correct at every (i, j),
including above the causal boundary (where the rel-shift trick yields garbage that only the mask
hides), and `clamp_len` is exact by construction (the index is clamped, not the table).

Variants (config.pos_enc): "rel" as above; "shaw" replaces (b)+(d) by q_i·e_d + b_d with learned
per-layer tables (txl.positional.ShawRelative) and keeps u; "abs" and "learned" have no position term
and no u (their positions are added to the layer input by the model): plain q_i·k_j / √d_head.

Residual and LayerNorm as the reference (kimiyoung/transformer-xl RelPartialLearnableMultiHeadAttn):
post-LN: out = LN(h + Attn([mem; h]));  pre-LN: out = h + Attn(LN([mem; h])).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from txl.config import TXLConfig
from txl.positional import ShawRelative


class RelMultiHeadAttention(nn.Module):
    def __init__(self, config: TXLConfig):
        super().__init__()
        d_model, n_head, d_head = config.d_model, config.n_head, config.d_head
        self.n_head, self.d_head = n_head, d_head
        self.pos_enc = config.pos_enc
        self.pre_lnorm = config.pre_lnorm
        self.scale = 1.0 / math.sqrt(d_head)

        self.q_proj = nn.Linear(d_model, n_head * d_head, bias=False)  # W_q
        self.k_proj = nn.Linear(d_model, n_head * d_head, bias=False)  # W_k,E
        self.v_proj = nn.Linear(d_model, n_head * d_head, bias=False)
        self.o_proj = nn.Linear(n_head * d_head, d_model, bias=False)
        self.norm = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(config.dropout)
        self.dropatt = config.dropatt

        if config.pos_enc == "rel":
            self.r_proj = nn.Linear(d_model, n_head * d_head, bias=False)  # W_k,R
        if config.pos_enc == "shaw":
            self.shaw = ShawRelative(config.table_len, n_head, d_head)
        # u, v of one layer (config.untie_r); otherwise the model passes its shared pair.
        if config.untie_r and config.pos_enc in ("rel", "shaw"):
            self.bias_u = nn.Parameter(torch.empty(n_head, d_head))
        if config.untie_r and config.pos_enc == "rel":
            self.bias_v = nn.Parameter(torch.empty(n_head, d_head))

    def forward(
        self,
        h: Tensor,
        mem: Tensor,
        mask: Tensor,
        rel_dist: Tensor | None = None,
        n_dist: int = 0,
        r: Tensor | None = None,
        bias_u: Tensor | None = None,
        bias_v: Tensor | None = None,
    ) -> Tensor:
        """h: (B, T, d) segment; mem: (B, M, d) detached memory (M may be 0);
        mask: (B, 1, T, M+T) bool, True = visible; rel_dist: (T, M+T) long distance index in
        [0, n_dist); r: (n_dist, d) sinusoid of distances 0 … n_dist−1 ("rel"); bias_u, bias_v: (H, D).
        -> (B, T, d)."""
        B, T, _ = h.shape
        H, D = self.n_head, self.d_head
        x = torch.cat([mem.to(h.dtype), h], dim=1)  # (B, K, d), K = M + T
        K = x.shape[1]
        if self.pre_lnorm:
            x = self.norm(x)

        q = self.q_proj(x[:, K - T :]).view(B, T, H, D).transpose(1, 2)  # (B, H, T, D)
        k = self.k_proj(x).view(B, K, H, D).transpose(1, 2)  # (B, H, K, D)
        v = self.v_proj(x).view(B, K, H, D).transpose(1, 2)  # (B, H, K, D)

        # the 1/√d_head of all four terms is applied to the queries (T·D values, not T·K scores)
        q = q * self.scale  # (B, H, T, D)
        # content terms (a) + (c): (q_i + u)·k_j
        q_u = q if bias_u is None else q + bias_u[:, None, :].to(q.dtype) * self.scale
        score = q_u @ k.transpose(-1, -2)  # (B, H, T, K)

        # position terms, one column per distance 0 … n_dist−1, gathered into the (i, j) grid
        if self.pos_enc == "rel":  # (b) + (d): (q_i + v)·W_R r_d
            r_k = self.r_proj(r).view(n_dist, H, D).permute(1, 2, 0)  # (H, D, R)
            q_v = q + bias_v[:, None, :].to(q.dtype) * self.scale  # (B, H, T, D)
            pos = q_v @ r_k.to(q_v.dtype)  # (B, H, T, R)
        elif self.pos_enc == "shaw":  # Shaw et al.: q_i·e_d + b_d
            e = self.shaw.emb[:n_dist].permute(1, 2, 0).to(q.dtype)  # (H, D, R)
            b = self.shaw.bias[:n_dist].t()[None, :, None, :].to(q.dtype)  # (1, H, 1, R)
            pos = q @ e + b * self.scale  # (B, H, T, R)
        if self.pos_enc in ("rel", "shaw"):
            score = score + pos.gather(-1, rel_dist.expand(B, H, T, K))  # (B, H, T, K)

        # Masked keys get the dtype's most negative finite value (not −inf): their probability
        # underflows to exactly 0 wherever a row has a visible key, and a row with none softmaxes
        # to a finite uniform row, whose output is then zeroed (forward and backward, no NaN).
        score = torch.where(mask, score, torch.finfo(score.dtype).min)  # (B, H, T, K)
        prob = F.softmax(score, dim=-1)  # (B, H, T, K)
        prob = F.dropout(prob, self.dropatt, self.training)
        out = prob.to(v.dtype) @ v  # (B, H, T, D)
        out = out * mask.any(dim=-1, keepdim=True).to(out.dtype)  # (B, H, T, D) empty rows -> 0
        out = out.transpose(1, 2).reshape(B, T, H * D)  # (B, T, H·D)
        out = self.drop(self.o_proj(out))  # (B, T, d)

        if self.pre_lnorm:
            return h + out
        return self.norm(h + out)
