"""The exact two-sided Wilcoxon signed-rank test, conditional on zeros and ties.

Why our own: scipy's `wilcoxon` is exact only without ties and zeros (and up to n = 50); with
any tie or zero beyond n = 13 it switches to an uncorrected normal approximation. Per-pair NLL
deltas are mostly exact zeros wherever a model cannot see an edit (that is what equal shapes buy),
and there the approximation is wrong by a lot: 20 zeros and 4 deltas of 1.2e-7 nats give scipy's
p = 0.046, while no two-sided test on four non-zero values can go below 2/2⁴ = 0.125.

The null the probes create is exchangeability of base and variant: each pair delta is as likely
to be +d as −d. So, conditional on the observed |Δ|:

1. drop the exact zeros (they carry no sign; "nothing visible" is an exact 0 by construction, and
   a negligible effect is the margin's business, not the test's);
2. rank the m remaining |Δ| with midranks for ties and double the ranks, so every rank is an
   integer a_i (a tie at ranks 3 and 4 gives 7 and 7);
3. under the null the doubled positive-rank sum W = Σ a_i·s_i, with independent fair signs s_i ∈
   {0, 1}, has the distribution built by convolving, one pair at a time, the counts c with c
   shifted by a_i — Σ a_i ≤ m(m + 1) entries, m steps: O(m³) integer additions, exact (Python
   integers beyond 62 pairs, where int64 could overflow), deterministic, no Monte Carlo;
4. p = min(1, 2 · min(P(W ≤ w), P(W ≥ w))) for the observed w (the distribution is symmetric).

Without ties and zeros this is the classic exact test (scipy's `method="exact"`); the tests
compare both, and compare with brute-force enumeration of every sign pattern for small m.
"""

from __future__ import annotations

import numpy as np

INT64_SAFE = 62  # 2^m sign patterns fit an int64 count up to this many pairs


def doubled_ranks(values: np.ndarray) -> np.ndarray:
    """2 × the midranks of |values| (1-based), as integers."""
    a = np.abs(np.asarray(values, dtype=np.float64))
    order = np.argsort(a, kind="stable")
    ranks2 = np.empty(a.size, dtype=np.int64)
    i = 0
    while i < a.size:
        j = i
        while j + 1 < a.size and a[order[j + 1]] == a[order[i]]:
            j += 1
        ranks2[order[i : j + 1]] = (i + 1) + (j + 1)  # 2 × the mean of ranks i+1 … j+1
        i = j + 1
    return ranks2


def null_counts(ranks2: np.ndarray) -> np.ndarray:
    """counts[w] = the number of sign patterns whose doubled positive-rank sum is w."""
    big = ranks2.size > INT64_SAFE
    counts = np.zeros(int(ranks2.sum()) + 1, dtype=object if big else np.int64)
    counts[0] = 1
    top = 0
    for a in (int(x) for x in ranks2):
        counts[a : top + a + 1] = counts[a : top + a + 1] + counts[: top + 1].copy()
        top += a
    return counts


def signed_rank_p(values: np.ndarray) -> float:
    """Two-sided exact p of the signed-rank test, conditional on zeros and ties (module
    docstring); 1.0 when every value is zero or there are none."""
    x = np.asarray(values, dtype=np.float64)
    x = x[x != 0.0]
    if x.size == 0:
        return 1.0
    ranks2 = doubled_ranks(x)
    w = int(ranks2[x > 0].sum())
    counts = null_counts(ranks2)
    total = 2**x.size
    low = sum(int(c) for c in counts[: w + 1])
    high = sum(int(c) for c in counts[w:])
    return min(1.0, 2 * min(low, high) / total)
