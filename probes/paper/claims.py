"""A qualitative claim of the paper, judged on the synthetic figures by its bootstrap support.

Each claim is a statement about the measured figures ("rel + recurrence has the lowest PPL
best"). It is evaluated on the point estimate and on every bootstrap resample of the texts (the
same resamples for every model, so comparisons are paired); its support is the share of
resamples in which it holds:

    holds          support ≥ 0.95
    does not hold  support ≤ 0.05
    inconclusive   otherwise

The figures it rests on are printed beside it with their 95 % percentile intervals. The rule is
descriptive (a percentile bootstrap with a few dozen texts can under-cover); a reader who wants
another threshold has the support itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

HOLDS, FAILS = 0.95, 0.05


def word(support: float) -> str:
    if support >= HOLDS:
        return "holds"
    if support <= FAILS:
        return "does not hold"
    return "inconclusive"


def judge(
    claim: str,
    test: Callable[[Any], bool],
    point: Any,
    draws: list[Any],
    evidence: str,
) -> dict[str, Any]:
    """`test(figures) -> bool` on the point figures and on each resample's figures."""
    support = float(np.mean([bool(test(d)) for d in draws])) if draws else float(test(point))
    return {
        "claim": claim,
        "point": bool(test(point)),
        "support": round(support, 3),
        "result": word(support),
        "evidence": evidence,
        "resamples": len(draws),
    }


def interval(values) -> list[float] | None:
    """The 95 % percentile interval of resampled values (floats); None without any."""
    if len(values) == 0:
        return None
    lo, hi = np.percentile(np.asarray(values, dtype=float), [2.5, 97.5])
    return [float(lo), float(hi)]
