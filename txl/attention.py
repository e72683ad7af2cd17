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

The position term (b)+(d) is placed into the (i, j) grid by the reference's "rel-shift": computed
for the distances the LAST query sees (one column per key), each earlier query row is the same row
read T−1−i columns further on, which is a strided view of the grid, not a gather (`_rel_shift`). It
is exact at every visible (i, j) — and `clamp_len` too, since the distance is clamped per column as
the reference clamps its position sequence — and yields garbage above the causal boundary, which
the mask always hides (every mask of txl.masking is causal).

Layout: heads lead, (H, B, T, ·), so that the position term is one matmul per head over all B·T
queries (its keys do not depend on the batch row) and its shift stays a view of a batch of
(T, K+1) blocks; the content scores are then added to it inside the same batched matmul (baddbmm).
Masking is an additive bias built once per forward (txl.masking.ScoreMask). With gradients the
softmax is written out; without (evaluation) the fused `scaled_dot_product_attention` takes the
position term and the mask as its additive `attn_mask` (less time, no (T, K) probabilities kept).

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

from txl import rowwise
from txl.config import TXLConfig
from txl.masking import ScoreMask
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
        mask: Tensor | ScoreMask,
        rel_dist: Tensor | None = None,
        n_dist: int = 0,
        r: Tensor | None = None,
        bias_u: Tensor | None = None,
        bias_v: Tensor | None = None,
    ) -> Tensor:
        """h: (B, T, d) segment; mem: (B, M, d) detached memory (M may be 0);
        mask: (B, 1, T, M+T) bool, True = visible, or the same as a ScoreMask built once per forward
        (txl.masking); causal ("rel", "shaw": the rel-shift relies on it);
        rel_dist: (T, M+T) long distance index in [0, n_dist) (the rel-shift reads its last row);
        r: (n_dist, d) sinusoid of distances 0 … n_dist−1 ("rel"); bias_u, bias_v: (H, D).
        -> (B, T, d)."""
        B = h.shape[0]
        M = mem.shape[1]
        H, D = self.n_head, self.d_head
        mem = mem.to(h.dtype)
        # LayerNorm is per position: LN([mem; h]) = [LN(mem); LN(h)]
        x_h = self.norm(h) if self.pre_lnorm else h  # (B, T, d)
        x_m = self.norm(mem) if self.pre_lnorm else mem  # (B, M, d)
        q, k, v = self._segment_qkv(x_h)  # (H, B, T, D) each
        if M:  # [mem; h] along time, heads first (the concatenation is the one copy)
            k_m = rowwise.linear(x_m, self.k_proj.weight).view(B, M, H, D)  # (B, M, H, D)
            v_m = rowwise.linear(x_m, self.v_proj.weight).view(B, M, H, D)
            k = torch.cat([k_m.permute(2, 0, 1, 3), k], dim=2)
            v = torch.cat([v_m.permute(2, 0, 1, 3), v], dim=2)
        r_keys = self.r_proj(r) if self.pos_enc == "rel" else None  # (n_dist, H·D) W_R r_d
        return self._attend(h, q, k, v, mask, rel_dist, n_dist, r_keys, bias_u, bias_v)

    def forward_kv(
        self,
        h: Tensor,
        extend,
        mask: ScoreMask,
        rel_dist: Tensor | None = None,
        n_dist: int = 0,
        r_grid: Tensor | None = None,
        bias_u: Tensor | None = None,
        bias_v: Tensor | None = None,
        rows: Tensor | None = None,
    ):
        """The same layer over a memory of projected keys and values (txl.kv_memory; evaluation,
        "rel" and "shaw" only): `extend(k, v)` takes the segment's own keys and values
        (H, B, T, D) and returns [memory; segment] (`KVMemory.extend`: an `Extended`); r_grid:
        (H, D, M+T+1), W_R r_d of the distances the rel-shift reads (`shift_columns`), computed
        once (txl.kv_memory.PositionKeys) ("rel"). The memory is not projected again. rows: the
        batch rows whose output is wanted ((b,) long; None: all): every row's keys and values
        go to the memory, the attention runs for those rows only.
        -> (out (B, T, d), or (b, T, d), the Extended)."""
        q, k, v = self._segment_qkv(self.norm(h) if self.pre_lnorm else h)  # (H, B, T, D) each
        kv = extend(k, v)  # (H, B, K, D) each
        keys, values = kv.keys, kv.values
        if rows is not None:
            if len(rows) == 0:  # only the memory is wanted
                return h[:0], kv
            h, q, mask = h[rows], q[:, rows], mask.select(rows)
            keys, values = keys[:, rows], values[:, rows]
        out = self._attend(h, q, keys, values, mask, rel_dist, n_dist, None, bias_u, bias_v,
                           r_grid)  # fmt: skip
        return out, kv

    def _segment_qkv(self, x_h: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Q, K, V of the segment in one matmul -> (H, B, T, D) each. The memory's K and V are
        projected apart (or cached): it is detached, so autograd skips the input gradient of its
        M rows (most of the K). The parameters stay q_proj / k_proj / v_proj; concatenating them
        per call, (3·H·D, d), costs next to nothing."""
        B, T, _ = x_h.shape
        H, D = self.n_head, self.d_head
        w_qkv = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
        qkv = (
            rowwise.linear(x_h, w_qkv).view(B, T, 3, H, D).permute(2, 3, 0, 1, 4)
        )  # (3, H, B, T, D)
        return qkv.unbind(0)

    def _attend(
        self,
        h: Tensor,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | ScoreMask,
        rel_dist: Tensor | None,
        n_dist: int,
        r_keys: Tensor | None,
        bias_u: Tensor | None,
        bias_v: Tensor | None,
        r_grid: Tensor | None = None,
    ) -> Tensor:
        """Scores, softmax, values, output projection and the residual: q (H, B, T, D) of the
        segment, k and v (H, B, K, D) of [memory; segment]; "rel": r_keys (≥ n_dist, H·D) W_R r_d,
        or r_grid (H, D, K+1), those rows already laid out for the rel-shift. -> (B, T, d)."""
        H, B, T, D = q.shape
        K = k.shape[2]
        if not isinstance(mask, ScoreMask):
            mask = ScoreMask(mask, H)
        k, v = k.reshape(H * B, K, D), v.reshape(H * B, K, D)  # (H·B, K, D)
        # the 1/√d_head of all four terms is applied to the queries (T·D values, not T·K scores),
        # so every score term below is already scaled
        q = q * self.scale  # (H, B, T, D)
        # content terms (a) + (c): (q_i + u)·k_j
        q_u = q if bias_u is None else q + bias_u[:, None, None, :].to(q.dtype) * self.scale
        q_u = q_u.reshape(H * B, T, D)  # (H·B, T, D)

        # position terms (b) + (d), or Shaw's, on the (i, j) grid: (H·B, T, K), a strided view
        pos = None
        if self.pos_enc in ("rel", "shaw"):
            cols = shift_columns(rel_dist)  # (K+1,)
            q_bt = q.reshape(H, B * T, D)  # (H, B·T, D) the queries of all rows at once
            if self.pos_enc == "rel":  # (q_i + v)·W_R r_d
                r_k = r_grid if r_grid is not None else _grid_keys(r_keys, cols, H, D)
                q_v = q_bt + bias_v[:, None, :].to(q.dtype) * self.scale  # (H, B·T, D)
                grid = rowwise.grid(q_v, r_k.to(q.dtype), B)  # (H, B·T, K+1)
            else:  # Shaw et al.: q_i·e_d + b_d
                e = self.shaw.emb[:n_dist][cols].permute(1, 2, 0).to(q.dtype)  # (H, D, K+1)
                b = self.shaw.bias[:n_dist][cols].t()[:, None, :].to(q.dtype)  # (H, 1, K+1)
                grid = rowwise.grid(q_bt, e, B, bias=b * self.scale)  # (H, B·T, K+1)
            pos = _rel_shift(grid.view(H * B, T, K + 1))  # (H·B, T, K)

        # the additive score terms: the position term (if any) and the mask bias, 0 or a finite
        # value far below any score (broadcast over the heads: the mask is the same for each)
        if pos is None:
            bias = mask.per_head(q.dtype)  # (H·B, T, K)
        elif torch.is_grad_enabled():  # a fresh tensor, for the in-place accumulation below
            bias = (pos.view(H, B, T, K) + mask.bias(q.dtype)).view(H * B, T, K)
        else:  # into the position grid where it lies (the rel-shift view's entries are distinct):
            # the same sums without a fresh (H, B, T, K) tensor, whose first touch costs more
            bias = pos.view(H, B, T, K).add_(mask.bias(q.dtype)).view(H * B, T, K)
        dropatt = self.dropatt if self.training else 0.0
        if torch.is_grad_enabled():
            # softmax((q_i + u)·k_j + bias_ij) @ v, written out (a fused kernel would fall back to
            # these same matmuls for a score term that needs a gradient, with extra passes)
            kt = k.transpose(1, 2)  # (H·B, D, K)
            if pos is None:
                score = torch.baddbmm(bias, q_u, kt)  # (H·B, T, K)
            else:  # bias is a fresh tensor here: accumulate onto it in place
                score = bias.baddbmm_(q_u, kt)  # (H·B, T, K)
            prob = F.dropout(F.softmax(score, dim=-1), dropatt, self.training)  # (H·B, T, K)
            out = prob.to(v.dtype) @ v  # (H·B, T, D)
        else:
            # 4-d, as the fused CPU kernel takes them (3-d inputs fall back to the plain math)
            out = rowwise.attention(
                q_u.view(H, B, T, D),
                k.view(H, B, K, D),
                v.view(H, B, K, D),
                bias.view(H, B, T, K),
                dropout_p=dropatt,
                scale=1.0,  # already applied
            )  # (H, B, T, D)
        out = out.view(H, B, T, D).permute(1, 2, 0, 3).reshape(B, T, H * D)  # (B, T, H·D)
        # A row with no visible key softmaxed to a finite row (the bias is finite): its output is
        # zeroed here, forward and backward, never NaN.
        out = out * mask.has_key  # (B, T, H·D)
        out = self.drop(rowwise.linear(out, self.o_proj.weight, self.o_proj.bias))  # (B, T, d)

        if self.pre_lnorm:
            return h + out
        return self.norm(h + out)


def shift_columns(rel_dist: Tensor) -> Tensor:
    """The distance index of each column of the position grid: the distances the LAST query has
    to the keys, with column 0 repeating column 1 (never visible; see `_rel_shift`).
    rel_dist: (T, K) -> (K+1,) long."""
    return torch.cat([rel_dist[-1, :1], rel_dist[-1]])


def _grid_keys(r_keys: Tensor, cols: Tensor, n_head: int, d_head: int) -> Tensor:
    """W_R r_d of the grid's columns, heads first: (n, H·D) table, (K+1,) -> (H, D, K+1)."""
    return r_keys[cols].view(cols.shape[0], n_head, d_head).permute(1, 2, 0)


def _rel_shift(grid: Tensor) -> Tensor:
    """The reference's rel-shift as a view: (N, T, K+1) -> (N, T, K).

    grid[n, i, c] holds the position term of query i at the distance the LAST query has to key
    c − 1, i.e. K − c (clamped as the caller's index), for c = 1 … K; column 0 repeats column 1 and
    is never visible. Query i is at distance M + i − j from key j: the last query's distance to key
    j + T−1−i, column c = j + T − i. Reading each (T, K+1) block in rows of K starting at offset T
    puts exactly that column at (i, j), since T + i·K + j = i·(K+1) + (j + T − i), for every
    j ≤ M + i (c ≤ K). Past the causal boundary the read runs into row i+1: finite garbage, always
    masked. Without a gather; the backward is one copy into zeros.
    """
    N, T, K1 = grid.shape
    return grid.view(N, T * K1)[:, T:].view(N, T, K1 - 1)
