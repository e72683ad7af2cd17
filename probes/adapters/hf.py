"""LossModel adapters for transformers causal LMs (the `hf` extra: transformers >= 5; imports torch
and transformers, loaded only when a run starts). docs/design.md, *Models this project did not
train*, says what each evaluator means; this docstring says how it is computed.

A model directory is what `save_pretrained` writes: `config.json` with a `model_type` and
safetensors weights. `hf_load.load` loads it with `local_files_only=True`, never `trust_remote_code`, with
the eager attention implementation (the additive mask below is used as given), in float32 unless
told otherwise (bfloat16 on request, recorded; bfloat16 logits are upcast to float32 before the
NLL, float64 ones stay float64).

Exactness. A token that cannot see an edit is computed from identical inputs in identical shapes
at the same batch index in base and variant: bit for bit the same at any thread count. (A
multi-threaded CPU matrix product may round a row differently by where it sits in a batch: an
AMD EPYC at 2 threads rounds the rows of a block's remainder differently, ~2e-7.) `stream`,
`sinks` and `window` forward ONE row at a time, every row of a scoring call at the same length
(`stream`/`sinks`: segments common to all rows). `full` forwards the rows the caller related
through `score_shared`'s `parent` (a unit) together with other units of the same shape, unit i
at batch index i of every call, pieces padded alike (`probes.adapters.hf_lockstep`); `score`
forwards each row alone, up to the call's last scored position. Logits are computed from the decoder's
last hidden states only where a score is read, LOGIT_ROWS positions per output call of that fixed
shape, so a position's logits do not depend on how many others its row scores; the adapter checks
at load that this reproduces the model's own logits (softcapping included).

Every forward gets an explicit additive attention mask and explicit `position_ids`, so the
model's own mask construction never runs — except a `window` forward (one window, no padding:
causal, and sliding where the layer slides), which runs the model's own SDPA attention and
masks (`_causal`: the same mask, equal within float32 rounding, 1.4–2.5× faster at 2,048
tokens on a CPU) — and a `full` forward of one long row whose keys are its own text (at most a
padded tail) under one visibility rule (`hf_blocked`: no mask, blocks of queries against the
keys each can reach, equal within float32 rounding; checked on a short row before a model first
uses it). Key k is visible to query q when

    k <= q  ∧  k is not padding (doc id >= 0)  ∧  (reset: doc(k) == doc(q))
            ∧  q − k < sliding_window (the layer's own, when it has one)
            ∧  the evaluator keeps k (stream: k >= seg_start(q) − mem; sinks: or k is a sink).

A model whose layers differ (Gemma 2/3: `layer_types` mixing sliding and full attention) gets one
mask per attention kind; the horizon walks the layers with each one's window.

Positions: under `carry` a token's position id is its offset in the row. Under `reset`, with
learned absolute positions, it is its offset in its document (positions restart at every boundary,
so B's scores do not depend on A's length); rotary positions stay text positions (a rotary score
depends on distances only, and the same positions under carry and reset make a token that sees
nothing of A the same computation under both). The `window` evaluator starts its positions at 0
at each window's first token (a fresh forward over W tokens).

Evaluators (`--evaluator`):
- `full`: each row in one forward. A row whose position ids reach the model's maximum positions
  is refused, naming the limit (a run refuses such texts before it starts: `max_row_length`).
- `window`: every scored token t is predicted by a fresh forward over the W = mem + tgt_len
  tokens before it (fewer at the row start and, under reset, at its document's start); this is
  also every evaluator's `score_window`.
- `stream`: the row in segments of tgt_len from position 0; each segment reads the KV cache of
  the previous ones cut to the last `mem` positions (TXL's memory, for a standard transformer:
  a cached key/value of layer l is computed from layer l's input, like TXL's `mems[l]`). Position
  ids continue through the row (rotary models: scores depend on distance only). A model without
  rotary embeddings (learned absolute positions) refuses rows whose position ids reach its
  maximum positions; dynamic rope scaling (which rescales with the current length, so cached keys
  would disagree with new ones) is refused.
- `sinks`: `stream` that also keeps the first k tokens of the row (StreamingLLM's attention
  sinks; k = --sinks) and, under reset, the first k tokens of every document (a fresh stream at
  each document). Sinks keep their positions in the text: cached keys are never re-rotated (so
  a rotary model sees its sinks at their true distance, unlike StreamingLLM, which assigns
  positions within the cache). A layer with a sliding window of its own masks the sinks like any
  other key: on a model whose every layer slides (Mistral) `sinks` computes what `stream` does,
  and its horizon says so.
- `state`: recurrent models (Mamba, RWKV) are scored by `probes.adapters.hf_state`; `load`
  sends a recurrent model_type there, where `state` (the default) and `window` fit.

`full`, `stream` and `sinks` have `score_shared`: a row that shares a prefix with a parent row
starts from a copy of the parent's cache — at the last segment boundary inside the prefix
(`stream`, `sinks`), or where the prefix ends (`full`) — and takes the parent's scores before
it (`probes.adapters.base.fork_plan`); the parent also scores the targets its forks take from
it. Under `full` a row is then forwarded in pieces cut where its forks are born, so a base and
its variant (whose forks are born at the same places) are computed in identical shapes; a
contrast row costs its answer tokens, not a second forward of the whole text.

Each row's cache is a plain `DynamicCache` of full layers (never the model's own sliding cache),
cut by index after every segment; the mask, not the cache, decides what a query sees, so rows in
one call may keep different sinks.
"""

from __future__ import annotations

import numpy as np
import torch

from probes.adapters import hf_blocked
from probes.adapters.base import fork_plan
from probes.adapters.hf_lockstep import MAX_SLOTS, Lockstep
from probes.adapters.hf_scoring import HFBase, blank_scores, token_nll, window_jobs
from probes.api.errors import AdapterError
from probes.api.horizon import UNBOUNDED, Horizon, doc_starts
from probes.api.model import ModelInfo, TokenScores, check_inputs
from txl.geometry import Geometry

EVALUATORS = ("full", "window", "stream", "sinks")
DEFAULT_EVALUATOR = "stream"
DEFAULT_SINKS = 4
DEFAULT_TGT_LEN = 64
# Rows of one output-layer call. The logits of a scored position come from a call of this fixed
# shape, at the slot its rank among the row's scored positions gives, so they never depend on
# how many other positions a row scores (see `HFModel._scores`).
LOGIT_ROWS = 8
# a `full` forward of one row with this many keys skips the (L, K) mask (`hf_blocked`)
BLOCKED_KEYS = 4096


def max_positions_of(config) -> int | None:
    for name in ("n_positions", "max_position_embeddings", "n_ctx", "max_seq_len"):
        v = getattr(config, name, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def rope_type_of(config) -> str | None:
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None)
    if isinstance(params, dict):
        if "rope_type" in params or "type" in params:
            return params.get("rope_type") or params.get("type")
        # one entry per attention kind (Gemma 3: full_attention, sliding_attention)
        kinds = {
            v.get("rope_type") or v.get("type") for v in params.values() if isinstance(v, dict)
        }
        kinds.discard(None)
        return "dynamic" if "dynamic" in kinds else (kinds.pop() if len(kinds) == 1 else None)
    return None


def layer_windows_of(config) -> tuple[int | None, ...]:
    """Each layer's own sliding attention window (None: none), from the first layer: the
    config's `layer_types` where it has them (Gemma 2/3 mix sliding and full layers), else one
    `sliding_window` for every layer (Mistral), else none."""
    n = int(config.num_hidden_layers)
    sw = getattr(config, "sliding_window", None)
    sw = int(sw) if isinstance(sw, int) and sw > 0 else None
    if getattr(config, "use_sliding_window", True) is False:  # Qwen2 states its window unused
        sw = None
    types = getattr(config, "layer_types", None)
    if types:
        if len(types) != n:
            raise AdapterError(f"config has {len(types)} layer_types for {n} layers")
        unknown = set(types) - set(LAYER_KINDS)
        if unknown:
            raise AdapterError(
                f"model_type {config.model_type!r} has attention kinds {sorted(unknown)}; "
                f"this adapter knows {', '.join(LAYER_KINDS)}"
            )
        return tuple(sw if t == "sliding_attention" else None for t in types)
    return (sw,) * n


LAYER_KINDS = ("full_attention", "sliding_attention")


def sliding_window_of(config) -> int | None:
    """The sliding window every layer shares, or None (none, or layers that differ:
    `layer_windows_of`)."""
    windows = set(layer_windows_of(config))
    return windows.pop() if len(windows) == 1 else None


class HFModel(HFBase):
    """A transformers causal LM behind the LossModel protocol (see module docstring)."""

    def __init__(
        self,
        model,
        info: ModelInfo,
        *,
        evaluator: str,
        dtype: str = "float32",
        sinks: int = DEFAULT_SINKS,
        cache_positions: bool = False,
    ):
        if evaluator not in EVALUATORS:
            raise AdapterError(
                f"--evaluator {evaluator!r} does not fit a transformers model; use "
                f"{', '.join(EVALUATORS)}"
            )
        super().__init__(model, info, evaluator=evaluator, dtype=dtype)
        self.sinks = int(sinks) if evaluator == "sinks" else 0
        if evaluator in ("full", "stream", "sinks"):  # the protocol's optional capability
            self.score_shared = self._score_shared
        config = self.config
        self.max_positions = max_positions_of(config)
        self.layer_windows = layer_windows_of(config)
        self.sliding_window = sliding_window_of(config)
        self.hybrid = len(set(self.layer_windows)) > 1
        self.rotary = any("rotary" in name.lower() for name, _ in model.named_modules())
        self.decoder = model.get_decoder()
        self.head = model.get_output_embeddings()
        self.softcap = getattr(config, "final_logit_softcapping", None)
        import inspect

        params = inspect.signature(self.decoder.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        rope = rope_type_of(config)
        if evaluator in ("stream", "sinks") and rope == "dynamic":
            raise AdapterError(
                f"--evaluator {evaluator}: dynamic rope scaling rescales with the current "
                "length, so cached keys disagree with new ones; use full or window"
            )
        self._blocked_name: str | bool | None = False  # False: not checked yet
        self.cache_positions = bool(cache_positions)
        if self.cache_positions and (evaluator not in ("stream", "sinks") or not self.rotary):
            raise AdapterError(
                f"--cache-positions re-indexes a rotary model's cached keys under --evaluator "
                f"stream or sinks; this is {evaluator} on a model with "
                f"{'rotary' if self.rotary else 'learned'} positions"
            )
        if self.cache_positions and rope not in (None, "default", "linear"):
            raise AdapterError(
                f"--cache-positions: rope type {rope!r} scales attention beyond a rotation, so "
                "re-rotated keys would not be keys at their new positions; use text positions"
            )
        self._check_head()

    # -- geometry and horizon ---------------------------------------------------------------

    def default_geometry(self) -> Geometry:
        """tgt_len 64 and a cache that fits the model: mem + tgt_len within its positions (and
        2,048) where positions are rotary; with learned absolute positions a row's positions
        continue through the cache, so the layered reach of n layers must fit too:
        (n + 2)·(mem + tgt) + tgt within the table."""
        limit = self.max_positions or 1024
        tgt = min(DEFAULT_TGT_LEN, limit)
        if self.rotary or self.evaluator == "window":
            mem = max(0, min(limit, 2048) - tgt)
        else:
            mem = max(0, (limit - tgt) // (self.n_layer + 2) - tgt)
        return Geometry(tgt_len=tgt, mem_len=mem, clamp_len=None)

    def check_geometry(self, geometry: Geometry) -> None:
        """ValueError (one line) for a geometry this adapter cannot honour."""
        if geometry.same_length:
            raise ValueError("--same-length is a Transformer-XL option; drop it")
        if geometry.clamp_len is not None:
            raise ValueError("--clamp-len is a Transformer-XL option; drop it")
        w = geometry.mem_len + geometry.tgt_len
        if self.evaluator == "window" and self.max_positions and w > self.max_positions:
            raise ValueError(
                f"--evaluator window: W = mem + tgt_len = {w} exceeds the model's "
                f"{self.max_positions} positions"
            )

    def max_row_length(self, geometry: Geometry) -> int | None:
        """The longest row (in tokens) this evaluator can score, or None for no limit: learned
        absolute positions continue through a row under `full`, `stream` and `sinks`, so a row
        ends at the position table (rotary positions continue past it)."""
        if self.evaluator == "window" or self.rotary or self.max_positions is None:
            return None
        return self.max_positions

    def window(self, geometry: Geometry) -> int:
        return geometry.mem_len + geometry.tgt_len

    def max_window(self) -> int | None:
        """The longest window `score_window` takes: the model's positions (None: no table)."""
        return self.max_positions

    def horizon(self, geometry: Geometry) -> Horizon:
        windows = self.layer_windows
        if self.evaluator == "full":
            return Horizon.of(geometry, self.n_layer, window=UNBOUNDED, layer_windows=windows)
        if self.evaluator == "window":
            return Horizon.of(
                geometry, self.n_layer, window=self.window(geometry), layer_windows=windows
            )
        return Horizon.of(geometry, self.n_layer, layer_windows=windows, sinks=self.sinks)

    def row_bytes(self, geometry: Geometry) -> int:
        """Bytes one forward needs at `geometry` (an estimate, checked before a run starts): the
        queries it really forwards (`window`: all W = mem + tgt; `full`: a row of mem + tgt
        tokens, what its default geometry holds, or a lockstep group's MAX_SLOTS padded slots,
        whichever is more; else tgt_len) against their keys — one layer's attention scores,
        hidden states and feed-forward, the KV cache of every layer (`full`: three, a forked
        family's running cache, the copy kept at a fork and the fork's own) — and one output
        call."""
        c = self.config
        T, M = geometry.tgt_len, geometry.mem_len
        if self.evaluator == "window":
            queries = keys = M + T
        elif self.evaluator == "full":  # a row of mem + tgt_len tokens, or a lockstep group
            queries = keys = max(M + T, MAX_SLOTS)
        else:
            queries, keys = T, M + T + self.sinks
        d = int(getattr(c, "hidden_size", 256))
        heads = int(getattr(c, "num_attention_heads", 4))
        ff = int(getattr(c, "intermediate_size", None) or 4 * d)
        kv = int(getattr(c, "num_key_value_heads", None) or heads)
        head_dim = int(getattr(c, "head_dim", None) or d // heads)
        item = 8 if self.dtype == torch.float64 else 4
        return item * (
            3 * heads * queries * keys
            + queries * (4 * d + 2 * ff)
            + (3 if self.evaluator == "full" else 1) * 2 * self.n_layer * keys * kv * head_dim
            + 2 * LOGIT_ROWS * int(c.vocab_size)
        )

    def cache_bytes(self, geometry: Geometry) -> int:
        """Bytes of one row's KV cache between segments (`stream`, `sinks`)."""
        c = self.config
        heads = int(getattr(c, "num_attention_heads", 4))
        kv = int(getattr(c, "num_key_value_heads", None) or heads)
        head_dim = int(getattr(c, "head_dim", None) or int(c.hidden_size) // heads)
        item = 8 if self.dtype == torch.float64 else 4
        keys = geometry.mem_len + geometry.tgt_len + self.sinks
        return item * 2 * self.n_layer * keys * kv * head_dim

    def max_rows(self, geometry: Geometry, budget_bytes: int = 400 * 2**20) -> int:
        """Rows per scoring call. Each forward holds one row; what a call holds at once is
        every running row's cache (`stream`, `sinks`) beside one forward."""
        if self.evaluator not in ("stream", "sinks"):
            return 64
        spare = max(budget_bytes - self.row_bytes(geometry), 0)
        return max(1, min(64, spare // max(self.cache_bytes(geometry), 1)))

    # -- the one forward ---------------------------------------------------------------------

    def _check_head(self) -> None:
        """The adapter computes logits itself from the decoder's last hidden states (only where
        a score is read); refuse a model whose own logits are something else."""
        n = 6
        ids = torch.arange(n, device=self.device)[None] % int(self.config.vocab_size)
        training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                theirs = self.model(input_ids=ids).logits[0].float()
                hidden = self.decoder(input_ids=ids).last_hidden_state[0]
                ours = self._logits(hidden).float()
        finally:
            self.model.train(training)
        if not torch.allclose(ours, theirs, rtol=1e-4, atol=1e-4 * float(theirs.abs().max())):
            raise AdapterError(
                f"model_type {self.config.model_type!r}: its logits are not its output "
                "embedding of the last hidden state (a scaling this adapter does not know)"
            )

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.head(hidden)
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    def _mask(self, visible: np.ndarray) -> torch.Tensor:
        """The additive (G, 1, Lq, K) mask of a (G, Lq, K) or one row's (Lq, K) bool array."""
        rows = visible if visible.ndim == 3 else visible[None]
        mask = torch.zeros((rows.shape[0], 1, *rows.shape[1:]), dtype=self.dtype)
        mask.masked_fill_(torch.from_numpy(~rows)[:, None], torch.finfo(self.dtype).min)
        return mask.to(self.device)

    def _body(self, ids, pos, visible, cache=None):
        """Last hidden states of ONE row — `ids`, `pos` (L,), `visible` a (L, K) bool array with
        K = cached + L keys, or a dict of them by attention kind (a hybrid model) → (L, d) — or
        of G rows forwarded together (`ids`, `pos` (G, L), `visible` (G, L, K) → (G, L, d));
        and the cache after it. A row's results depend on its own inputs, the call's shapes and
        its index in the batch, never on the other rows' values (a multi-threaded CPU matrix
        product may round a row differently at another row index, so rows that must agree bit
        for bit — a base and its variant — are forwarded at the same index of calls of the same
        shape). Under `sinks` with reset the cache keeps every row's document sinks, so a row
        scored beside rows with other boundaries may differ in rounding (base and variant share
        a call and their boundaries, so their zeros stay exact)."""
        dev = self.device
        one = np.ndim(ids) == 1
        if isinstance(visible, dict):
            mask = {kind: self._mask(v) for kind, v in visible.items()}
        else:
            mask = self._mask(visible)
        ids, pos = np.atleast_2d(ids), np.atleast_2d(pos)
        out = self.decoder(
            input_ids=torch.from_numpy(np.ascontiguousarray(ids, dtype=np.int64)).to(dev),
            position_ids=torch.from_numpy(np.ascontiguousarray(pos, dtype=np.int64)).to(dev),
            attention_mask=mask,
            use_cache=cache is not None,
            **({self._cache_kw: cache} if cache is not None else {}),
        )
        new = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        hidden = out.last_hidden_state
        return (hidden[0] if one else hidden), new

    @property
    def fused_windows(self) -> bool:
        """Whether a window without padding goes through the model's fused attention (`_causal`)."""
        return bool(getattr(self.decoder, "_supports_sdpa", False))

    def _causal(self, ids, pos) -> torch.Tensor:
        """Last hidden states (L, d) of ONE window with no padding, by the model's own SDPA
        attention and its own causal (and sliding-window) masks: what `_body` computes with the
        mask `_visible(…, reset=False)` builds, equal within float32 rounding (1.5e-5 nats on
        SmolLM2 and Gemma 3 at 1,500–2,049 tokens), and 1.4× (Gemma 3) to 2.5× (SmolLM2)
        faster on a CPU at 2,048 tokens, where the eager path spends most of its time on the
        (L, L) scores and mask. Deterministic for a given shape, as `_body` is."""
        hidden, _ = self._unmasked("sdpa", ids, pos)
        return hidden[0]

    def _blocked(self, G: int, k_pos: np.ndarray, k_doc: np.ndarray, reset: bool) -> bool:
        """Whether a `full` forward goes through `hf_blocked` (exact causal and sliding
        attention by blocks of queries, no mask): ONE row of at least BLOCKED_KEYS keys, which
        are its text from position 0 — real tokens, then at most padding, which no real query
        sees causally — under one visibility rule (carry, or a single document), on a model
        where blocked attention passed its check (`_blocked_implementation`)."""
        K = k_pos.shape[1]
        if G != 1 or K < BLOCKED_KEYS:
            return False
        docs = k_doc[0]
        n = int((docs >= 0).sum())
        if n == 0 or not (docs[:n] >= 0).all() or not np.array_equal(k_pos[0], np.arange(K)):
            return False
        if reset and not (docs[:n] == docs[0]).all():
            return False
        return self._blocked_implementation() is not None

    def _blocked_implementation(self) -> str | None:
        """The registered name of blocked attention over this model's layer windows, or None
        where it does not reproduce the masked forward — checked once, on a short row forwarded
        in two pieces through a cache with small blocks: a model whose layers pick their own
        kernels instead of transformers' registry, an attention this one does not compute
        (logit softcapping), a layer without a `layer_idx`."""
        if self._blocked_name is not False:
            return self._blocked_name
        self._blocked_name = None
        if not self.fused_windows or getattr(self.config, "attn_logit_softcapping", None):
            return None
        from transformers import DynamicCache

        n, half = 48, 29
        ids = np.arange(n, dtype=np.int64) * 7919 % int(self.config.vocab_size)
        pos = np.arange(n)
        docs = np.zeros(n, np.int64)
        try:
            with torch.inference_mode():
                masked, _ = self._body(ids, pos, self._visible(pos, pos, docs, docs, False))
                name = hf_blocked.register(self.layer_windows, block=5)
                first, cache = self._unmasked(name, ids[:half], pos[:half], DynamicCache())
                rest, _ = self._unmasked(name, ids[half:], pos[half:], cache)
        except Exception:  # any failure means the model cannot take this path
            return None
        blocked = torch.cat([first[0], rest[0]])
        scale = float(masked.abs().max())
        if torch.allclose(blocked.float(), masked.float(), rtol=1e-4, atol=1e-4 * scale):
            self._blocked_name = hf_blocked.register(self.layer_windows)
        return self._blocked_name

    def _unmasked(self, implementation: str, ids, pos, cache=None):
        """Last hidden states (1, L, d) of ONE row forwarded with the attention implementation
        `implementation` and no explicit mask (the model's own, or none: `hf_blocked`), and the
        cache after it."""
        config = self.decoder.config
        eager = config._attn_implementation
        config._attn_implementation = implementation
        try:
            out = self.decoder(
                input_ids=torch.from_numpy(
                    np.ascontiguousarray(ids, dtype=np.int64).reshape(1, -1)
                ).to(self.device),
                position_ids=torch.from_numpy(
                    np.ascontiguousarray(pos, dtype=np.int64).reshape(1, -1)
                ).to(self.device),
                use_cache=cache is not None,
                **({self._cache_kw: cache} if cache is not None else {}),
            )
        finally:
            config._attn_implementation = eager
        new = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        return out.last_hidden_state, new

    def _scores(self, hidden: torch.Tensor, queries: np.ndarray, targets: np.ndarray):
        """(NLL, correct) of `targets` predicted at the `queries` rows of `hidden` (L, d).
        Logits are computed only there, LOGIT_ROWS at a time in calls of that fixed shape (the
        last one padded by repeating), in float64 for a float64 model, else float32."""
        n = len(queries)
        nll = np.empty(n)
        correct = np.zeros(n, dtype=bool)
        wide = torch.float64 if self.dtype == torch.float64 else torch.float32
        for a in range(0, n, LOGIT_ROWS):
            q = queries[a : a + LOGIT_ROWS]
            idx = torch.from_numpy(np.resize(np.asarray(q, dtype=np.int64), LOGIT_ROWS))
            logits = self._logits(hidden[idx.to(hidden.device)]).to(wide)
            t = np.resize(np.asarray(targets[a : a + len(q)], dtype=np.int64), LOGIT_ROWS)
            nl, c = token_nll(logits, t)
            nll[a : a + len(q)], correct[a : a + len(q)] = nl[: len(q)], c[: len(q)]
        return nll, correct

    def _positions(self, doc_ids: np.ndarray, reset: bool) -> np.ndarray:
        """Position ids: a token's offset in its row; under reset, with learned absolute
        positions, its offset in its document (so B's scores do not depend on A's length).
        Rotary positions stay text positions under reset too: a rotary model's scores depend on
        distances only, and keeping the same positions under carry and reset makes a token that
        sees nothing of A compute the same numbers under both, bit for bit."""
        n = doc_ids.shape[1]
        pos = np.broadcast_to(np.arange(n), doc_ids.shape).copy()
        if reset and not self.rotary:
            pos -= np.stack([doc_starts(d) for d in doc_ids]) if n else 0
        return pos

    def _visible(self, q, k, qdoc, kdoc, reset: bool):
        """(Lq, Lk) bool from query/key text positions (1-D) and doc ids (Lq,) / (Lk,) of one
        row; a dict by attention kind for a hybrid model (each layer kind with its window)."""
        vis = (k[None, :] <= q[:, None]) & (kdoc[None, :] >= 0)
        if reset:
            vis &= kdoc[None, :] == qdoc[:, None]
        pad = (qdoc[:, None] < 0) & (k[None, :] == q[:, None])  # a padding query sees itself

        def windowed(s):
            v = vis if s is None else vis & ((q[:, None] - k[None, :]) < s)
            return v | pad

        if self.hybrid:
            sw = next(s for s in self.layer_windows if s is not None)
            return {"full_attention": windowed(None), "sliding_attention": windowed(sw)}
        return windowed(self.sliding_window)

    def _check_positions(self, pos: np.ndarray, doc_ids: np.ndarray, needed: np.ndarray) -> None:
        if self.max_positions is None:
            return
        top = int(pos[needed & (doc_ids >= 0)].max(initial=-1))
        if top >= self.max_positions:
            raise AdapterError(
                f"--evaluator {self.evaluator}: a row needs position {top}, beyond the model's "
                f"{self.max_positions} positions (model {self.info.path}); use --evaluator "
                "window or shorter texts"
            )

    # -- evaluators --------------------------------------------------------------------------

    def score(self, tokens, doc_ids, positions, geometry) -> TokenScores:
        check_inputs(tokens, doc_ids, positions)
        if self.evaluator == "window":
            return self.score_window(tokens, doc_ids, positions, self.window(geometry), geometry)
        tokens, doc_ids, nll, correct, nothing = blank_scores(tokens, doc_ids, positions)
        if nothing:
            return TokenScores(nll, correct)
        with torch.inference_mode():
            if self.evaluator == "full":
                nll, correct = self._full(tokens, doc_ids, positions, geometry)
            else:
                nll, correct = self._stream(tokens, doc_ids, positions, geometry)
        nll[~positions] = np.nan
        correct[~positions] = False
        return TokenScores(nll, correct)

    def _full(self, tokens, doc_ids, positions, geometry, plan=None, declared=None):
        """Each row in one causal pass, every earlier key visible (within its document under
        reset). `plan` = (birth, end, parent) from fork_plan with segments of one token
        (score_shared): row r runs over the inputs birth[r] … end[r] − 1 from a copy of its
        parent's cache at birth[r]. None: every row in one forward over the inputs 0 … last − 1
        (last: the call's last scored position, the same length for every row of the call).
        Every row of a family (a root and all that fork from it) is cut at every birth in the
        family after its own: a base shared by several variants and each of its variants then
        forward what follows a cut in identical shapes. `declared`: the caller's parents; units
        of rows it related run in lockstep, several a forward (`hf_lockstep`); None: each row
        alone. A cache kept for a fork is dropped once its last fork has taken it."""
        B, N = tokens.shape
        if plan is None:
            last = int(np.flatnonzero(positions.any(0)).max())  # inputs 0 … last − 1 are needed
            plan = (np.zeros(B, np.int64), np.full(B, last), np.full(B, -1))
        birth, end, parent = plan
        wanted = _inherited(positions, birth, parent)
        pos = self._positions(doc_ids, geometry.reset)
        needed = np.zeros_like(positions)
        for r in range(B):
            needed[r, : end[r]] = True
        self._check_positions(pos, doc_ids, needed)
        nll = np.full((B, N), np.nan)
        correct = np.zeros((B, N), dtype=bool)
        lockstep = Lockstep(birth, end, parent, wanted, declared)
        for group in lockstep.groups():
            self._full_group(lockstep, group, tokens, doc_ids, pos, geometry.reset, nll, correct)
        return nll, correct

    def _full_group(self, lockstep, group, tokens, doc_ids, pos, reset, nll, correct):
        """`_full` for units of one shape, unit i at batch index i of every forward, step by
        step of their common running order (`hf_lockstep`: segments padded by the ranks of
        their marks, pad slots seen by no query)."""
        from transformers import DynamicCache

        G, tree = len(group), lockstep.tree(group[0])
        pad = lockstep.padding(group, tree)
        rank = {v: i for i, v in enumerate(lockstep.marks(group[0]))}
        parent, wanted = lockstep.parent, lockstep.wanted
        waiting = {}  # (step, cut rank) → [caches, slot positions, slot docs, forks to take it]
        for j, (up, born, _, skip) in enumerate(tree):
            rows = [unit[j] for unit in group]
            if up >= 0:
                for r in rows:
                    p, b = int(parent[r]), lockstep.birth_of(r)
                    nll[r, : b + 1], correct[r, : b + 1] = nll[p, : b + 1], correct[p, : b + 1]
                held = waiting[(up, born)]
                held[3] -= 1
                k_pos, k_doc = held[1], held[2]
                if held[3] == 0:
                    cache = held[0]
                    del waiting[(up, born)]
                else:
                    cache = _select(held[0], np.arange(k_pos.shape[1]), self.device)
            else:
                forked = any(step[0] == j for step in tree)
                cache = DynamicCache() if forked else None
                k_pos, k_doc = np.zeros((G, 0), np.int64), np.zeros((G, 0), np.int64)
            if skip:
                continue  # nothing to score and nothing forks from it
            takers = [step[1] for step in tree if step[0] == j]
            cuts = [lockstep.cuts(unit, j) for unit in group]
            for m in range(len(cuts[0]) - 1):
                s = [c[m] for c in cuts]
                e = [c[m + 1] for c in cuts]
                L, K = pad[(rank[cuts[0][m]], rank[cuts[0][m + 1]])], k_pos.shape[1]
                ids = np.zeros((G, L), np.int64)
                q_ids = np.zeros((G, L), np.int64)
                q_pos = np.repeat(-1 - (K + np.arange(L))[None], G, 0)  # pads: unique, < 0
                q_doc = np.full((G, L), -1, np.int64)
                for i, r in enumerate(rows):
                    n = e[i] - s[i]
                    ids[i, :n], q_ids[i, :n] = tokens[r, s[i] : e[i]], pos[r, s[i] : e[i]]
                    q_pos[i, :n], q_doc[i, :n] = np.arange(s[i], e[i]), doc_ids[r, s[i] : e[i]]
                k_pos = np.concatenate([k_pos, q_pos], 1)
                k_doc = np.concatenate([k_doc, q_doc], 1)
                if self._blocked(G, k_pos, k_doc, reset):
                    hidden, cache = self._unmasked(self._blocked_name, ids, q_ids, cache)
                else:
                    vis = [
                        self._visible(q_pos[i], k_pos[i], q_doc[i], k_doc[i], reset)
                        for i in range(G)
                    ]
                    if self.hybrid:
                        vis = {kind: np.stack([v[kind] for v in vis]) for kind in vis[0]}
                    else:
                        vis = np.stack(vis)
                    hidden, cache = self._body(ids, q_ids, vis, cache)
                for i, r in enumerate(rows):
                    t = s[i] + 1 + np.flatnonzero(wanted[r, s[i] + 1 : e[i] + 1])
                    if t.size:
                        nll[r, t], correct[r, t] = self._scores(
                            hidden[i], t - 1 - s[i], tokens[r, t]
                        )
                here = rank[cuts[0][m + 1]]
                if here in takers:
                    kept = _select(cache, np.arange(k_pos.shape[1]), self.device)
                    waiting[(j, here)] = [kept, k_pos, k_doc, takers.count(here)]

    def _sink_rows(self, doc_ids: np.ndarray, reset: bool) -> np.ndarray:
        """(B, N) bool: the positions each row keeps as sinks."""
        B, N = doc_ids.shape
        keep = np.zeros((B, N), dtype=bool)
        if self.sinks <= 0:
            return keep
        keep[:, : self.sinks] = True
        if reset:
            offset = np.arange(N)[None, :] - np.stack([doc_starts(d) for d in doc_ids])
            keep |= offset < self.sinks
        return keep

    def _stream(self, tokens, doc_ids, positions, geometry, plan=None):
        """Segments of tgt_len over the rows, each row its own forward and cache; `plan` =
        (birth, end, parent) from `probes.adapters.base.fork_plan` (score_shared): row r runs
        over the inputs birth[r] … end[r] − 1, starting from a copy of its parent's cache at
        birth[r] > 0 (and its parent's scores before it). None: every row from 0 to the last
        scored input."""
        from transformers import DynamicCache

        B, N = tokens.shape
        T, M = geometry.tgt_len, geometry.mem_len
        last = int(np.flatnonzero(positions.any(0)).max())
        if self.cache_positions and self.sinks and geometry.reset:
            documents = [len(np.unique(d[d >= 0])) for d in doc_ids]
            if max(documents, default=1) > 1:  # every document's sinks share the cache's slots
                raise AdapterError(
                    "--cache-positions with --evaluator sinks under --reset: rows of several "
                    "documents keep each document's sinks in one cache, so a row's slots "
                    "would depend on the others; use --carry or text positions"
                )
        if plan is None:
            plan = (np.zeros(B, np.int64), np.full(B, last), np.full(B, -1))
        birth, end, parent = plan
        wanted = _inherited(positions, birth, parent)
        pos = self._positions(doc_ids, geometry.reset)
        needed = np.zeros_like(positions)
        needed[:, :last] = True
        if not self.rotary:
            self._check_positions(pos, doc_ids, needed)
        sink = self._sink_rows(doc_ids, geometry.reset)
        nll = np.full((B, N), np.nan)
        correct = np.zeros((B, N), dtype=bool)
        kept = np.zeros(0, dtype=np.int64)  # text positions held in every cache, in order
        caches: dict[int, object] = {}
        for s in range(0, last, T):
            e = min(s + T, last)
            born = [r for r in range(B) if birth[r] == s and (parent[r] >= 0 or s == 0)]
            for r in born:  # a fork starts with its parent's scores of the shared targets
                if parent[r] >= 0 and s > 0:
                    p = int(parent[r])
                    nll[r, : s + 1], correct[r, : s + 1] = nll[p, : s + 1], correct[p, : s + 1]
                    caches[r] = _select(caches[p], np.arange(kept.size), self.device)
                else:
                    caches[r] = DynamicCache()
            running = [r for r in sorted(caches) if end[r] > s]
            if not running:
                break
            q = np.arange(s, e)
            k = np.concatenate([kept, q])
            for r in running:
                vis = self._visible(q, k, doc_ids[r, s:e], doc_ids[r, k], geometry.reset)
                window = (k[None, :] >= s - M) | sink[r, k][None, :]
                vis = {kind: v & window for kind, v in vis.items()} if self.hybrid else vis & window
                # re-indexed: the queries right after the cache's slots (keys re-rotated below)
                qpos = kept.size + np.arange(e - s) if self.cache_positions else pos[r, s:e]
                hidden, caches[r] = self._body(tokens[r, s:e], qpos, vis, caches[r])
                t = s + 1 + np.flatnonzero(wanted[r, s + 1 : e + 1])
                if t.size:
                    nll[r, t], correct[r, t] = self._scores(hidden, t - 1 - s, tokens[r, t])
            if e >= last:
                break
            # what a later segment may still read: the last M positions and the sinks
            keep = (k >= e - M) | sink[:, k].any(0)
            kept = k[keep]
            slots = np.flatnonzero(keep)
            later = {int(parent[f]) for f in range(B) if parent[f] >= 0 and birth[f] >= e}
            caches = {
                r: _select(c, slots, self.device)
                for r, c in caches.items()
                if end[r] > e or r in later  # still running, or a fork of it is yet to start
            }
            if self.cache_positions:  # slot j was rotated at position slots[j]: move it to j
                shift = np.arange(slots.size) - slots
                if shift.any():
                    for c in caches.values():
                        self._rotate_keys(c, shift)
        return nll, correct

    def _rotate_keys(self, cache, shift: np.ndarray) -> None:
        """Rotate every layer's cached keys in place by `shift` positions each (one per slot):
        a rotary key computed at position p then reads as computed at p + shift (rotations
        compose: R(a)R(b) = R(a + b)), each layer by its own rotary embedding (Gemma 3: the
        local and global ones differ)."""
        from transformers.models.llama.modeling_llama import rotate_half

        delta = torch.from_numpy(shift.astype(np.int64))[None].to(self.device)
        kinds = getattr(self.config, "layer_types", None)
        rotary = self.decoder.rotary_emb
        for i, layer in enumerate(cache.layers):
            keys = layer.keys.float()  # a key is re-rotated at every cut: no bfloat16 drift
            if kinds:
                cos, sin = rotary(keys, delta, kinds[i])
            else:
                cos, sin = rotary(keys, delta)
            cos, sin = cos[:, None].float(), sin[:, None].float()
            layer.keys = (keys * cos + rotate_half(keys) * sin).to(layer.keys.dtype)

    def _score_shared(self, tokens, doc_ids, positions, geometry, *, parent, shared):
        """`score_shared` of `full`, `stream` and `sinks` (`window` has no prefix to share: each
        scored token has a window of its own): rows that share a prefix with a parent row are
        computed once up to a fork point inside it (a segment boundary when streaming, the
        prefix's end under `full`) and forked from the parent's cache there."""
        check_inputs(tokens, doc_ids, positions)
        tokens, doc_ids, nll, correct, nothing = blank_scores(tokens, doc_ids, positions)
        if nothing:
            return TokenScores(nll, correct)
        N = tokens.shape[1]
        T = 1 if self.evaluator == "full" else geometry.tgt_len
        plan = fork_plan(positions, np.asarray(parent), np.asarray(shared), T, N)
        with torch.inference_mode():
            if self.evaluator == "full":
                nll, correct = self._full(tokens, doc_ids, positions, geometry, plan, parent)
            else:
                nll, correct = self._stream(tokens, doc_ids, positions, geometry, plan)
        nll[~positions] = np.nan
        correct[~positions] = False
        return TokenScores(nll, correct)

    def score_window(self, tokens, doc_ids, positions, window: int, geometry) -> TokenScores:
        """Truncated context (probes.api.model): each scored token t by a fresh forward over the
        `window` tokens before it (from its query's document start under reset), positions from
        0 at the window start; one forward per scored token, of exactly that many tokens."""
        check_inputs(tokens, doc_ids, positions)
        tokens, doc_ids, nll, correct, _ = blank_scores(tokens, doc_ids, positions)
        window = int(window)
        if window < 1:
            raise ValueError(f"a window of {window} tokens predicts nothing; need >= 1")
        if self.max_positions and window > self.max_positions:
            raise AdapterError(
                f"a window of {window} tokens exceeds the model's {self.max_positions} positions"
            )
        with torch.inference_mode():
            for r, t, a in window_jobs(doc_ids, positions, window, geometry.reset):
                idx = np.arange(t - a)
                docs = doc_ids[r, a:t]
                if self.fused_windows and (docs >= 0).all():
                    hidden = self._causal(tokens[r, a:t], idx)
                else:
                    vis = self._visible(idx, idx, docs, docs, False)
                    hidden, _ = self._body(tokens[r, a:t], idx, vis)
                n, c = self._scores(hidden, idx[-1:], tokens[r, t : t + 1])
                nll[r, t], correct[r, t] = n[0], c[0]
        return TokenScores(nll, correct)


def _inherited(positions: np.ndarray, birth: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """(B, N) bool: the targets each row must score — its own, and those a fork of it (or of
    its forks) takes from it: targets up to the fork's birth, which the fork never computes."""
    wanted = positions.copy()
    changed = True
    while changed:  # forks of forks: pass the targets up until nothing changes
        changed = False
        for r in np.flatnonzero(parent >= 0):
            p, b = int(parent[r]), int(birth[r])
            add = wanted[r, : b + 1] & ~wanted[p, : b + 1]
            if add.any():
                wanted[p, : b + 1] |= add
                changed = True
    return wanted


def _select(cache, index: np.ndarray, device):
    """A new DynamicCache holding only the given cache slots (along time) of every layer."""
    from transformers import DynamicCache

    ix = torch.from_numpy(np.asarray(index, dtype=np.int64)).to(device)
    data = [
        (layer.keys.index_select(2, ix), layer.values.index_select(2, ix)) for layer in cache.layers
    ]
    return DynamicCache(ddp_cache_data=data)
