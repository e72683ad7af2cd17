"""Two training runs side by side: how far a retrain landed from a reference run.

Each run is read from its `metrics.jsonl` (a run directory, a model directory or the file itself).
Compared are the per-step training losses (how many are identical, the largest difference, the
first step that differs) and every numeric field of the held-out evaluations at the steps both
runs evaluated, timings left out. A recall list of buckets is read bucket by bucket
(`recall[5-16].acc`).

The verdict looks at the last common evaluation only. Along a long run a different summation
order (another thread count, CPU or torch build) moves individual losses chaotically, but the
trained model — held-out NLL, recall by distance — should land in the same place:

    identical         every common loss and evaluation field equal, bit for bit
    within tolerance  at the last common evaluation, every NLL-like field (nats) within `nll_tol`,
                      every accuracy within `acc_tol`, every other number (counts, bucket edges)
                      equal
    differs           otherwise, or the runs have no evaluation step in common

with "so far" added to the first two when one run trained fewer steps than the other (stopped
early, or still running).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txl.metrics_log import METRICS_FILE, MetricsLog

# Wall-clock fields: they say how fast a machine was, not what the run computed.
TIMING_KEYS = frozenset({"elapsed_s", "step_s", "eval_s", "tokens_per_s", "mfu"})
DEFAULT_NLL_TOL = 0.01  # nats
DEFAULT_ACC_TOL = 0.07  # absolute; two queries of a 32-query bucket


class RunMetricsError(ValueError):
    """A path that does not lead to a readable metrics.jsonl."""


def metrics_path(path: str | os.PathLike) -> Path:
    """The metrics.jsonl of a run directory, a model directory, or the file itself."""
    p = Path(path)
    if p.is_dir():
        p = p / METRICS_FILE
    if not p.is_file():
        raise RunMetricsError(
            f"no {METRICS_FILE} at {path}; expected a training run directory, a model directory "
            f"or a {METRICS_FILE} file"
        )
    return p


def read_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of a metrics.jsonl that carry a step (a line cut short by a kill is skipped)."""
    p = metrics_path(path)
    records = [r for r in MetricsLog(p).records() if isinstance(r, dict)]
    records = [r for r in records if isinstance(r.get("step"), int)]
    if not records:
        raise RunMetricsError(f"{p} holds no metrics records")
    return records


def field_kind(name: str) -> str:
    """How a flattened evaluation field is compared: 'nats', 'accuracy' or 'exact'."""
    leaf = name.rsplit(".", 1)[-1].split("[", 1)[0]
    if "nll" in leaf or leaf in ("filler_entropy", "filler_floor"):
        return "nats"
    if leaf == "acc" or leaf.startswith("acc_") or leaf.endswith("_acc") or "_acc_" in leaf:
        return "accuracy"
    return "exact"


def _bucket_label(item: Mapping[str, Any], index: int) -> str:
    if "lo" in item and "hi" in item:
        return f"{item['lo']}-{item['hi']}"
    return str(index)


def flatten(record: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, float | None]]:
    """(name, value) for every number of an evaluation record; None stands for a recorded
    non-finite or missing value (JSON null). Strings and timings are left out."""
    for key, value in record.items():
        if key in TIMING_KEYS or key in ("kind", "step"):
            continue
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from flatten(value, f"{name}.")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, Mapping):
                    yield from flatten(item, f"{name}[{_bucket_label(item, i)}].")
                elif isinstance(item, int | float) or item is None:
                    yield f"{name}[{i}]", None if item is None else float(item)
        elif isinstance(value, bool):
            yield name, float(value)
        elif isinstance(value, int | float) or value is None:
            yield name, None if value is None else float(value)


@dataclass(frozen=True)
class FieldDiff:
    name: str
    kind: str  # nats | accuracy | exact
    a: float | None
    b: float | None

    @property
    def delta(self) -> float | None:
        """b − a; None when either side is missing or null."""
        if self.a is None or self.b is None:
            return None
        return self.b - self.a

    def within(self, nll_tol: float, acc_tol: float) -> bool:
        if self.a is None or self.b is None:
            return self.a is None and self.b is None
        tol = {"nats": nll_tol, "accuracy": acc_tol}.get(self.kind, 0.0)
        return abs(self.b - self.a) <= tol


@dataclass
class RunComparison:
    a: str
    b: str
    n_train_a: int
    n_train_b: int
    n_train_common: int
    n_loss_identical: int
    max_loss_diff: float | None  # over common steps; None if there are none
    first_loss_diff_step: int | None
    eval_steps_common: list[int]
    max_eval_diff: dict[str, float]  # field -> largest |b − a| over the common evaluations
    final: list[FieldDiff] = field(default_factory=list)  # at the last common evaluation
    nll_tol: float = DEFAULT_NLL_TOL
    acc_tol: float = DEFAULT_ACC_TOL

    @property
    def final_step(self) -> int | None:
        return self.eval_steps_common[-1] if self.eval_steps_common else None

    @property
    def out_of_tolerance(self) -> list[FieldDiff]:
        return [d for d in self.final if not d.within(self.nll_tol, self.acc_tol)]

    @property
    def identical(self) -> bool:
        return (
            self.n_train_common > 0
            and self.n_loss_identical == self.n_train_common
            and bool(self.eval_steps_common)
            and all(v == 0.0 for v in self.max_eval_diff.values())
            and all(d.a == d.b for d in self.final)
        )

    @property
    def complete(self) -> bool:
        """Both runs trained the same steps (neither stopped early, nor is still running)."""
        return self.n_train_a == self.n_train_b == self.n_train_common

    @property
    def verdict(self) -> str:
        if self.identical:
            return "identical" if self.complete else "identical so far"
        if self.eval_steps_common and not self.out_of_tolerance:
            return "within tolerance" if self.complete else "within tolerance so far"
        return "differs"

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "verdict": self.verdict,
            "complete": self.complete,
            "nll_tol": self.nll_tol,
            "acc_tol": self.acc_tol,
            "train": {
                "steps_a": self.n_train_a,
                "steps_b": self.n_train_b,
                "common": self.n_train_common,
                "identical": self.n_loss_identical,
                "max_abs_diff": self.max_loss_diff,
                "first_diff_step": self.first_loss_diff_step,
            },
            "eval": {
                "common_steps": self.eval_steps_common,
                "max_abs_diff": self.max_eval_diff,
                "final_step": self.final_step,
                "final": [
                    {"field": d.name, "kind": d.kind, "a": d.a, "b": d.b, "delta": d.delta}
                    for d in self.final
                ],
                "out_of_tolerance": [d.name for d in self.out_of_tolerance],
            },
        }


def _by_step(records: list[dict[str, Any]], kind: str) -> dict[int, dict[str, Any]]:
    return {r["step"]: r for r in records if r.get("kind") == kind}  # a replayed step: last wins


def compare_runs(
    a: str | os.PathLike,
    b: str | os.PathLike,
    *,
    nll_tol: float = DEFAULT_NLL_TOL,
    acc_tol: float = DEFAULT_ACC_TOL,
) -> RunComparison:
    """Compare run `b` (say, a retrain) with run `a` (say, the shipped model)."""
    if not (nll_tol >= 0 and acc_tol >= 0):  # also refuses NaN
        raise ValueError(f"bad tolerance: nll_tol {nll_tol}, acc_tol {acc_tol}; expected >= 0")
    ra, rb = read_metrics(a), read_metrics(b)
    train_a, train_b = _by_step(ra, "train"), _by_step(rb, "train")
    common = sorted(set(train_a) & set(train_b))
    n_same, max_diff, first = 0, None, None
    for step in common:
        la, lb = train_a[step].get("loss"), train_b[step].get("loss")
        if la == lb:
            n_same += 1
            continue
        if first is None:
            first = step
        if la is None or lb is None:
            max_diff = math.inf
        else:
            max_diff = max(max_diff or 0.0, abs(lb - la))
    if common and max_diff is None:
        max_diff = 0.0

    eval_a, eval_b = _by_step(ra, "eval"), _by_step(rb, "eval")
    eval_common = sorted(set(eval_a) & set(eval_b))
    max_eval: dict[str, float] = {}
    final: list[FieldDiff] = []
    for step in eval_common:
        fa, fb = dict(flatten(eval_a[step])), dict(flatten(eval_b[step]))
        names = list(fa) + [n for n in fb if n not in fa]  # the records' own order
        diffs = [FieldDiff(n, field_kind(n), fa.get(n), fb.get(n)) for n in names]
        for d in diffs:
            delta = d.delta
            gap = abs(delta) if delta is not None else (0.0 if d.a == d.b else math.inf)
            max_eval[d.name] = max(max_eval.get(d.name, 0.0), gap)
        final = diffs
    return RunComparison(
        a=str(a),
        b=str(b),
        n_train_a=len(train_a),
        n_train_b=len(train_b),
        n_train_common=len(common),
        n_loss_identical=n_same,
        max_loss_diff=max_diff,
        first_loss_diff_step=first,
        eval_steps_common=eval_common,
        max_eval_diff=max_eval,
        final=final,
        nll_tol=nll_tol,
        acc_tol=acc_tol,
    )
