"""LossModel adapters for Transformer-XL checkpoints (imports torch: loaded only when a run starts).

- `CachedTXL` (`--evaluator cached`): the streaming evaluator (`txl.evaluator.stream_nll`): each row
  is cut into segments of `tgt_len` from position 0 and each segment reads the cache of the
  previous ones — their keys and values (`--cache kv`, txl.kv_memory) or their hidden states
  (`--cache hidden`, re-projected by each segment); `auto` (the default) takes kv where it is
  exact (relative positions) and records which one ran and why. Rows that share a prefix are
  computed once up to the last segment boundary inside the prefix and forked (`select`): a base
  and its variant pay for the text before the edit once. Forking at segment boundaries keeps the
  segmentation, so forked and unforked scores agree.
- `RecomputeTXL` (`--evaluator recompute`): the sliding-window evaluator
  (`txl.evaluator.recompute_nll`): every scored token gets a fresh window of `mem_len + tgt_len`
  tokens before it and no memory (the paper's evaluation of its no-recurrence models). Direct
  window = layered reach = that window.

Both run in float32 unless told otherwise; the dtype is recorded. An adapter can wrap a model in
training (`probes.training.recall_eval` does): it never copies or converts the model (it evaluates on the
device and in the dtype of the model's parameters unless told otherwise) and leaves the model's
training flag as it found it (`txl.evaluator` switches to eval mode for a call and back).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from probes.adapters.base import DTYPES, fork_plan
from probes.api.errors import AdapterError
from probes.api.horizon import Horizon
from probes.api.model import ModelInfo, TokenScores, check_inputs
from txl.checkpoint import CheckpointError, load_checkpoint
from txl.evaluator import recompute_nll, stream_nll
from txl.geometry import Geometry
from txl.kv_memory import ROOM_SEGMENTS, PositionKeys, resolve_cache
from txl.process_rank import default_threads

FORWARD_BUDGET = 400 * 2**20  # bytes of activations and memory one forward plans for
# The KV memory on a CPU plans for less: its forwards are then no slower (the main job measured
# the same at 64, 128 and 400 MiB) while the working set stays within a large last-level cache
# and the run's peak RSS drops by about 200 MB.
KV_CPU_BUDGET = 128 * 2**20


@contextmanager
def threads(n: int | None) -> Iterator[int]:
    """Use `n` torch threads (None: `default_threads()`) inside the block and restore the
    process's previous count after it (torch's thread count is process-wide: a library call of
    `probes.run` must not leave it changed). Yields the count in use."""
    before = torch.get_num_threads()
    torch.set_num_threads(n or default_threads())
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


class _TXLBase:
    cache: str | None = None  # the memory a cached evaluator carries ("kv" | "hidden")

    def __init__(self, model, info: ModelInfo, tokenizer: dict | None, dtype: str = "float32"):
        """`model` is used as it is (no copy); scoring runs on its parameters' device."""
        self.model = model
        self.info = info
        self.tokenizer = tokenizer
        # the parameters' own device (torch.device("cuda:0"), not "cuda"): txl.evaluator copies
        # a model whose device differs from the one asked for
        self.device = next(model.parameters()).device
        self.dtype_name = dtype
        self.dtype = DTYPES[dtype]
        self.config = model.config

    def default_geometry(self) -> Geometry:
        return Geometry.for_model(self.config)

    def row_bytes(self, geometry: Geometry) -> int:
        """Bytes one row of a forward needs at `geometry`: attention scores, memory and hidden
        states, the feed-forward and the logits (an estimate, checked before a run starts)."""
        c = self.config
        keys = geometry.mem_len + geometry.tgt_len
        itemsize = torch.finfo(self.dtype).bits // 8
        attn = 3 * c.n_head * geometry.tgt_len * keys  # scores, probabilities, position scores
        # the memory, kept and renewed: a layer input per position, or its keys and values
        per_key = 2 * c.n_head * c.d_head if self.cache == "kv" else c.d_model
        states = (c.n_layer + 1) * keys * per_key + 4 * geometry.tgt_len * c.d_inner
        logits = 2 * geometry.tgt_len * c.vocab_size
        return itemsize * (attn + states + logits)

    def max_rows(self, geometry: Geometry, budget_bytes: int | None = None) -> int:
        """Rows per forward that keep activations and memory within `budget_bytes` (None: the
        adapter's own, `forward_budget`)."""
        budget = self.forward_budget() if budget_bytes is None else budget_bytes
        return max(1, min(256, budget // max(self.row_bytes(geometry), 1)))

    def forward_budget(self) -> int:
        """Bytes one forward may plan for. The KV memory on a CPU: KV_CPU_BUDGET. Everything else
        keeps FORWARD_BUDGET, so the hidden-state memory and the recompute evaluator batch (and
        round) exactly as runs recorded before the KV memory did, and rerun bit for bit."""
        if self.cache == "kv" and self.device.type == "cpu":
            return KV_CPU_BUDGET
        return FORWARD_BUDGET

    @torch.inference_mode()
    def score_window(self, tokens, doc_ids, positions, window: int, geometry) -> TokenScores:
        """Truncated context (probes.api.model, `score_window`): every scored token is predicted
        from exactly the `window` tokens before it by a fresh forward without memory
        (txl.evaluator.recompute_nll), whatever this adapter's own evaluator is."""

        check_inputs(tokens, doc_ids, positions)
        out = recompute_nll(
            self.model,
            np.ascontiguousarray(tokens, dtype=np.int64),
            np.ascontiguousarray(doc_ids, dtype=np.int64),
            int(window),
            positions=positions,
            clamp_len=geometry.clamp_len,
            reset=geometry.reset,
            device=self.device,
            dtype=self.dtype,
        )
        nll = np.where(positions, out.nll, np.nan)
        return TokenScores(nll, np.asarray(out.correct) & positions)


class CachedTXL(_TXLBase):
    """Streaming evaluation with memory (see module docstring)."""

    def __init__(self, model, info: ModelInfo, tokenizer: dict | None, dtype: str = "float32"):
        super().__init__(model, info, tokenizer, dtype)
        self.cache = (info.cache or {}).get("memory", "hidden")

    def horizon(self, geometry: Geometry) -> Horizon:
        return Horizon.of(geometry, self.config.n_layer)

    def score(self, tokens, doc_ids, positions, geometry) -> TokenScores:
        rows = tokens.shape[0]
        return self.score_shared(
            tokens,
            doc_ids,
            positions,
            geometry,
            parent=np.full(rows, -1),
            shared=np.zeros(rows, dtype=np.int64),
        )

    @torch.inference_mode()
    def score_shared(self, tokens, doc_ids, positions, geometry, *, parent, shared) -> TokenScores:

        check_inputs(tokens, doc_ids, positions)
        tokens = np.ascontiguousarray(tokens, dtype=np.int64)
        doc_ids = np.ascontiguousarray(doc_ids, dtype=np.int64)
        R, N = tokens.shape
        T = geometry.tgt_len
        nll = np.full((R, N), np.nan)
        correct = np.zeros((R, N), dtype=bool)
        if N < 2 or R == 0:
            return TokenScores(nll, correct)
        birth, end, eff_parent = fork_plan(positions, np.asarray(parent), np.asarray(shared), T, N)
        bounds = sorted({0, N - 1, *birth.tolist(), *end.tolist()})
        # the targets each row's stream computes: its own and those its forks copy from it (in
        # a segment a row reads none of, it only renews the memory: stream_nll's `positions`).
        # The KV memory only: the hidden-state memory computes every output, as every run
        # recorded before the KV memory did, so those rerun bit for bit.
        wanted = None
        if self.cache == "kv":
            wanted = np.array(positions, dtype=bool)
            for r in sorted(range(R), key=lambda i: -birth[i]):
                if eff_parent[r] >= 0:
                    wanted[eff_parent[r], : birth[r] + 1] |= wanted[r, : birth[r] + 1]
        active: list[int] = []
        memory = None
        # W_R r_d, once for the whole call (the weights cannot change within it)
        position_keys = PositionKeys() if self.cache == "kv" else None
        # a forked KV memory gets space for the next segments (it appends in place)
        room = {"room": ROOM_SEGMENTS * T} if self.cache == "kv" else {}
        for i, s in enumerate(bounds):
            born = [r for r in range(R) if birth[r] == s and (eff_parent[r] >= 0 or s == 0)]
            for r in born:  # a fork starts with its parent's scores for the shared targets
                if eff_parent[r] >= 0:
                    nll[r, : s + 1] = nll[eff_parent[r], : s + 1]
                    correct[r, : s + 1] = correct[eff_parent[r], : s + 1]
            if i == len(bounds) - 1:
                break
            e = bounds[i + 1]
            running = [r for r in active if end[r] > s] + [r for r in born if end[r] > s]
            if not running:
                active, memory = [], None
                continue
            if s == 0:
                memory = self.model.empty_memory(len(running), self.cache, self.device, self.dtype)
            else:
                where = {r: j for j, r in enumerate(active)}
                index = [where[r] if r in where else where[int(eff_parent[r])] for r in running]
                memory = memory.select(torch.tensor(index, dtype=torch.long), **room)
            rows = np.array(running)
            out = stream_nll(
                self.model,
                tokens[rows, s : e + 1],
                doc_ids[rows, s : e + 1],
                geometry,
                memory=memory,
                device=self.device,
                dtype=self.dtype,
                cache=self.cache,
                position_keys=position_keys,
                positions=None if wanted is None else wanted[rows, s : e + 1],
            )
            nll[rows, s + 1 : e + 1] = out.nll[:, 1:]
            correct[rows, s + 1 : e + 1] = out.correct[:, 1:]
            active, memory = running, out.memory
        nll[~positions] = np.nan
        correct[~positions] = False
        return TokenScores(nll, correct)


class RecomputeTXL(_TXLBase):
    """Sliding-window evaluation without memory (see module docstring)."""

    def window(self, geometry: Geometry) -> int:
        return geometry.mem_len + geometry.tgt_len

    def horizon(self, geometry: Geometry) -> Horizon:
        return Horizon.of(geometry, self.config.n_layer, window=self.window(geometry))

    def score(self, tokens, doc_ids, positions, geometry) -> TokenScores:
        return self.score_window(tokens, doc_ids, positions, self.window(geometry), geometry)


EVALUATORS = {"cached": CachedTXL, "recompute": RecomputeTXL}


def load(
    path: str | os.PathLike,
    *,
    evaluator: str = "cached",
    device: str = "cpu",
    dtype: str = "float32",
    model_id: str | None = None,
    cache: str | None = None,
) -> _TXLBase:
    """A LossModel from a checkpoint directory. Raises AdapterError (one line) when the path is not
    a usable checkpoint, or `cache` does not fit it (`wrap`)."""

    if evaluator not in EVALUATORS:
        raise AdapterError(
            f"--evaluator {evaluator!r} does not fit the Transformer-XL checkpoint "
            f"{str(path)!r}; use cached or recompute"
        )
    if dtype not in DTYPES:
        raise AdapterError(f"--dtype {dtype!r}: use {', '.join(DTYPES)}")
    _check_cache_option(evaluator, cache)
    p = Path(path)
    if not p.exists():
        raise AdapterError(f"--model {str(path)!r} does not exist; give a checkpoint directory")
    try:
        ckpt = load_checkpoint(p, device=device)
    except CheckpointError as e:
        raise AdapterError(f"--model {str(path)!r}: {e}") from None
    model = ckpt.model.to(device=device, dtype=DTYPES[dtype]).eval()
    resolved = Path(ckpt.path).resolve()
    return wrap(
        model,
        evaluator=evaluator,
        dtype=dtype,
        tokenizer=ckpt.tokenizer,
        model_id=model_id or f"{resolved.name}-{ckpt.sha256[:8]}",
        path=str(resolved),
        sha256=ckpt.sha256,
        extra={"training": ckpt.training} if ckpt.training else {},
        cache=cache,
    )


def _check_cache_option(evaluator: str, cache: str | None) -> None:
    if cache is not None and evaluator != "cached":
        raise AdapterError(
            f"--cache {cache} applies to --evaluator cached (the {evaluator} evaluator keeps no "
            "memory between segments); drop --cache"
        )


def cache_record(config, requested: str | None) -> dict[str, str]:
    """What run.json records of the cached evaluator's memory: the kind that runs ("kv" |
    "hidden"), what was asked for, and why that kind (AdapterError for "kv" where it is not
    exact)."""

    requested = requested or "auto"
    try:
        memory, why = resolve_cache(requested, config.pos_enc)
    except ValueError as e:
        raise AdapterError(f"--cache {requested}: {e}") from None
    return {"memory": memory, "requested": requested, "why": why}


def wrap(
    model,
    *,
    evaluator: str = "cached",
    dtype: str = "float32",
    tokenizer: dict | None = None,
    model_id: str = "in-memory",
    path: str = "<in memory>",
    sha256: str = "",
    extra: dict | None = None,
    cache: str | None = None,
) -> _TXLBase:
    """A LossModel around a TransformerXL object as it is (say, one in training): scored on its
    parameters' device. A model already in `dtype` is used without a copy; otherwise one
    converted copy is made here, once (never one per call). The model's training flag is left
    as it is found. `cache` (cached evaluator only): "auto" (None), "kv" or "hidden"."""
    _check_cache_option(evaluator, cache)
    config = model.config
    cache_info = cache_record(config, cache) if evaluator == "cached" else None
    param = next(model.parameters())
    if param.dtype != DTYPES[dtype]:
        import copy

        model = copy.deepcopy(model).to(dtype=DTYPES[dtype])
    info = ModelInfo(
        id=model_id,
        path=path,
        sha256=sha256,
        config=config.to_dict(),
        n_layer=config.n_layer,
        train_tgt_len=config.tgt_len,
        train_mem_len=config.mem_len,
        vocab_size=config.vocab_size,
        evaluator=evaluator,
        dtype=dtype,
        device=param.device.type,
        extra=extra or {},
        cache=cache_info,
    )
    return EVALUATORS[evaluator](model, info, tokenizer, dtype)
