"""Percentile bootstrap over texts, for first-crossing statistics (context-sweep's effective
context, RECL).

Such a statistic is the first point of a context grid where a curve crosses a threshold: a step
function of the texts that takes only the grid's few values. There is no mean and standard error
to build a t interval from, and BCa's bias correction (the share of resamples below the estimate)
and jackknife acceleration are ill-defined when most resamples tie at the estimate. The
percentile interval — the 2.5th and 97.5th percentiles of the statistic over resamples of the
texts — needs neither. It is descriptive, at the grid's resolution, and no verdict is drawn from
it; with few texts it can under-cover, so read its width as a lower bound on the uncertainty.

The resampled indices are built from raw PCG64 uniforms (`synth.rng.randint`), the only draws
numpy keeps stable across releases, so a seed gives the same interval under any numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from synth import rng as rnd

REPS = 1000  # resamples per interval


def resamples(n: int, rng: np.random.Generator, reps: int = REPS) -> np.ndarray:
    """(reps, n) text indices, each row n draws with replacement; no rows when n < 2 (a single
    text has no spread to resample)."""

    if n < 2:
        return np.zeros((0, n), dtype=np.int64)
    return rnd.randint(rng, n, (reps, n))


def percentile_interval(draws: Sequence[int] | np.ndarray) -> list[int] | None:
    """The 95 % percentile interval of one statistic's resampled values (None without any).
    Its ends are resampled values themselves (the inverted empirical CDF, no interpolation):
    a point of the grid, never one between two."""
    if len(draws) == 0:
        return None
    ends = np.percentile(np.asarray(draws), [2.5, 97.5], method="inverted_cdf")
    return [int(ends[0]), int(ends[1])]


def interval(
    statistic: Callable[[np.ndarray], int], n: int, rng: np.random.Generator, reps: int = REPS
) -> list[int] | None:
    """The percentile interval of `statistic(text indices)` over `reps` resamples of n texts."""
    return percentile_interval([statistic(idx) for idx in resamples(n, rng, reps)])
