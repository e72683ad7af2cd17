"""probes.api.horizon: direct window and layered reach against hand-computed cases."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from probes.api.distance_bins import auto_bins, label_bin, parse_ranges
from probes.api.horizon import Horizon, classify, doc_starts


def hz(**kw):
    base = dict(tgt_len=4, mem_len=4, n_layer=2)
    base.update(kw)
    return Horizon(**base)


def test_direct_window_is_mem_plus_offset_plus_one_from_the_scored_token():
    h = hz()
    # t = 10: query q = 9 in segment [8, 12) at offset 1; keys from 8 − 4 = 4 → token 10 − 4 = 6 back
    assert h.token(10) == (
        6,
        10,
    )  # layered: r1 = 8 − 4 = 4, r2 = 4 − 4 = 0 → reach 10 (stream start)
    # t = 21: q = 20, segment [20, 24), offset 0: keys from 16 → direct 5; r1 = 16, r2 = 12 → 9
    assert h.token(21) == (5, 9)
    # t = 24: q = 23, offset 3: keys from 16 → direct 8; r1 = 16, r2 = 12 → reach 12
    assert h.token(24) == (8, 12)


def test_layered_reach_when_mem_is_not_a_multiple_of_tgt():
    h = Horizon(tgt_len=4, mem_len=6, n_layer=3)
    # t = 41: q = 40 (seg 40): r1 = 40 − 6 = 34; seg(34) = 32 → r2 = 26; seg(26) = 24 → r3 = 18
    assert h.token(41) == (41 - 34, 41 - 18)
    # the shortcut n_layer × mem + offset would say 18 + 1: wrong here
    assert h.token(41)[1] != 3 * 6 + 1


def test_same_length_window_is_exactly_mem():
    h = hz(same_length=True, mem_len=5)
    # q = 30: keys 26..30 → direct 5; layered r_k = q − k·(5 − 1): r2 = 22 → reach 31 − 22 = 9
    assert h.token(31) == (5, 9)


def test_no_memory_sees_only_its_segment():
    h = hz(mem_len=0, n_layer=3)
    assert h.token(10) == (2, 2)  # q = 9, segment [8, 12): sees tokens 8, 9 → 2 back
    assert h.token(9) == (1, 1)


def test_reset_clips_at_the_queries_document_start():
    h = hz()
    assert h.token(24, doc_start=20) == (4, 4)
    assert hz(reset=False).token(24, doc_start=20) == (8, 12)  # carry: no clipping


def test_recompute_window_is_both_lengths():
    h = hz(window=7)
    assert h.token(30) == (7, 7)
    assert h.token(5) == (5, 5)  # clipped at the stream start


def test_classify_and_bin_label():
    assert classify(3, 5, 9) == "direct"
    assert classify(6, 5, 9) == "layered"
    assert classify(10, 5, 9) == "beyond"
    lab = label_bin([6, 6, 10, 10], [5, 5, 5, 5], [9, 9, 9, 9])
    assert lab["reach"] == "beyond"  # a tie goes to the farther label
    assert lab["reach_fraction"] == {"direct": 0.0, "layered": 0.5, "beyond": 0.5}
    assert lab["within_horizon"] is False
    assert label_bin([2], [5], [9])["within_horizon"] is True


def test_a_recurrent_state_sees_nothing_directly_and_everything_through_the_state():
    h = hz(state=True)
    assert h.unbounded and h.token(500) == (0, 500)
    assert h.token(500, doc_start=480) == (0, 20)  # reset: the state starts at the document
    assert classify(7, 0, 20) == "state" and classify(21, 0, 20) == "beyond"
    lab = label_bin([7, 7, 30, 30], [0] * 4, [20] * 4)
    assert lab["reach"] == "beyond"  # a tie still goes to the farther label
    assert lab["reach_fraction"] == {"direct": 0.0, "layered": 0.0, "beyond": 0.5, "state": 0.5}
    assert auto_bins(h) == [(8, 32), (33, 128)]
    assert h.to_dict()["state"] is True and h.to_dict()["direct_window"]["max"] is None


def test_doc_starts():
    assert doc_starts(np.array([0, 0, 1, 1, 1, 2])).tolist() == [0, 0, 2, 2, 2, 5]


@given(
    tgt=st.integers(1, 16),
    mem=st.integers(0, 40),
    layers=st.integers(1, 4),
    t=st.integers(1, 400),
)
def test_reach_never_shorter_than_direct_window_and_grows_with_layers(tgt, mem, layers, t):
    h = Horizon(tgt_len=tgt, mem_len=mem, n_layer=layers)
    d, r = h.token(t)
    assert 1 <= d <= r <= t
    assert Horizon(tgt_len=tgt, mem_len=mem, n_layer=layers + 1).token(t)[1] >= r


@pytest.mark.parametrize("same_length", [False, True])
@pytest.mark.parametrize(("T", "M", "L"), [(3, 5, 3), (4, 8, 2), (5, 0, 2), (2, 7, 4)])
def test_reach_matches_brute_force_receptive_field(T, M, L, same_length):
    """Propagate "earliest token this state depends on" through the layers exactly as the cached
    evaluator attends (keys from the segment start − mem_len, or q − mem_len + 1 with same_length)."""
    if same_length and M == 0:
        return
    N = 60
    h = Horizon(tgt_len=T, mem_len=M, n_layer=L, same_length=same_length)

    def earliest_key(p):
        return max(0, p - M + 1) if same_length else max(0, (p // T) * T - M)

    dep = np.arange(N)  # the input of layer 0 at p is token p
    for _ in range(L):
        dep = np.array([dep[earliest_key(p) : p + 1].min() for p in range(N)])
    for t in range(1, N):
        direct, reach = h.token(t)
        assert reach == t - dep[t - 1]
        assert direct == t - earliest_key(t - 1)


def test_auto_bins_fall_in_one_region_each():
    h = Horizon(tgt_len=64, mem_len=640, n_layer=2)
    bins = auto_bins(h)
    (dmin, dmax), (rmin, rmax) = h.ranges()
    assert bins[0][0] == 8 and bins[1][1] == dmin
    assert bins[2] == (dmax + 1, rmin)
    assert bins[3][0] == rmax + 1


def test_a_deep_models_layered_bin_stays_just_past_the_direct_window():
    h = Horizon(tgt_len=64, mem_len=1984, n_layer=30)
    (_, dmax), (rmin, _) = h.ranges()
    bins = auto_bins(h)
    lo, hi = bins[2]
    assert (lo, hi) == (dmax + 1, 2 * dmax) and hi < rmin
    deep = [h.unclipped(100_000 + o) for o in range(64)]  # every offset in a segment
    assert all(direct < lo and hi <= reach for direct, reach in deep)
    assert len(bins) == 3  # no beyond bin: its texts would be 30 direct windows long


def test_a_hybrid_models_auto_bins_ask_for_no_text_past_twice_its_direct_window():
    """Gemma 3 270M at its default geometry: five 512-token sliding layers to one global; its
    layered reach ends near 13.7 K tokens, the bins stay within 2 × 2,048."""
    windows = tuple([512] * 5 + [None]) * 3
    h = Horizon(tgt_len=64, mem_len=1984, n_layer=18, layer_windows=windows)
    (_, dmax), (rmin, _) = h.ranges()
    bins = auto_bins(h)
    assert rmin > 2 * dmax and bins[-1] == (dmax + 1, 2 * dmax)


def test_parse_ranges():
    assert parse_ranges("auto") is None
    assert parse_ranges("16-64, 100") == [(16, 64), (100, 100)]
    for bad in ("abc", "64-16", "1-4", "16-64,60-70"):
        with pytest.raises(ValueError):
            parse_ranges(bad)
