"""Paired statistics over pairs (never over tokens), with one verdict rule.

The unit of analysis is the pair: a pair's delta is the mean of its scored tokens' deltas
(each probe says which tokens and which sign). For a group of pairs (a distance bin, a grid cell)
we report:

- `delta_mean` and `ci95`: the mean delta and its 95 % **Student-t interval**,
  mean ± t(0.975, n−1) · sd / √n.
- `p_raw`: the two-sided **Wilcoxon signed-rank** p of "deltas symmetric about 0", exact
  conditional on the exact zeros (dropped) and on ties, for every n (`probes.signed_rank`: why not
  scipy's, and how). Every delta exactly 0 → p = 1 (and delta_mean = 0, ci95 = [0, 0]).
- `p_value`: `p_raw` Holm-adjusted across the groups of one probe run (step-down, monotone).

**Verdict words.** Every probe declares a margin — the minimum effect of interest, in the unit of
its delta (`--min-effect` overrides it) — and a group's verdict is one of three words:
- `significant`: the statistical rule below holds **and** |Δ mean| > margin;
- `negligible`: its whole (unadjusted) 95 % interval lies strictly inside ±margin, whether or not
  it excludes 0 — a real but tiny effect is reported as tiny, not as a finding;
- `inconclusive`: neither.
The statistical rule: the Holm-adjusted signed-rank p < α = 0.05 **and** the 95 % t interval
excludes 0 (same side as the mean). Why these two:
- The signed-rank test is exactly calibrated at any n under the null the probes create (base and
  variant exchangeable ⇒ deltas symmetric about 0), needs no normality and is robust to the heavy
  tails per-pair NLL deltas have; Holm keeps the family-wise error ≤ α across bins.
- The interval is the t interval, not a bootstrap: the percentile bootstrap under-covers at small n
  (its interval is too narrow by about √((n−1)/n) and ignores skew); BCa corrects skew but estimates
  its bias and acceleration from the same few pairs and still under-covers below n ≈ 20, and both
  collapse when most deltas are exact zeros (the common case beyond the horizon). The t interval is
  exact under normality at any n, deterministic, and conservative-to-nominal for the mildly skewed
  deltas seen here. Requiring it to exclude 0 keeps the table self-consistent: no bin is called
  significant while its printed interval crosses 0. The conjunction can only lower the false
  positive rate below the Holm–Wilcoxon level, so the rule stays calibrated.

`mdd80`: the minimum detectable delta of a group: the smallest true mean delta that the rule
would call significant with 80 % power given the observed sd, n and the Holm worst case α/k,
(t(1 − α/2k, n−1) + t(0.8, n−1)) · sd / √n.

Accuracy is a proportion with a Wilson 95 % interval.

The quantiles come from `scipy.special` (`stdtrit`, `ndtri`): the very functions `scipy.stats`'
t and normal distributions call, without importing `scipy.stats` (its import is about a second,
a large share of a probe run's start-up).

Nothing here is random: the same deltas give the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from probes.signed_rank import signed_rank_p

ALPHA = 0.05
POWER = 0.8

VERDICT_RULE = (
    "significant = Holm-adjusted (across bins) exact two-sided Wilcoxon signed-rank p < 0.05, "
    "the 95% Student-t CI of the mean pair delta excludes 0, and |mean| > the probe's margin; "
    "negligible = the 95% CI lies inside ±margin; inconclusive = neither"
)
VERDICTS = ("significant", "negligible", "inconclusive")


def t_quantile(q: float, df: int) -> float:
    """The q-quantile of Student's t with df degrees of freedom (scipy.stats.t.ppf's own
    function)."""
    from scipy import special

    return float(special.stdtrit(df, q))


def t_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float] | None:
    """Student-t interval of the mean; None for fewer than 2 values."""

    x = np.asarray(values, dtype=np.float64)
    n = x.size
    if n < 2:
        return None
    mean = float(x.mean())
    sd = float(x.std(ddof=1))
    if sd == 0.0:
        return (mean, mean)
    half = t_quantile(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    return (mean - half, mean + half)


def wilcoxon_p(values: np.ndarray) -> float:
    """Two-sided exact signed-rank p, zeros dropped and ties handled (probes.signed_rank); all
    zero (or none) → 1.0."""

    return signed_rank_p(values)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm step-down adjustment; None entries (no test) are passed through and not counted."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    m = len(idx)
    order = sorted(idx, key=lambda i: pvalues[i])
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        adj = min(1.0, (m - rank) * float(pvalues[i]))
        running = max(running, adj)
        out[i] = running
    return out


def wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float] | None:
    """Wilson score interval of a proportion k/n; None when n = 0."""
    from scipy import special

    if n == 0:
        return None
    z = float(special.ndtri(0.5 + level / 2))  # the standard normal's quantile
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # the ends are exact at k = 0 and k = n (rounding would put them a hair inside)
    return (0.0 if k == 0 else max(0.0, centre - half), 1.0 if k == n else min(1.0, centre + half))


def mdd(n: int, sd: float, k: int = 1, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """Minimum detectable mean delta (two-sided, Holm worst case α/k, given power)."""
    if n < 2 or not math.isfinite(sd):
        return None
    crit = t_quantile(1 - alpha / (2 * k), n - 1) + t_quantile(power, n - 1)
    return crit * sd / math.sqrt(n)


@dataclass(frozen=True)
class Group:
    """Statistics of one group of pair deltas (before Holm)."""

    n: int
    delta_mean: float | None
    delta_sd: float | None
    ci95: tuple[float, float] | None
    p_raw: float | None

    @classmethod
    def of(cls, values: np.ndarray) -> Group:
        x = np.asarray(values, dtype=np.float64)
        if x.size == 0:
            return cls(0, None, None, None, None)
        if not np.all(np.isfinite(x)):
            raise ValueError("pair deltas must be finite")
        sd = float(x.std(ddof=1)) if x.size > 1 else None
        return cls(x.size, float(x.mean()), sd, t_interval(x), wilcoxon_p(x))


def significant(
    p_value: float | None, ci95: Sequence[float] | None, mean: float | None = None, margin=0.0
) -> bool:
    """The statistical rule, and |mean| > margin (see module docstring)."""
    if p_value is None or ci95 is None:
        return False
    clears = mean is None or abs(mean) > margin
    return p_value < ALPHA and (ci95[0] > 0 or ci95[1] < 0) and clears


def verdict(
    p_value: float | None, ci95: Sequence[float] | None, mean: float | None, margin: float
) -> str | None:
    """significant | negligible | inconclusive (module docstring); None without a test."""
    if p_value is None:
        return None
    if significant(p_value, ci95, mean, margin):
        return "significant"
    if ci95 is not None and -margin < ci95[0] and ci95[1] < margin:
        return "negligible"
    return "inconclusive"


def effect_word(bins: Sequence[dict]) -> str:
    """A run's effect over its bins: significant when any bin is, negligible when every tested
    bin is, else inconclusive."""
    words = [b.get("verdict") for b in bins if b.get("verdict")]
    if "significant" in words:
        return "significant"
    if words and all(w == "negligible" for w in words):
        return "negligible"
    return "inconclusive"


def signed_effect(bins: Sequence[dict], sign: int) -> str:
    """A run's effect over its bins, with the sign its finding claims (`sign`: +1 when Δ > 0
    supports it, −1 when Δ < 0 does): `significant` when some bins are significant and all of
    them have that sign, `opposite` when all have the other sign, `mixed` when both occur; else
    `negligible` or `inconclusive` as `effect_word` says."""
    word = effect_word(bins)
    if word != "significant":
        return word
    signs = {1 if b["delta_mean"] > 0 else -1 for b in bins if b.get("verdict") == "significant"}
    if signs == {sign}:
        return "significant"
    return "opposite" if signs == {-sign} else "mixed"


def verdict_counts(bins: Sequence[dict]) -> str:
    """ "2 significant, 1 negligible" — how many bins got each verdict word."""
    words = [b.get("verdict") or "untested" for b in bins]
    return ", ".join(f"{words.count(w)} {w}" for w in (*VERDICTS, "untested") if w in words)


def describe(values: np.ndarray) -> dict:
    """Mean, t interval and Wilcoxon p of one set of pair values (no multiplicity)."""
    g = Group.of(values)
    return {
        "n": g.n,
        "mean": g.delta_mean,
        "sd": g.delta_sd,
        "ci95": list(g.ci95) if g.ci95 is not None else None,
        "p_value": g.p_raw,
    }


def smallest_p(n_nonzero: int) -> float:
    """The smallest two-sided exact signed-rank p that `n_nonzero` nonzero pair deltas can give
    (all of one sign, no ties): 2 / 2^n."""
    return min(1.0, 2.0 ** (1 - n_nonzero)) if n_nonzero > 0 else 1.0


def can_be_significant(nonzero: Sequence[int]) -> list[bool]:
    """Per group (its count of nonzero pair deltas), whether any data could make it significant
    under Holm across the groups — False means too few pairs to decide, and a verdict of
    `inconclusive` there says nothing about the effect (`--quick`: 6 pairs in each of 4 bins
    reach 4 · 2/64 = 0.125 at best). The best case for group i: the m groups of smallest floors
    (`smallest_p`) rank before it at their floors and it sits at max(its floor, theirs); Holm's
    adjusted p is then max over the steps, (k − j)·p_(j), the least over m."""
    floors = [smallest_p(n) for n in nonzero]
    k = len(floors)
    out = []
    for i, f in enumerate(floors):
        others = sorted(floors[:i] + floors[i + 1 :])
        best = math.inf
        for m in range(k):
            before = others[:m]
            steps = [(k - j) * p for j, p in enumerate(before)]
            steps.append((k - m) * max([f, *before]))
            best = min(best, max(steps))
        out.append(best < ALPHA)
    return out


def grouped(groups: Sequence[np.ndarray], margin: float = 0.0) -> list[dict]:
    """Per-group statistics with Holm across the groups, the verdict (with the probe's `margin`),
    the minimum detectable delta and whether the group could be significant at all with its pairs
    (`can_be_significant`). Empty groups get n = 0 and None everywhere."""
    stats_ = [Group.of(g) for g in groups]
    adjusted = holm([s.p_raw for s in stats_])
    k = sum(1 for s in stats_ if s.p_raw is not None)
    tested = [i for i, s in enumerate(stats_) if s.p_raw is not None]
    reachable = dict(
        zip(
            tested,
            can_be_significant([int(np.count_nonzero(groups[i])) for i in tested]),
            strict=True,
        )
    )
    out = []
    for i, (s, p_adj) in enumerate(zip(stats_, adjusted, strict=True)):
        out.append(
            {
                "n": s.n,
                "delta_mean": s.delta_mean,
                "delta_sd": s.delta_sd,
                "ci95": list(s.ci95) if s.ci95 is not None else None,
                "p_raw": s.p_raw,
                "p_value": p_adj,
                "significant": significant(p_adj, s.ci95, s.delta_mean, margin),
                "verdict": verdict(p_adj, s.ci95, s.delta_mean, margin),
                "margin": margin,
                "mdd80": mdd(s.n, s.delta_sd, max(k, 1)) if s.delta_sd is not None else None,
                "can_be_significant": reachable.get(i),
            }
        )
    return out


def accuracy(flags: np.ndarray) -> dict:
    """Proportion correct with its Wilson 95 % interval."""
    x = np.asarray(flags, dtype=bool)
    n = int(x.size)
    k = int(x.sum())
    ci = wilson(k, n)
    return {
        "accuracy": k / n if n else None,
        "accuracy_ci95": list(ci) if ci is not None else None,
    }
