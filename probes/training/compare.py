"""Two training runs side by side: how far a retrain landed from a reference run.

Each run is read from its `metrics.jsonl` (a run directory, a model directory or the file itself).
Compared are the per-step training losses (how many are identical, the largest difference, the
first step that differs) and every numeric field of the held-out evaluations at the steps both
runs evaluated, timings left out. A recall list of buckets is read bucket by bucket
(`recall[5-16].acc`).

The verdict looks at the last common evaluation only. Along a long run a different summation
order (another thread count, CPU or torch build) moves individual losses chaotically, but the
trained model — held-out NLL, recall by distance — should land in the same place. Each field of
an evaluation has a kind (`field_kind`):

    nats       a held-out NLL over the whole evaluation stream (nll, filler_nll, the filler
               entropy and floor): judged within `nll_tol`
    accuracy   a recall accuracy, overall or of one bucket: judged within `acc_tol`
    reported   shown, not judged: what follows from an accuracy (its interval bounds) and
               per-bucket answer NLLs (a few dozen answers, at chance level in far buckets)
    exact      anything else (counts, bucket edges, a field not known here): must be equal

    identical             every common loss and evaluation field equal, bit for bit
    within tolerance      every judged field of the last common evaluation within its tolerance
    differs               otherwise
    no common evaluation  the runs never evaluated at the same step: nothing to judge

"so far" follows the first two when one run trained fewer steps than the other (stopped early,
or still running). A field that only one run records (the evaluation gained a field between
versions) is listed, not judged.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# No numpy here (txl.metrics_log pulls it in through txl.io): the `probe` CLI imports this
# module at start-up for its defaults, and `probe --help` stays instant.
METRICS_FILE = "metrics.jsonl"  # = txl.metrics_log.METRICS_FILE (a test pins them equal)

# Wall-clock fields: they say how fast a machine was, not what the run computed.
TIMING_KEYS = frozenset({"elapsed_s", "step_s", "eval_s", "tokens_per_s", "mfu"})
# The stated tolerance of a retrain with another summation order: the shipped default retrained
# on 2 threads instead of 1 landed 0.0095 nats off in held-out NLL, 0.0006 in filler NLL and one
# query off in some 32-query buckets (docs/results.md, "Retraining").
DEFAULT_NLL_TOL = 0.02  # nats
DEFAULT_ACC_TOL = 0.07  # absolute; two queries of a 32-query bucket


class RunMetricsError(ValueError):
    """A path that does not lead to a readable metrics.jsonl."""


def metrics_path(path: str | os.PathLike) -> Path:
    """The metrics.jsonl of a run directory, a model directory, or the file itself."""
    p = Path(path)
    if p.is_dir():
        p = p / METRICS_FILE
    if not (p.exists() or p.is_symlink()) or p.is_dir():  # a FIFO or device: the read says so
        raise RunMetricsError(
            f"no {METRICS_FILE} at {path}; expected a training run directory, a model directory "
            f"or a {METRICS_FILE} file"
        )
    return p


def read_metrics(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of a metrics.jsonl that carry a step (a line cut short by a kill is skipped)."""
    from txl.files import FileRefused  # lazy: `probe train-compare --help` stays numpy-free
    from txl.metrics_log import MetricsLog  # lazy: `probe train-compare --help` stays numpy-free

    p = metrics_path(path)
    try:
        records = [r for r in MetricsLog(p).records() if isinstance(r, dict)]
    except FileRefused as e:  # not a regular file, too large, not UTF-8
        raise RunMetricsError(str(e)) from None
    except (OSError, UnicodeDecodeError) as e:
        raise RunMetricsError(f"cannot read {p}: {e}; expected a UTF-8 {METRICS_FILE}") from None
    except ValueError as e:  # a compact log's packed columns do not decode
        raise RunMetricsError(f"cannot read {p}: {e}") from None
    records = [r for r in records if isinstance(r.get("step"), int)]
    if not records:
        raise RunMetricsError(f"{p} holds no metrics records")
    return records


def field_kind(name: str) -> str:
    """How a flattened evaluation field is compared: 'nats', 'accuracy', 'reported' or 'exact'
    (see the module docstring). Read from the name's last part; a top-level NLL is an aggregate
    over the evaluation stream, a nested one (`recall[5-16].answer_nll`) a per-bucket figure.
    A field this does not recognise is 'exact': it fails safe."""
    leaf = name.rsplit(".", 1)[-1].split("[", 1)[0]
    nested = "." in name
    if leaf.startswith("acc_ci"):
        return "reported"
    if leaf == "acc" or leaf.startswith("acc_") or leaf.endswith("_acc"):
        return "accuracy"
    if "nll" in leaf:
        return "reported" if nested else "nats"
    if leaf in ("filler_entropy", "filler_floor"):
        return "nats"
    return "exact"


def _number(value: Any) -> float | None:
    """A loss as a float; None for null, a non-finite number (the project's one NaN policy,
    txl.io.json_safe: a non-finite value is "no value", as a run writes it) or anything that is
    not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _bucket_label(item: Mapping[str, Any], index: int) -> str:
    if "lo" in item and "hi" in item:
        return f"{item['lo']}-{item['hi']}"
    return str(index)


def flatten(record: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, float | None]]:
    """(name, value) for every number of an evaluation record; None stands for a recorded
    non-finite or missing value (JSON null, or a NaN a hand-written log holds). Strings and
    timings are left out."""
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
                    yield f"{name}[{i}]", _number(item)
        elif isinstance(value, bool):
            yield name, float(value)
        elif isinstance(value, int | float) or value is None:
            yield name, _number(value)


@dataclass(frozen=True)
class FieldDiff:
    name: str
    kind: str  # nats | accuracy | reported | exact
    a: float | None
    b: float | None

    @property
    def delta(self) -> float | None:
        """b − a; None when either side is null (non-finite)."""
        if self.a is None or self.b is None:
            return None
        return self.b - self.a

    def within(self, nll_tol: float, acc_tol: float) -> bool:
        if self.kind == "reported":
            return True
        if self.a is None or self.b is None:  # a recorded null: non-finite
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
    max_eval_diff: dict[str, float]  # common field -> largest |b − a| over the common evaluations
    final: list[FieldDiff] = field(default_factory=list)  # at the last common evaluation
    only_a: list[str] = field(default_factory=list)  # fields one run records and the other not
    only_b: list[str] = field(default_factory=list)
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
            and not (self.only_a or self.only_b)
        )

    @property
    def complete(self) -> bool:
        """Both runs trained the same steps (neither stopped early, nor is still running)."""
        return self.n_train_a == self.n_train_b == self.n_train_common

    @property
    def verdict(self) -> str:
        if not self.eval_steps_common:
            return "no common evaluation"
        so_far = "" if self.complete else " so far"
        if self.identical:
            return "identical" + so_far
        if not self.out_of_tolerance:
            return "within tolerance" + so_far
        return "differs"

    @property
    def reproduced(self) -> bool:
        """Both runs complete and the verdict identical or within tolerance."""
        return self.complete and self.verdict in ("identical", "within tolerance")

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "verdict": self.verdict,
            "reproduced": self.reproduced,
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
                "only_a": self.only_a,
                "only_b": self.only_b,
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
        raise ValueError(f"bad tolerance: nll {nll_tol}, accuracy {acc_tol}; expected numbers >= 0")
    ra, rb = read_metrics(a), read_metrics(b)
    train_a, train_b = _by_step(ra, "train"), _by_step(rb, "train")
    common = sorted(set(train_a) & set(train_b))
    n_same, max_diff, first = 0, None, None
    for step in common:
        la, lb = _number(train_a[step].get("loss")), _number(train_b[step].get("loss"))
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
    only_a: dict[str, None] = {}  # ordered sets
    only_b: dict[str, None] = {}
    for step in eval_common:
        fa, fb = dict(flatten(eval_a[step])), dict(flatten(eval_b[step]))
        only_a.update(dict.fromkeys(n for n in fa if n not in fb))
        only_b.update(dict.fromkeys(n for n in fb if n not in fa))
        names = [n for n in fa if n in fb]  # the record's own order
        diffs = [FieldDiff(n, field_kind(n), fa[n], fb[n]) for n in names]
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
        only_a=list(only_a),
        only_b=list(only_b),
        nll_tol=nll_tol,
        acc_tol=acc_tol,
    )
