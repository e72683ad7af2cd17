"""probes.engine.bootstrap: resamples from version-stable draws, percentile intervals."""

import numpy as np

from probes.engine import bootstrap
from synth.rng import make_rng


def test_resamples_come_from_raw_uniforms():
    idx = bootstrap.resamples(5, make_rng(3, "probe"), reps=4)
    u = make_rng(3, "probe").random((4, 5))  # the only draws numpy keeps stable
    assert idx.shape == (4, 5) and idx.dtype == np.int64
    np.testing.assert_array_equal(idx, np.floor(u * 5).astype(np.int64))


def test_one_text_has_no_interval():
    assert bootstrap.resamples(1, make_rng(0, "probe")).shape == (0, 1)
    assert bootstrap.interval(lambda idx: 0, 1, make_rng(0, "probe")) is None
    assert bootstrap.percentile_interval([]) is None


def test_interval_of_a_first_crossing_statistic():
    # text k crosses at grid point values[k]; the statistic is the median crossing of a resample
    values = np.array([8, 16, 16, 16, 32, 64])
    ci = bootstrap.interval(
        lambda idx: int(np.median(values[idx])), len(values), make_rng(1, "probe")
    )
    assert ci is not None and ci[0] <= 16 <= ci[1] and 8 <= ci[0] and ci[1] <= 64
    again = bootstrap.interval(
        lambda idx: int(np.median(values[idx])), len(values), make_rng(1, "probe")
    )
    assert again == ci  # the same seed, the same interval


def test_percentile_interval_ends_are_values_of_the_statistic_never_between_two():
    from probes.engine.bootstrap import percentile_interval

    draws = [192] * 25 + [320] * 975  # linear interpolation would put the low end at 316
    lo, hi = percentile_interval(draws)
    assert lo in (192, 320) and hi == 320
    assert lo == 192  # the 25th smallest of 1,000 is the 2.5th percentile
