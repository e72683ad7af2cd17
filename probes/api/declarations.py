"""What a probe declares for the report layer, so that tables and the diagnose table render what
probes declare and know no probe by name.

- `Column`: one column of a probe's bin table — the header, the bin field it shows (a column
  appears when some bin has that field) and how the value is written (`format`, one of
  `probes.report.tables.FORMATS`); `identifies` marks the fields that name a bin, on which
  `probe report` matches the bins of several runs.
- `effect_row(...)`: one row of `probe diagnose`, built by a probe's `diagnose_rows(summary)` from
  its own summary — the effect, the metric it reads, its unit, value, interval and p, and a
  detail line. A probe takes part in `probe diagnose` when its `@probe(...)` decorator gives
  `diagnose=N` (the row order); `model_group` probes run on the model group.

No numpy, no torch: the report layer reads these to print `probe report` and `probe --help`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Column:
    header: str
    key: str  # the bin field shown; the column appears when some bin has it
    format: str = "text"  # probes.report.tables.FORMATS
    identifies: bool = False  # names the bin (distance, depth, kind, k, …)


# Columns many probes share, in the order tables show them.
DISTANCE = Column("distance", "distance_lo", "range", identifies=True)
STATS = (
    Column("n", "n"),
    Column("Δ mean", "delta_mean", "delta"),
    Column("95% CI", "ci95", "ci"),
    Column("p (Holm)", "p_value", "p"),
    Column("verdict", "verdict", "left"),
    Column("mdd80", "mdd80", "f3"),
)
ACCURACY = (
    Column("acc", "accuracy", "f2"),
    Column("acc var", "accuracy_variant", "f2"),
    Column("p(ans)", "answer_prob", "prob"),
)
CONTRAST = Column("contrast shift", "contrast_shift", "mean")
REACH = (Column("reach", "reach", "left"), Column("window / reach", "direct_window", "window"))
PAIRED = (DISTANCE, *STATS, *ACCURACY, CONTRAST, *REACH)


def effect_row(
    effect: str,
    probe: str,
    metric: str,
    unit: str,
    measure: str,
    stat: dict[str, Any] | None = None,
    *,
    value: Any = None,
    ci95: Sequence | None = None,
    p_value: float | None = None,
    n: int | None = None,
    detail: str = "",
    censored: bool = False,
    margin: float | None = None,
) -> dict[str, Any]:
    """One diagnose row. `stat`: a `probes.stats.describe()` dict (mean, ci95, p_value, n), or
    give the fields one by one (lengths such as RECL, which have no paired test). A row with a
    paired test and the probe's `margin` gets a verdict word (probes.stats.verdict); a row
    without one gets none."""
    from probes.stats import verdict  # lazy: numpy

    if stat is not None:
        value, ci95, p_value, n = stat["mean"], stat["ci95"], stat["p_value"], stat["n"]
    word = None if p_value is None or margin is None else verdict(p_value, ci95, value, margin)
    return {
        "effect": effect,
        "probe": probe,
        "metric": metric,
        "measure": measure,
        "censored": censored,
        "unit": unit,
        "value": value,
        "ci95": ci95,
        "p_value": p_value,
        "verdict": word,
        "significant": None if word is None else word == "significant",
        "margin": margin,
        "n": n,
        "detail": detail,
    }


def signed(x: float | None, fmt: str = "{:+.3f}") -> str:
    """A number for a detail line ("—" for none)."""
    return "—" if x is None else fmt.format(x)
