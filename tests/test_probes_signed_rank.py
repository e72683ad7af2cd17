"""The exact signed-rank test: against brute-force enumeration of every sign pattern (ties and
zeros included), against scipy where scipy is exact (no ties, no zeros), and the case scipy's
normal approximation gets wrong."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sst

from probes import stats
from probes.signed_rank import doubled_ranks, signed_rank_p


def enumerated_p(x: np.ndarray) -> float:
    nz = x[x != 0]
    if nz.size == 0:
        return 1.0
    r = doubled_ranks(nz)
    w = r[nz > 0].sum()
    sums = np.array(
        [
            sum(r[i] for i in range(nz.size) if s[i])
            for s in itertools.product([0, 1], repeat=nz.size)
        ]
    )
    return min(1.0, 2 * min((sums <= w).mean(), (sums >= w).mean()))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-3, 3), min_size=1, max_size=11))
def test_exact_p_equals_enumeration_with_ties_and_zeros(values):
    x = np.array(values, dtype=np.float64) * 0.25
    assert signed_rank_p(x) == pytest.approx(enumerated_p(x), rel=1e-12)


@pytest.mark.parametrize("m", [3, 8, 20, 50])
def test_exact_p_equals_scipys_exact_test_without_ties_or_zeros(m):
    rng = np.random.default_rng(m)
    x = rng.normal(size=m) + 0.4
    assert np.unique(np.abs(x)).size == m and np.all(x != 0)
    assert signed_rank_p(x) == pytest.approx(sst.wilcoxon(x, method="exact").pvalue, rel=1e-12)


def test_twenty_zeros_and_four_tiny_deltas_give_p_one_eighth_not_significant():
    x = np.r_[np.zeros(20), np.full(4, 1.2e-7)]
    assert signed_rank_p(x) == 0.125  # no two-sided test on 4 signs goes below 2/16
    assert sst.wilcoxon(x).pvalue < 0.05  # what the normal approximation said
    g = stats.grouped([x], margin=0.05)[0]
    assert g["p_raw"] == 0.125 and not g["significant"]
    assert g["verdict"] == "negligible"  # its interval lies inside ±0.05


def test_large_groups_use_exact_integers_beyond_int64():
    x = np.r_[np.arange(1, 81) + 0.5, -np.arange(1, 41)].astype(np.float64)  # 120, no ties
    p = signed_rank_p(x)
    assert 0 < p < 1 and p == pytest.approx(sst.wilcoxon(x, method="exact").pvalue, rel=1e-9)


def test_all_zero_or_empty_is_one():
    assert signed_rank_p(np.zeros(7)) == 1.0 and signed_rank_p(np.array([])) == 1.0


@pytest.mark.parametrize(
    ("values", "margin", "word"),
    [
        (np.full(30, 1.0) + np.linspace(-0.1, 0.1, 30), 0.05, "significant"),
        (np.full(30, 1e-4) + np.linspace(-1e-5, 1e-5, 30), 0.05, "negligible"),  # real, tiny
        (np.linspace(-1.0, 1.2, 12), 0.05, "inconclusive"),
        (np.full(30, 0.03) + np.linspace(-0.001, 0.001, 30), 0.05, "negligible"),
        (np.full(30, 0.03) + np.linspace(-0.001, 0.001, 30), 0.01, "significant"),
    ],
)
def test_verdict_words_follow_the_margin(values, margin, word):
    g = stats.grouped([values], margin=margin)[0]
    assert g["verdict"] == word
    assert g["significant"] == (word == "significant")
