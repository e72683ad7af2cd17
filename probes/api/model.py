"""The one door through which probes reach a model: per-token loss.

    nll[b, t] = −log p(tokens[b, t] | tokens[b, :t])     (NaN at t = 0 and where not scored)
    correct[b, t] = (argmax prediction at t == tokens[b, t])   (False where not scored)

Given token ids, doc ids (padding −1), the positions to score and an evaluation geometry, a
`LossModel` returns `TokenScores`. Scoring only the requested positions matters: the recompute
evaluator costs a whole window per scored token. Adapters for Transformer-XL live in
`probes.adapters.txl`; a new kind of model (an external LM) needs only this protocol, and goes
through `probes.run(probe, model=<the LossModel>)` like a checkpoint does (a new kind of model
file is registered with `probes.api.kinds.register_model_kind`).

Every member the code reads off a model is listed below, with who reads it;
tests/test_api_model_capabilities.py fails when one is read but not listed here. Required:

- `info: ModelInfo` — what is recorded (id, sha256, n_layer, training geometry, `vocab_size`);
- `tokenizer: dict | None` — the tokenizer JSON the model reads (a synth language's JSON; the
  runner refuses text in another language), or None when the model makes no claim (any token id
  below `info.vocab_size` is scored);
- `default_geometry()` — the evaluation geometry used when none is given; the run's options
  (--mem, --tgt-len, …) replace its fields (`geometry(model, **overrides)`);
- `score(tokens, doc_ids, positions, geometry) -> TokenScores`.

Optional capabilities, used when present:
- `score_shared(tokens, doc_ids, positions, geometry, *, parent, shared)`: rows that share a prefix
  with another row (`tokens[r, :shared[r]] == tokens[parent[r], :shared[r]]`, parent −1 for none)
  may be computed once up to it and forked. Results must equal `score` on the same rows.
  `parent` also says which rows belong together (`shared` 0: related, nothing shared): rows
  the caller compares bit for bit (a base and its variant, a text and its other-prefix twin)
  must be related through it, since a model may forward unrelated rows together and a row's
  rounding may depend on where it sits in a batch (`probes.adapters.hf_lockstep`).
- `max_rows(geometry) -> int`: rows per scoring call that fit in memory (default 64; `max_rows`).
- `row_bytes(geometry) -> int`: the memory one row of a forward needs; a run whose one row
  would not fit in the machine's memory is refused before it starts (`probes.limits`).
- `horizon(geometry) -> probes.api.horizon.Horizon`: what a scored token can see. Without it a
  Transformer-XL streaming evaluator with `info.n_layer` layers is assumed.
- `score_window(tokens, doc_ids, positions, window, geometry)`: truncated context: every scored
  token is predicted from exactly the `window` tokens before it (fewer at the row start and,
  under `geometry.reset`, at its document's start), recomputed without memory. Context sweeps,
  RECL and the speed comparison need it (`score_truncated` says so when a model lacks it).
- `max_window() -> int | None`: the longest `window` that `score_window` takes (a model's
  position table), None for no limit (`window_limit`).
- `check_geometry(geometry)`: ValueError (one line) for an evaluation geometry the model cannot
  honour (a Transformer-XL option on a transformers model); the runner refuses such a run before
  it starts (`probes.framework.runner`).
- `max_row_length(geometry) -> int | None`: the longest row the model can score (learned absolute
  positions end at the position table), None for no limit; the runner refuses planned texts
  longer than it, and probes keep their texts below it (`RunContext.length_limits`).
- `evaluator: str`: the evaluator the model scores with; "state" (a recurrent model scored by
  its state) makes the boundary probe not applicable (`probes.library.boundary`) and exempts
  the model from a `--mem` given to the models beside it (`probes.framework.models.carries_state`).
- `special_tokens: dict`: the bos and eos tokens a model names when no tokenizer directory does
  (a GGUF file's own), read to choose the token that opens each document
  (`probes.texts.choose.special_tokens`).
- `tokenizer_origin: str`: where the model's tokenizer came from when it is not a
  tokenizer.json beside the weights (rebuilt from a GGUF file): recorded as the vocabulary's
  origin, and a `--tokenizer` given for such a model is not held to the rebuilt JSON's sha256
  (`probes.texts.choose.model_vocabulary`).

This module imports no torch.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from probes.api.horizon import Horizon


@dataclass(frozen=True)
class ModelInfo:
    id: str  # short name used in result paths, e.g. "default-1a2b3c4d"
    path: str  # where it was loaded from
    sha256: str  # of the weights file
    config: dict[str, Any]  # the model config as stored
    n_layer: int
    train_tgt_len: int
    train_mem_len: int
    vocab_size: int | None = None  # token ids the model scores (None: not stated)
    evaluator: str = "cached"  # "cached" | "recompute" | an external adapter's name
    dtype: str = "float32"
    device: str = "cpu"
    extra: dict[str, Any] = field(default_factory=dict)  # anything else worth recording
    # a streaming evaluator's memory: {"memory": "kv" | "hidden", "requested", "why"}; None where
    # the adapter has no choice of memory
    cache: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for key in ("extra", "cache"):
            if not d[key]:
                del d[key]  # recorded only when there is something in it
        return d


@dataclass
class TokenScores:
    nll: np.ndarray  # (B, N) float64; NaN at t = 0 and at unscored positions
    correct: np.ndarray  # (B, N) bool; False at unscored positions

    def take(self, row: int, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.nll[row, positions], self.correct[row, positions]


@runtime_checkable
class LossModel(Protocol):
    info: ModelInfo
    tokenizer: dict[str, Any] | None

    def default_geometry(self) -> Any:  # txl.geometry.Geometry
        ...

    def score(
        self, tokens: np.ndarray, doc_ids: np.ndarray, positions: np.ndarray, geometry: Any
    ) -> TokenScores: ...


def geometry(model: LossModel, **overrides: Any) -> Any:
    """The model's default geometry with the given fields replaced (None keeps the default).
    Raises ValueError (one line, from txl.geometry.Geometry) for an impossible geometry."""
    return dataclasses.replace(
        model.default_geometry(), **{k: v for k, v in overrides.items() if v is not None}
    )


def max_rows(model: LossModel, geometry: Any, default: int = 64) -> int:
    """Rows per scoring call: the model's own `max_rows(geometry)` when it has one."""
    own = getattr(model, "max_rows", None)
    return int(own(geometry)) if own is not None else default


# The largest |difference| between two scores of the same tokens that counts as "equal" in a
# probe's own checks, by evaluation dtype (bit-exact zeros are reported beside it).
TOLERANCE = {"float64": 1e-9, "float32": 1e-4, "bfloat16": 5e-2}


def row_bytes(model: LossModel, geometry: Any) -> int | None:
    """The model's estimate of one forward row's memory at `geometry` (None: no estimate)."""
    fn = getattr(model, "row_bytes", None)
    return None if fn is None else int(fn(geometry))


def reset_moves_positions(model: LossModel) -> bool:
    """Whether `reset` gives a document other positions than `carry` does (learned absolute
    positions restart at each document; relative and rotary positions do not need to). Where it
    does, a token scored under carry and under reset is not the same computation even when it
    sees nothing of the document before: checks compare such tokens at equal positions only."""
    return (getattr(model.info, "extra", None) or {}).get("positions") == "absolute"


def tolerance(model: LossModel) -> float:
    return TOLERANCE.get(getattr(model.info, "dtype", "float32"), 1e-4)


def horizon(model: LossModel, geometry: Any) -> Horizon:
    own = getattr(model, "horizon", None)
    if own is not None:
        return own(geometry)
    return Horizon.of(geometry, model.info.n_layer)


def check_inputs(tokens: np.ndarray, doc_ids: np.ndarray, positions: np.ndarray) -> None:
    """Shapes and types the protocol promises; raises ValueError (a caller bug)."""
    if tokens.ndim != 2 or tokens.shape != doc_ids.shape or tokens.shape != positions.shape:
        raise ValueError(
            f"tokens {tokens.shape}, doc_ids {doc_ids.shape} and positions {positions.shape} "
            "must be the same (B, N) shape"
        )
    if positions.dtype != bool:
        raise ValueError(f"positions must be a bool mask, got {positions.dtype}")
    if positions.shape[1] and positions[:, 0].any():
        raise ValueError("position 0 cannot be scored (nothing predicts the first token)")


def score_rows(
    model: LossModel,
    tokens: np.ndarray,
    doc_ids: np.ndarray,
    positions: np.ndarray,
    geometry: Any,
    *,
    parent: np.ndarray | None = None,
    shared: np.ndarray | None = None,
) -> TokenScores:
    """Score rows, sharing prefixes when the model can (see module docstring)."""
    check_inputs(tokens, doc_ids, positions)
    fork = getattr(model, "score_shared", None)
    if fork is not None and parent is not None and shared is not None:
        return fork(tokens, doc_ids, positions, geometry, parent=parent, shared=shared)
    return model.score(tokens, doc_ids, positions, geometry)


def score_truncated(
    model: LossModel,
    tokens: np.ndarray,
    doc_ids: np.ndarray,
    positions: np.ndarray,
    window: int,
    geometry: Any,
) -> TokenScores:
    """Score with exactly `window` tokens of visible history (the `score_window` capability)."""
    check_inputs(tokens, doc_ids, positions)
    fn = getattr(model, "score_window", None)
    if fn is None:
        raise ValueError(
            f"model {model.info.id!r} cannot score a truncated context (no score_window); "
            "use a Transformer-XL checkpoint or an adapter that has it"
        )
    return fn(tokens, doc_ids, positions, int(window), geometry)


def window_limit(model: LossModel) -> int | None:
    """The longest truncated window the model scores (`max_window`), None for no limit."""
    fn = getattr(model, "max_window", None)
    return None if fn is None else fn()
