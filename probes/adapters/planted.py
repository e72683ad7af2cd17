"""A planted LossModel: losses that are a known function of the text and the geometry.

For tests and demos of the probes: no torch, no training, and every effect a probe should find
is put there on purpose (or left out, for a null). For a scored token t:

    NLL(t) = base + noise(t) + boundary(h) − copy · [tokens[t] is among the visible tokens]
    boundary(h) = boundary_nats · max(0, 1 − (h − 1) / boundary_len)

- h = how many tokens the prediction of t can see, and the visible tokens are tokens[t − h : t]:
  with `score` (streaming) h is t's layered reach (probes.api.horizon, for the geometry and `n_layer`;
  clipped at the row start, and under `reset` at the query's document start); with
  `score_window` it is the window (clipped the same way).
- boundary: extra loss when little is visible (h ≤ boundary_len): a planted "context
  fragmentation" that a memory repairs; exactly 0 once h > boundary_len.
- copy: a planted "retrieval": the target is cheaper when it was seen in the visible context.
- noise: N(0, sigma²), drawn from a hash of `seed` and of
    "context"  (t, tokens[t], its doc id, the visible tokens): an unchanged view gives exactly
               the same loss, any change of what the token sees a fresh, identically distributed
               draw — so a base and a variant that differ only where a token cannot see are
               exactly equal, and otherwise exchangeable (the null of every paired probe);
    "token"    (t, tokens[t]) only: identical targets get identical noise under any condition,
               so differences between conditions are exactly the planted terms.
`correct` = the copy condition holds (the model "retrieves" the token).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from probes.api.horizon import Horizon, doc_starts
from probes.api.model import ModelInfo, TokenScores, check_inputs
from probes.limits import MAX_LAYERS, MAX_MEM, MAX_TGT_LEN, check_number
from txl.geometry import Geometry


@dataclass
class PlantedModel:
    tgt_len: int = 16
    mem_len: int = 16
    n_layer: int = 2
    base: float = 3.0
    sigma: float = 0.5
    noise: Literal["context", "token"] = "context"
    boundary_nats: float = 0.0
    boundary_len: int = 4
    copy: float = 0.0
    seed: int = 0
    # the noise's law: normal, or Cauchy (heavy tails: the per-pair deltas of a real model have
    # them); quantum > 0 rounds every loss to a multiple of it, so deltas tie
    tails: Literal["normal", "cauchy"] = "normal"
    quantum: float = 0.0
    tokenizer: dict | None = None  # no tokenizer claim: it scores any token ids
    info: ModelInfo = field(init=False)

    def __post_init__(self) -> None:
        self.info = ModelInfo(
            id=f"planted-{self.seed}",
            path="<planted>",
            sha256=hashlib.sha256(repr(self._spec()).encode()).hexdigest(),
            config=self._spec(),
            n_layer=self.n_layer,
            train_tgt_len=self.tgt_len,
            train_mem_len=self.mem_len,
            evaluator="planted",
            dtype="float64",
        )

    def _spec(self) -> dict[str, Any]:
        keys = ("tgt_len", "mem_len", "n_layer", "base", "sigma", "noise")
        keys += ("boundary_nats", "boundary_len", "copy", "seed", "tails", "quantum")
        return {k: getattr(self, k) for k in keys}

    @classmethod
    def from_spec(cls, spec: str) -> PlantedModel:
        """`planted:copy=2,sigma=1,tails=cauchy` (what `--model` accepts): fields by name, the
        rest at their defaults. ValueError (one line) for an unknown field or a bad value."""
        import dataclasses
        import typing

        kinds = typing.get_type_hints(cls)
        known = [f.name for f in dataclasses.fields(cls) if f.init and f.name != "tokenizer"]
        values: dict[str, Any] = {}
        body = spec.split(":", 1)[1] if ":" in spec else ""
        for item in filter(None, body.split(",")):
            key, _, text = item.partition("=")
            if key not in known:
                raise ValueError(
                    f"planted model: unknown field {key!r}; fields: {', '.join(known)}"
                )
            kind = kinds[key]
            try:
                values[key] = int(text) if kind is int else float(text) if kind is float else text
            except ValueError:
                raise ValueError(
                    f"planted model: {key}={text!r} is not a {kind.__name__}"
                ) from None
        model = cls(**values)
        if model.noise not in ("context", "token") or model.tails not in ("normal", "cauchy"):
            raise ValueError("planted model: noise is context|token and tails normal|cauchy")
        model.info = dataclasses.replace(model.info, path=spec)  # what repeats it
        return model

    # ------------------------------------------------------------------ LossModel

    def default_geometry(self):

        return Geometry(self.tgt_len, self.mem_len, clamp_len=self.tgt_len + self.mem_len)

    def horizon(self, geometry) -> Horizon:
        return Horizon.of(geometry, self.n_layer)

    def score(self, tokens, doc_ids, positions, geometry) -> TokenScores:
        check_inputs(tokens, doc_ids, positions)
        hz = self.horizon(geometry)

        def visible(t: int, start: int) -> int:
            return hz.token(t, start)[1]

        return self._scores(tokens, doc_ids, positions, visible)

    def score_window(self, tokens, doc_ids, positions, window: int, geometry) -> TokenScores:
        check_inputs(tokens, doc_ids, positions)

        def visible(t: int, start: int) -> int:
            return min(int(window), t - (start if geometry.reset else 0))

        return self._scores(tokens, doc_ids, positions, visible)

    # ------------------------------------------------------------------ the planted losses

    def _scores(self, tokens, doc_ids, positions, visible) -> TokenScores:
        tokens = np.asarray(tokens, dtype=np.int64)
        R, N = tokens.shape
        nll = np.full((R, N), np.nan)
        correct = np.zeros((R, N), dtype=bool)
        for r in range(R):
            starts = doc_starts(doc_ids[r])
            for t in np.flatnonzero(positions[r] & (np.asarray(doc_ids[r]) >= 0)):
                t = int(t)
                h = visible(t, int(starts[t - 1]))
                seen = tokens[r, t - h : t]
                hit = bool(np.any(seen == tokens[r, t]))
                loss = self.base + self.sigma * self._normal(t, tokens[r, t], doc_ids[r, t], seen)
                loss += self.boundary_nats * max(0.0, 1.0 - (h - 1) / self.boundary_len)
                loss -= self.copy * hit
                if self.quantum > 0:
                    loss = self.quantum * round(loss / self.quantum)
                nll[r, t] = loss
                correct[r, t] = hit
        return TokenScores(nll, correct)

    def _normal(self, t: int, target: int, doc: int, seen: np.ndarray) -> float:
        h = hashlib.blake2b(digest_size=16)
        h.update(np.array([self.seed, t, target], dtype=np.int64).tobytes())
        if self.noise == "context":
            h.update(np.array([doc], dtype=np.int64).tobytes())
            h.update(np.ascontiguousarray(seen, dtype=np.int64).tobytes())
        d = h.digest()
        u1 = (int.from_bytes(d[:8], "little") + 1) / 2.0**64  # (0, 1]
        u2 = int.from_bytes(d[8:], "little") / 2.0**64
        if self.tails == "cauchy":
            return math.tan(math.pi * (u1 - 0.5))
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)  # Box–Muller


# The numeric fields of `--model planted:…` and their bounds (probes.limits.check_number, the
# check of every numeric option): lengths as --tgt-len and --mem allow, a seed as --seed, losses
# and effects finite and at most MAX_NATS, so that no sum of them overflows.
MAX_NATS = 1e4
PLANTED_BOUNDS: dict[str, tuple[bool, float | None, float | None]] = {
    "tgt_len": (True, 1, MAX_TGT_LEN),
    "mem_len": (True, 0, MAX_MEM),
    "n_layer": (True, 1, MAX_LAYERS),
    "boundary_len": (True, 1, MAX_TGT_LEN + MAX_MEM),
    "seed": (True, 0, 2**63 - 1),
    "base": (False, 0.0, MAX_NATS),
    "sigma": (False, 0.0, MAX_NATS),
    "boundary_nats": (False, -MAX_NATS, MAX_NATS),  # < 0: segment starts made easier
    "copy": (False, -MAX_NATS, MAX_NATS),
    "quantum": (False, 0.0, MAX_NATS),
}


def check_planted_spec(spec: str) -> None:
    """Refuse (ValueError, one line) a planted spec with a field given twice or a numeric field
    that is not finite or out of its bounds (`PLANTED_BOUNDS`); unknown fields and the choices
    are the planted model's own to check."""
    seen: set[str] = set()
    for item in filter(None, spec.split(":", 1)[1].split(",")):
        key, _, text = item.partition("=")
        if key in seen:
            raise ValueError(f"planted model: {key} is given twice; give each field once")
        seen.add(key)
        if key in PLANTED_BOUNDS:
            integer, lo, hi = PLANTED_BOUNDS[key]
            try:
                check_number(text, integer=integer, lo=lo, hi=hi)
            except ValueError as e:
                raise ValueError(f"planted model: {key}={e}") from None


def from_spec(spec: str) -> PlantedModel:
    """The planted model of a `planted:…` spec, its fields checked first (`check_planted_spec`);
    the `planted` kind's builder. ValueError (one line) for a bad spec."""
    check_planted_spec(spec)
    return PlantedModel.from_spec(spec)
