"""LossModel adapters for transformers causal LMs (the `hf` extra: transformers >= 5; imports torch
and transformers, loaded only when a run starts). docs/design.md, *Models this project did not
train*, says what each evaluator means; this docstring says how it is computed.

A model directory is what `save_pretrained` writes: `config.json` with a `model_type` and
safetensors weights. `hf_load.load` loads it with `local_files_only=True`, never `trust_remote_code`, with
the eager attention implementation (the additive mask below is used as given), in float32 unless
told otherwise (bfloat16 on request, recorded; logits are upcast to float32 before the NLL).

Every forward gets an explicit 4-D additive attention mask and explicit `position_ids`, so the
model's own mask construction never runs. Key k is visible to query q when

    k <= q  ∧  k is not padding (doc id >= 0)  ∧  (reset: doc(k) == doc(q))
            ∧  q − k < sliding_window (the model's own, when its config has one)
            ∧  the evaluator keeps k (stream: k >= seg_start(q) − mem; sinks: or k is a sink).

Positions: under `reset` a token's position id is its offset in its document (positions restart at
every boundary, so with learned absolute positions B's scores do not depend on A's length); under
`carry` it is its offset in the row. The `window` evaluator starts its positions at 0 at each
window's first token (a fresh forward over W tokens).

Evaluators (`--evaluator`):
- `full`: each row in one forward. A row whose position ids reach the model's maximum positions
  is refused, naming the limit.
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
  positions within the cache).
- `state`: recurrent models (Mamba, RWKV) are scored by `probes.adapters.hf_state`; `load`
  sends a recurrent model_type there, where `state` (the default) and `window` fit.

`stream` and `sinks` have `score_shared`: a row that shares a prefix with a parent row starts at
the last segment boundary inside the prefix from the parent's cache (batch rows selected, a row
may repeat) and takes the parent's scores before it (`probes.adapters.txl.fork_plan`).

The cache is a plain `DynamicCache` of full layers (never the model's own sliding cache), cut by
index after every segment; the mask, not the cache, decides what a query sees, so rows in one
batch may keep different sinks.
"""

from __future__ import annotations

import numpy as np
import torch

from probes.adapters.hf_scoring import HFBase, blank_scores, token_nll
from probes.adapters.txl import AdapterError
from probes.protocol import ModelInfo, TokenScores, check_inputs
from probes.reach import UNBOUNDED, Horizon, doc_starts
from txl.geometry import Geometry

EVALUATORS = ("full", "window", "stream", "sinks")
DEFAULT_EVALUATOR = "stream"
DEFAULT_SINKS = 4
DEFAULT_TGT_LEN = 64


def max_positions_of(config) -> int | None:
    for name in ("n_positions", "max_position_embeddings", "n_ctx", "max_seq_len"):
        v = getattr(config, name, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def rope_type_of(config) -> str | None:
    params = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None)
    if isinstance(params, dict):
        return params.get("rope_type") or params.get("type")
    return None


def sliding_window_of(config) -> int | None:
    types = getattr(config, "layer_types", None)
    if types and len(set(types)) > 1:
        raise AdapterError(
            f"model_type {config.model_type!r} mixes attention kinds across layers "
            f"({', '.join(sorted(set(types)))}); one mask per call cannot express that yet"
        )
    if getattr(config, "usesliding_window_of", True) is False:
        return None
    sw = getattr(config, "sliding_window", None)
    return int(sw) if isinstance(sw, int) and sw > 0 else None


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
    ):
        if evaluator not in EVALUATORS:
            raise AdapterError(
                f"--evaluator {evaluator!r} does not fit a transformers model; use "
                f"{', '.join(EVALUATORS)}"
            )
        super().__init__(model, info, evaluator=evaluator, dtype=dtype)
        self.sinks = int(sinks) if evaluator == "sinks" else 0
        if evaluator in ("stream", "sinks"):  # the protocol's optional capability
            self.score_shared = self._score_shared
        config = self.config
        self.max_positions = max_positions_of(config)
        self.sliding_window = sliding_window_of(config)
        self.rotary = any("rotary" in name.lower() for name, _ in model.named_modules())
        import inspect

        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        rope = rope_type_of(config)
        if evaluator in ("stream", "sinks") and rope == "dynamic":
            raise AdapterError(
                f"--evaluator {evaluator}: dynamic rope scaling rescales with the current "
                "length, so cached keys disagree with new ones; use full or window"
            )

    # -- geometry and horizon ---------------------------------------------------------------

    def default_geometry(self) -> Geometry:
        limit = self.max_positions or 1024
        tgt = min(DEFAULT_TGT_LEN, limit)
        return Geometry(tgt_len=tgt, mem_len=max(0, min(limit, 2048) - tgt), clamp_len=None)

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

    def window(self, geometry: Geometry) -> int:
        return geometry.mem_len + geometry.tgt_len

    def horizon(self, geometry: Geometry) -> Horizon:
        sw = self.sliding_window
        if self.evaluator == "full":
            return Horizon.of(geometry, self.n_layer, window=UNBOUNDED, sliding_window=sw)
        if self.evaluator == "window":
            return Horizon.of(
                geometry, self.n_layer, window=self.window(geometry), sliding_window=sw
            )
        return Horizon.of(geometry, self.n_layer, sliding_window=sw)

    def row_bytes(self, geometry: Geometry) -> int:
        """Bytes one row of a forward needs at `geometry` (an estimate, checked before a run
        starts): one layer's attention scores, the KV cache of every layer, the logits."""
        c = self.config
        keys = geometry.mem_len + geometry.tgt_len
        d = int(getattr(c, "hidden_size", 256))
        heads = int(getattr(c, "num_attention_heads", 4))
        return 4 * (
            3 * heads * geometry.tgt_len * keys
            + 2 * (self.n_layer + 1) * keys * d
            + 2 * geometry.tgt_len * int(c.vocab_size)
        )

    def max_rows(self, geometry: Geometry, budget_bytes: int = 400 * 2**20) -> int:
        return max(1, min(64, budget_bytes // max(self.row_bytes(geometry), 1)))

    # -- the one forward ---------------------------------------------------------------------

    def _forward(self, ids, pos, visible, cache=None):
        """Logits (float32) of one call: `ids`, `pos` (B, L), `visible` (B, L, K) bool with K =
        cached + L keys."""
        dev = self.device
        mask = torch.zeros(visible.shape, dtype=self.dtype)
        mask.masked_fill_(torch.from_numpy(~visible), torch.finfo(self.dtype).min)
        out = self.model(
            input_ids=torch.from_numpy(np.ascontiguousarray(ids, dtype=np.int64)).to(dev),
            position_ids=torch.from_numpy(np.ascontiguousarray(pos, dtype=np.int64)).to(dev),
            attention_mask=mask[:, None].to(dev),
            use_cache=cache is not None,
            **({self._cache_kw: cache} if cache is not None else {}),
        )
        new = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        return out.logits.float(), new

    def _positions(self, doc_ids: np.ndarray, reset: bool) -> np.ndarray:
        n = doc_ids.shape[1]
        pos = np.broadcast_to(np.arange(n), doc_ids.shape).copy()
        if reset:
            pos -= np.stack([doc_starts(d) for d in doc_ids]) if n else 0
        return pos

    def _visible(self, q, k, qdoc, kdoc, reset: bool) -> np.ndarray:
        """(B, Lq, Lk) bool from query/key text positions (1-D) and doc ids (B, Lq) / (B, Lk)."""
        vis = (k[None, None, :] <= q[None, :, None]) & (kdoc[:, None, :] >= 0)
        if reset:
            vis &= kdoc[:, None, :] == qdoc[:, :, None]
        if self.sliding_window is not None:
            vis &= (q[None, :, None] - k[None, None, :]) < self.sliding_window
        # a padding query sees itself, so no softmax row is empty
        vis |= (qdoc[:, :, None] < 0) & (k[None, None, :] == q[None, :, None])
        return vis

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
        R = tokens.shape[0]
        step = max(1, self.max_rows(geometry))
        with torch.inference_mode():
            for a in range(0, R, step):
                rows = slice(a, min(R, a + step))
                fn = self._full if self.evaluator == "full" else self._stream
                n, c = fn(tokens[rows], doc_ids[rows], positions[rows], geometry)
                nll[rows], correct[rows] = n, c
        nll[~positions] = np.nan
        correct[~positions] = False
        return TokenScores(nll, correct)

    def _full(self, tokens, doc_ids, positions, geometry):
        B, N = tokens.shape
        last = int(np.flatnonzero(positions.any(0)).max())  # inputs 0 … last − 1 are needed
        pos = self._positions(doc_ids, geometry.reset)
        needed = np.zeros_like(positions)
        needed[:, :last] = True
        self._check_positions(pos, doc_ids, needed)
        idx = np.arange(last)
        vis = self._visible(idx, idx, doc_ids[:, :last], doc_ids[:, :last], geometry.reset)
        logits, _ = self._forward(tokens[:, :last], pos[:, :last], vis)
        nll = np.full((B, N), np.nan)
        correct = np.zeros((B, N), dtype=bool)
        nll[:, 1 : last + 1], correct[:, 1 : last + 1] = token_nll(logits, tokens[:, 1 : last + 1])
        return nll, correct

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
        """Segments of tgt_len over the rows; `plan` = (birth, end, parent) from
        `probes.adapters.txl.fork_plan` (score_shared): row r runs over the inputs birth[r] …
        end[r] − 1, starting from its parent's cache at birth[r] > 0 (and its parent's scores
        before it). None: every row from 0 to the last scored input."""
        from transformers import DynamicCache

        B, N = tokens.shape
        T, M = geometry.tgt_len, geometry.mem_len
        last = int(np.flatnonzero(positions.any(0)).max())
        if plan is None:
            plan = (np.zeros(B, np.int64), np.full(B, last), np.full(B, -1))
        birth, end, parent = plan
        pos = self._positions(doc_ids, geometry.reset)
        needed = np.zeros_like(positions)
        needed[:, :last] = True
        if not self.rotary:
            self._check_positions(pos, doc_ids, needed)
        sink = self._sink_rows(doc_ids, geometry.reset)
        nll = np.full((B, N), np.nan)
        correct = np.zeros((B, N), dtype=bool)
        kept = np.zeros(0, dtype=np.int64)  # text positions held in the cache, in order
        cache = DynamicCache()
        active: list[int] = []  # the rows of the cache's batch, in order
        for s in range(0, last, T):
            e = min(s + T, last)
            born = [r for r in range(B) if birth[r] == s and (parent[r] >= 0 or s == 0)]
            for r in born:  # a fork starts with its parent's scores of the shared targets
                if parent[r] >= 0:
                    nll[r, : s + 1], correct[r, : s + 1] = (
                        nll[parent[r], : s + 1],
                        correct[parent[r], : s + 1],
                    )
            running = [r for r in active if end[r] > s] + [r for r in born if end[r] > s]
            if not running:
                break
            if s > 0 and running != active:
                where = {r: j for j, r in enumerate(active)}
                index = [where[r] if r in where else where[int(parent[r])] for r in running]
                cache = _select(cache, np.arange(kept.size), self.device, np.array(index))
            rows = np.array(running)
            q = np.arange(s, e)
            k = np.concatenate([kept, q])
            vis = self._visible(q, k, doc_ids[rows, s:e], doc_ids[rows][:, k], geometry.reset)
            vis &= (k[None, None, :] >= s - M) | sink[rows][:, k][:, None, :]
            logits, cache = self._forward(tokens[rows, s:e], pos[rows, s:e], vis, cache)
            nll[rows, s + 1 : e + 1], correct[rows, s + 1 : e + 1] = token_nll(
                logits, tokens[rows, s + 1 : e + 1]
            )
            active = running
            if e >= last:
                break
            # what a later segment may still read: the last M positions and the sinks
            keep = (k >= e - M) | sink[:, k].any(0)
            kept = k[keep]
            cache = _select(cache, np.flatnonzero(keep), self.device)
        return nll, correct

    def _score_shared(self, tokens, doc_ids, positions, geometry, *, parent, shared):
        """`score_shared` of `stream` and `sinks` (only they have it: `full` and `window` have no
        segments to share): rows that share a prefix with a parent row are computed once up to
        the last segment boundary inside it and forked from the parent's cache there."""
        check_inputs(tokens, doc_ids, positions)
        from probes.adapters.txl import fork_plan

        tokens, doc_ids, nll, correct, nothing = blank_scores(tokens, doc_ids, positions)
        if nothing:
            return TokenScores(nll, correct)
        N = tokens.shape[1]
        T = geometry.tgt_len
        plan = fork_plan(positions, np.asarray(parent), np.asarray(shared), T, N)
        with torch.inference_mode():
            nll, correct = self._stream(tokens, doc_ids, positions, geometry, plan)
        nll[~positions] = np.nan
        correct[~positions] = False
        return TokenScores(nll, correct)

    def score_window(self, tokens, doc_ids, positions, window: int, geometry) -> TokenScores:
        """Truncated context (probes.protocol): each scored token t by a fresh forward over the
        `window` tokens before it (from its query's document start under reset), positions from
        0 at the window start."""
        check_inputs(tokens, doc_ids, positions)
        tokens, doc_ids, nll, correct, _ = blank_scores(tokens, doc_ids, positions)
        R = tokens.shape[0]
        window = int(window)
        if window < 1:
            raise ValueError(f"a window of {window} tokens predicts nothing; need >= 1")
        if self.max_positions and window > self.max_positions:
            raise AdapterError(
                f"a window of {window} tokens exceeds the model's {self.max_positions} positions"
            )
        jobs = []
        for r in range(R):
            starts = doc_starts(doc_ids[r])
            for t in np.flatnonzero(positions[r]):
                a = max(0, t - window)
                if geometry.reset:
                    a = max(a, int(starts[t - 1]))
                jobs.append((r, int(t), a))
        step = max(1, 4 * self.max_rows(geometry))
        with torch.inference_mode():
            for i in range(0, len(jobs), step):
                chunk = jobs[i : i + step]
                L = max(t - a for _, t, a in chunk)
                ids = np.zeros((len(chunk), L), dtype=np.int64)
                docs = np.full((len(chunk), L), -1, dtype=np.int64)
                for j, (r, t, a) in enumerate(chunk):
                    ids[j, : t - a] = tokens[r, a:t]
                    docs[j, : t - a] = doc_ids[r, a:t]
                pos = np.broadcast_to(np.arange(L), ids.shape)
                idx = np.arange(L)
                vis = self._visible(idx, idx, docs, docs, False)
                logits, _ = self._forward(ids, pos, vis)
                ends = torch.tensor([t - a - 1 for _, t, a in chunk])
                picked = logits[torch.arange(len(chunk)), ends.to(logits.device)]
                targets = np.array([tokens[r, t] for r, t, _ in chunk])
                n, c = token_nll(picked, targets)
                for j, (r, t, _) in enumerate(chunk):
                    nll[r, t], correct[r, t] = n[j], c[j]
        return TokenScores(nll, correct)


def _select(cache, index: np.ndarray, device, rows: np.ndarray | None = None):
    """A DynamicCache holding only the given cache slots (along time) of every layer and, when
    `rows` is given, those batch rows (in that order; a row may repeat: a fork)."""
    from transformers import DynamicCache

    ix = torch.from_numpy(index).to(device)
    data = []
    for layer in cache.layers:
        keys, values = layer.keys.index_select(2, ix), layer.values.index_select(2, ix)
        if rows is not None:
            rx = torch.from_numpy(np.asarray(rows, dtype=np.int64)).to(device)
            keys, values = keys.index_select(0, rx), values.index_select(0, rx)
        data.append((keys, values))
    return DynamicCache(ddp_cache_data=data)
