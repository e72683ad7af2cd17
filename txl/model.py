"""The Transformer-XL language model (Dai et al. 2019), as the reference code builds it.

    tokens (B, T) ──embedding·√d_model──dropout──► h_0 ─► layer 0 ─► h_1 ─► … ─► h_L ─► dropout ─► logits
                                                    │               │
    memory.states[0] (B, M, d) ─────────────────────┘  states[1] ───┘   (SG: detached, from earlier segments)

Each layer reads [memory.states[l]; h_l] as keys and values and h_l as queries (txl.attention), then a
position-wise feed-forward. The new memory keeps, per layer, the last `mem_len` of [states[l]; h_l]
— the layer's INPUT — so information climbs one layer per segment crossed (txl.memory).

At evaluation a txl.kv_memory.KVMemory can stand in for the memory: each layer then keeps the
keys and values it projected of the cached positions rather than their inputs, and a segment
projects only its own tokens ("rel" and "shaw"; the same scores, docs/design.md, *Keys and values
at evaluation*).

Output: logits = h_L W^T + b, W the embedding matrix when `tie_weight` (the bias is always separate).
Pre-LN has no final LayerNorm, as the reference. NLL is per token and unreduced:

    nll[b, t] = −log p(targets[b, t] | tokens[b, :t+1], memory)

(the stream evaluator aligns it so that nll[t] is the loss of predicting token t; see txl.evaluator).

Where the reference is ambiguous or its ablation code is buggy, this is what we do:
- "abs"/"learned": window-relative positions are added to [memory; segment] at each use and never
  cached (the reference adds them in place to its cached memory); "abs" applies the embedding
  dropout before adding the positions (the reference after).
- "shaw": u follows `untie_r` like "rel"; tables are indexed by distance and `clamp_len` caps the
  distance at clamp_len exactly (the reference keeps clamp_len rows, i.e. caps at clamp_len − 1).
- `clamp_len` also caps learned absolute positions (the reference ignores it there).
- A memory longer than the geometry's mem_len is cut to its last mem_len positions.

Parameter names (checkpoints and the HF parity mapping depend on them; do not rename):
    word_emb.weight (V, d)                      out_bias (V,)      out_weight (V, d) only if untied
    bias_u, bias_v (H, D)                       shared u, v ("rel"; "shaw" has bias_u only); with
                                                untie_r: layers.{l}.attn.bias_u / .bias_v
    layers.{l}.attn.{q,k,v,o,r}_proj.weight     r_proj ("rel" only) is W_R; no biases
    layers.{l}.attn.norm.{weight,bias}          the attention sub-layer's LayerNorm
    layers.{l}.attn.shaw.{emb,bias}             "shaw": (table_len, H, D), (table_len, H)
    layers.{l}.ff.{fc1,fc2}.{weight,bias}       layers.{l}.ff.norm.{weight,bias}
    layers.{l}.pos_emb.weight                   "learned": (table_len, d)
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from txl import rowwise
from txl.attention import RelMultiHeadAttention
from txl.config import TXLConfig
from txl.geometry import Geometry
from txl.kv_memory import ROOM_SEGMENTS, KVMemory, PositionKeys, resolve_cache
from txl.masking import ScoreMask, relative_distances, score_mask
from txl.memory import Memory
from txl.positional import LearnedAbsolute, ShawRelative, SinusoidEncoding, window_positions


@dataclass
class TXLOutput:
    nll: Tensor | None  # (B, T) loss of targets[b, t]; None without targets
    logits: Tensor | None  # (B, T, V), only with return_logits
    memory: Memory  # the memory for the next segment


class FeedForward(nn.Module):
    """Position-wise feed-forward: post-LN LN(x + FF(x)), pre-LN x + FF(LN(x)) (as the reference)."""

    def __init__(self, config: TXLConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, config.d_inner)
        self.fc2 = nn.Linear(config.d_inner, config.d_model)
        self.norm = nn.LayerNorm(config.d_model)
        self.drop = nn.Dropout(config.dropout)
        self.pre_lnorm = config.pre_lnorm

    def forward(self, x: Tensor) -> Tensor:
        y = self.norm(x) if self.pre_lnorm else x  # (B, T, d)
        y = F.relu(rowwise.linear(y, self.fc1.weight, self.fc1.bias))  # (B, T, d_inner)
        y = self.drop(rowwise.linear(self.drop(y), self.fc2.weight, self.fc2.bias))  # (B, T, d)
        return x + y if self.pre_lnorm else self.norm(x + y)


class Block(nn.Module):
    """One decoder layer: relative attention over [SG(mem); h], then feed-forward."""

    def __init__(self, config: TXLConfig):
        super().__init__()
        self.attn = RelMultiHeadAttention(config)
        self.ff = FeedForward(config)
        if config.pos_enc == "learned":
            self.pos_emb = LearnedAbsolute(config.table_len, config.d_model)

    def forward(self, h: Tensor, mem: Tensor, mask: ScoreMask, **pos) -> Tensor:
        return self.ff(self.attn(h, mem, mask, **pos))  # (B, T, d)


class TransformerXL(nn.Module):
    def __init__(self, config: TXLConfig, *, shapes_only: bool = False):
        """shapes_only: a model built (on the meta device) only for its parameters' names and
        shapes: no random init and no sinusoid table computed. On meta, those ops run through
        torch's Python decompositions, whose first use imports torch._dynamo (seconds)."""
        super().__init__()
        if config.pos_enc in ("rel", "abs") and config.d_model % 2:
            raise ValueError(
                f"pos_enc={config.pos_enc!r} needs an even d_model, got {config.d_model}"
            )
        self.config = config
        H, D = config.n_head, config.d_head

        if not shapes_only:
            self.word_emb = nn.Embedding(config.vocab_size, config.d_model)
        else:  # a given weight: nn.Embedding then skips its own random init
            weight = torch.empty(config.vocab_size, config.d_model)
            self.word_emb = nn.Embedding(config.vocab_size, config.d_model, _weight=weight)
        self.emb_scale = math.sqrt(config.d_model)
        self.drop = nn.Dropout(config.dropout)
        if config.pos_enc in ("rel", "abs"):
            self.sinusoid = SinusoidEncoding(config.d_model, compute=not shapes_only)
        if not config.untie_r and config.pos_enc in ("rel", "shaw"):
            self.bias_u = nn.Parameter(torch.empty(H, D))  # u of §3.3, shared by all layers
        if not config.untie_r and config.pos_enc == "rel":
            self.bias_v = nn.Parameter(torch.empty(H, D))  # v of §3.3, shared by all layers
        self.layers = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        if not config.tie_weight:
            self.out_weight = nn.Parameter(torch.empty(config.vocab_size, config.d_model))
        self.out_bias = nn.Parameter(torch.zeros(config.vocab_size))
        if not shapes_only:
            self.reset_parameters()

    # ------------------------------------------------------------------ init
    def reset_parameters(self) -> None:
        """As the reference (weights_init): normal(0, init_std) for weights, embeddings, u, v and
        position tables; zero biases; LayerNorm gains normal(1, init_std)."""
        std = self.config.init_std
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, 0.0, std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, std)
            elif isinstance(module, nn.LayerNorm):
                nn.init.normal_(module.weight, 1.0, std)
                nn.init.zeros_(module.bias)
            elif isinstance(module, ShawRelative):
                nn.init.normal_(module.emb, 0.0, std)
                nn.init.zeros_(module.bias)
            elif isinstance(module, LearnedAbsolute):
                nn.init.normal_(module.weight, 0.0, std)
            for name in ("bias_u", "bias_v", "out_weight"):
                p = module._parameters.get(name)
                if p is not None:
                    nn.init.normal_(p, 0.0, std)
        nn.init.zeros_(self.out_bias)

    # ------------------------------------------------------------------ forward
    def forward(
        self,
        tokens: Tensor,
        doc_ids: Tensor | None = None,
        memory: Memory | KVMemory | None = None,
        targets: Tensor | None = None,
        geometry: Geometry | None = None,
        return_logits: bool = False,
        position_keys: PositionKeys | None = None,
        output_rows: Tensor | None = None,
    ) -> TXLOutput:
        """tokens, doc_ids, targets: (B, T) long. doc_ids None: all zeros (one document).
        memory None: empty (hidden states); a KVMemory: evaluation over cached keys and values
        (`forward_hidden`). geometry None: the model's default with tgt_len = T (only mem_len,
        clamp_len, same_length and reset matter here). output_rows: the rows whose nll and
        logits are computed ((b,) long; None: all), the others only renew the memory
        (`forward_hidden`); nll and logits are then (b, T) and (b, T, V).

        nll[b, t] = −log p(targets[b, t] | tokens[b, :t+1] and the memory), unreduced, in the
        dtype of the logits (targets equal to −100 get 0, as F.cross_entropy)."""
        hidden, new_memory = self.forward_hidden(
            tokens, doc_ids, memory, geometry, position_keys=position_keys, output_rows=output_rows
        )  # (B, T, d), or (b, T, d)
        logits = self.head(hidden)  # (B, T, V)
        nll = None
        if targets is not None:
            B, T = hidden.shape[:2]
            targets = targets if output_rows is None else targets[output_rows]
            nll = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
            nll = nll.view(B, T)  # (B, T)
        return TXLOutput(nll=nll, logits=logits if return_logits else None, memory=new_memory)

    def head(self, hidden: Tensor) -> Tensor:
        """(…, d) -> (…, V) logits."""
        weight = self.word_emb.weight if self.config.tie_weight else self.out_weight
        return rowwise.linear(hidden, weight, self.out_bias)

    def forward_hidden(
        self,
        tokens: Tensor,
        doc_ids: Tensor | None = None,
        memory: Memory | KVMemory | None = None,
        geometry: Geometry | None = None,
        *,
        position_keys: PositionKeys | None = None,
        output_rows: Tensor | None = None,
    ) -> tuple[Tensor, Memory | KVMemory]:
        """The trunk: -> (last hidden state after dropout (B, T, d), new memory of the same kind).

        output_rows: the rows whose last hidden state is wanted ((b,) long; None: all), for an
        evaluator that reads a few positions of long streams: the others only renew the memory.
        The memory holds each layer's input (or its keys and values), so the last layer's
        attention and feed-forward run for those rows only (none: not at all), and the hidden
        state comes back as (b, T, d). The memory is the same bits either way.

        A memory longer than geometry.mem_len is cut to its last mem_len positions first: a query
        never sees more than mem_len cached positions (mem_len 0: no recurrence at all).

        A KVMemory (txl.kv_memory) runs the evaluation path: eval mode, no gradients, "rel" or
        "shaw" only; each layer projects only the segment and reads the cached keys and values;
        `position_keys` holds W_R r_d across calls (None: computed for this call)."""
        cfg = self.config
        B, T = tokens.shape
        if geometry is None:
            geometry = Geometry.for_model(cfg, tgt_len=T)
        if doc_ids is None:
            doc_ids = torch.zeros_like(tokens)
        if memory is None:
            memory = Memory.empty(
                cfg.n_layer, B, cfg.d_model, tokens.device, self.word_emb.weight.dtype
            )
        if memory.batch_size != B or memory.n_layer != cfg.n_layer:
            raise ValueError(
                f"memory is {memory.batch_size} rows × {memory.n_layer} layers, "
                f"expected {B} rows × {cfg.n_layer} layers"
            )
        kv = isinstance(memory, KVMemory)
        if kv:
            self._check_kv_evaluation()
        mem_len = geometry.mem_len
        memory = memory.truncate(mem_len)
        M = memory.length
        K = M + T

        # who sees whom: causal, same_length, reset, padding
        doc_k = torch.cat([memory.doc_ids, doc_ids], dim=1)  # (B, K)
        mask = score_mask(  # as an additive score bias, built once for all layers
            doc_ids,
            doc_k,
            cfg.n_head,
            same_length_mem=mem_len if geometry.same_length else None,
            reset=geometry.reset,
        )
        limit = self._distance_limit(K, geometry)

        h = self.drop(self.word_emb(tokens) * self.emb_scale)  # (B, T, d)
        if kv:
            return self._forward_kv(
                h, doc_ids, memory, mask, K, limit, geometry, position_keys, output_rows
            )

        pos: dict = {}
        abs_pos = None  # (K, d) window-relative absolute encoding for [mem; h] ("abs")
        if cfg.pos_enc in ("rel", "shaw"):
            pos["rel_dist"] = relative_distances(T, K, limit, device=tokens.device)  # (T, K)
            pos["n_dist"] = limit + 1
            if cfg.pos_enc == "rel":
                pos["r"] = self.drop(self.sinusoid(limit + 1))  # (R, d) distances 0 … limit
        else:
            window = window_positions(K, limit, device=tokens.device)  # (K,)
            if cfg.pos_enc == "abs":
                abs_pos = self.sinusoid(limit + 1)[window]  # (K, d)

        hiddens = []
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            hiddens.append(h)  # the memory caches each layer's input (before positions are added)
            mem, layer_mask = memory.states[i], mask  # (B, M, d)
            if i == last and output_rows is not None:  # only these rows' outputs are read
                if len(output_rows) == 0:
                    h = h[:0]
                    break
                h, mem, layer_mask = h[output_rows], mem[output_rows], mask.select(output_rows)
            if cfg.pos_enc == "learned":
                abs_pos = layer.pos_emb(window)  # (K, d) this layer's table
            if abs_pos is not None and (cfg.pos_enc == "learned" or i == 0):
                mem = mem.to(h.dtype) + abs_pos[:M]  # (B, M, d)
                h = h + abs_pos[M:]  # (B, T, d)
            h = layer(h, mem, layer_mask, **pos, **self._relative_biases(layer.attn))  # (B, T, d)
        h = self.drop(h)
        return h, memory.update(hiddens, doc_ids, mem_len)

    def _distance_limit(self, n_keys: int, geometry: Geometry) -> int:
        """The largest distance / position index a window of `n_keys` keys uses: clamp_len, and
        the end of a learned table."""
        limit = n_keys - 1
        if geometry.clamp_len is not None:
            limit = min(limit, geometry.clamp_len)
        if self.config.pos_enc in ("shaw", "learned"):
            limit = min(limit, self.config.table_len - 1)
        return limit

    def _relative_biases(self, attn: RelMultiHeadAttention) -> dict:
        """u (and v for "rel") of one layer's attention: its own with untie_r, else the shared."""
        cfg = self.config
        out = {}
        if cfg.pos_enc in ("rel", "shaw"):
            out["bias_u"] = attn.bias_u if cfg.untie_r else self.bias_u
        if cfg.pos_enc == "rel":
            out["bias_v"] = attn.bias_v if cfg.untie_r else self.bias_v
        return out

    def _check_kv_evaluation(self) -> None:
        resolve_cache("kv", self.config.pos_enc)  # ValueError for abs / learned
        if self.training or torch.is_grad_enabled():
            raise RuntimeError(
                "a KVMemory is for evaluation: call the model in eval mode under torch.no_grad() "
                "(training uses txl.memory.Memory)"
            )

    def _forward_kv(
        self,
        h: Tensor,
        doc_ids: Tensor,
        memory: KVMemory,
        mask: ScoreMask,
        n_keys: int,
        limit: int,
        geometry: Geometry,
        position_keys: PositionKeys | None,
        output_rows: Tensor | None = None,
    ) -> tuple[Tensor, KVMemory]:
        """forward_hidden over cached keys and values (see there). output_rows: the last layer
        projects every row's keys and values for the memory and attends for those rows only."""
        cfg = self.config
        T = h.shape[1]
        rel_dist = relative_distances(T, n_keys, limit, device=h.device)  # (T, K)
        pos: dict = {"rel_dist": rel_dist, "n_dist": limit + 1}
        if cfg.pos_enc == "rel":
            position_keys = position_keys if position_keys is not None else PositionKeys()
            # the largest distance this geometry can ask for, so the table is built once
            most = self._distance_limit(geometry.mem_len + max(geometry.tgt_len, T), geometry)
            n_distances = max(most, limit) + 1
        layers = []
        start = max(0, n_keys - geometry.mem_len)  # what the next segment keeps
        room = ROOM_SEGMENTS * T  # positions a store holds beyond [memory; segment]
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            if cfg.pos_enc == "rel":
                pos["r_grid"] = position_keys.grid(
                    i, layer.attn, n_distances, self.sinusoid, rel_dist, limit
                )
            h, kv = layer.attn.forward_kv(
                h,
                functools.partial(memory.extend, i, room=room),
                mask,
                **pos,
                **self._relative_biases(layer.attn),
                rows=output_rows if i == last else None,
            )
            if len(h):
                h = layer.ff(h)  # (B, T, d), or (b, T, d)
            layers.append(kv)
        ids = torch.cat([memory.doc_ids, doc_ids.to(memory.doc_ids.device)], dim=1)
        return self.drop(h), KVMemory.of(layers, ids, start)

    def empty_memory(
        self, batch: int, cache: str = "hidden", device=None, dtype=None
    ) -> Memory | KVMemory:
        """An empty memory of `batch` rows: hidden states ("hidden") or keys and values ("kv")."""
        cfg = self.config
        param = self.word_emb.weight
        device = param.device if device is None else device
        dtype = param.dtype if dtype is None else dtype
        if cache == "kv":
            return KVMemory.empty(cfg.n_layer, batch, cfg.n_head, cfg.d_head, device, dtype)
        return Memory.empty(cfg.n_layer, batch, cfg.d_model, device, dtype)

    def num_parameters(self) -> int:
        """Every parameter once (a tied matrix once): what the MFU estimate counts."""
        return sum(p.numel() for p in self.parameters())
