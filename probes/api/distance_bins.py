"""Distance bins over a model's horizon (`probes.api.horizon`): bins chosen so each falls in one
reach region (`auto_bins`, `gap_bins`), bins given as `--distance LO-HI,…` (`parse_ranges`), and
a bin's reach label from its scored tokens (`label_bin`): the most common label of its tokens (a
tie goes to the farther label); `within_horizon` means the label is "direct" or "state"."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence

from probes.api.horizon import FARNESS, REACH_LABELS, UNBOUNDED, WITHIN_HORIZON, Horizon, classify
from probes.limits import MAX_DISTANCE


def label_bin(
    distances: Sequence[int],
    directs: Sequence[int],
    reaches: Sequence[int],
    labels: Sequence[str] | None = None,
) -> dict | None:
    """A bin's reach label from its tokens (see module docstring); None for an empty bin.
    `labels`: the tokens' own labels where they were given by position (`Horizon.label`: a
    fact among the sinks), else each is classified from its distance."""
    if labels is None:
        labels = [
            classify(int(d), int(w), int(r))
            for d, w, r in zip(distances, directs, reaches, strict=True)
        ]
    labels = [str(x) for x in labels]
    if not labels:
        return None
    counts = Counter(labels)
    best = max(REACH_LABELS, key=lambda lab: (counts[lab], FARNESS[lab]))
    n = len(labels)
    return {
        "reach": best,
        "within_horizon": best in WITHIN_HORIZON,
        "reach_fraction": {
            lab: counts[lab] / n for lab in REACH_LABELS if lab != "state" or counts[lab]
        },
        "direct_window": {"min": int(min(directs)), "max": int(max(directs))},
        "layered_reach": {"min": int(min(reaches)), "max": int(max(reaches))},
    }


def auto_bins(horizon: Horizon, lo: int = 8) -> list[tuple[int, int]]:
    """Distance bins that each fall in one region for every offset in a segment: two inside the
    direct window, one only in the layered reach (when there is such a gap: at most as wide as
    the direct window, just past it) and one beyond it (just beyond: past the layered reach
    every distance gives the same exact zero, and longer texts only cost time).

    The layered bin stops at twice the direct window because a fact read through the stack of
    layers is read most strongly just past the window; on a deep model the whole gap (n_layer
    windows: 30 × 2,048 tokens for SmolLM2-135M at its default geometry) would make texts n_layer
    times longer to ask the same question. A two-layer model's gap is narrower than that, so its
    bin is the whole gap. Where the layered bin is cut so, the beyond bin is left out too: it
    asks for texts longer than the whole reach (13.7 K tokens for Gemma 3 270M, against 4 K for
    the other bins) to confirm an exact zero, which an explicit --distance past the reach still
    asks for."""
    (dmin, dmax), (rmin, rmax) = horizon.ranges()
    if rmax >= UNBOUNDED:  # nothing is beyond: two bins within what a short text can hold
        if horizon.state or dmax >= UNBOUNDED or dmax >= 16 * lo:
            return [(lo, 4 * lo), (4 * lo + 1, 16 * lo)]
        return [(2, max(2, dmax)), (dmax + 1, max(dmax + 1, 16 * lo))]
    bins: list[tuple[int, int]] = []
    if dmin >= 2 * lo:
        mid = round((lo * dmin) ** 0.5)
        bins += [(lo, mid), (mid + 1, dmin)]
    else:
        bins.append((2, max(2, dmax)))
    if rmin > dmax:
        bins.append((dmax + 1, min(rmin, 2 * dmax)))
        if rmin > 2 * dmax:
            return bins
    start = rmax + 1
    bins.append((start, start + max(32, rmax // 4)))
    return bins


def parse_ranges(text: str) -> list[tuple[int, int]] | None:
    """'auto' → None; 'LO-HI,D,…' → [(LO, HI), (D, D), …] (inclusive, increasing, each ≥ 2).
    Raises ValueError saying what would be right."""
    text = text.strip()
    if text == "auto":
        return None
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                a, b = part.split("-", 1)
                lo, hi = int(a), int(b)
            else:
                lo = hi = int(part)
        except ValueError:
            raise ValueError(
                f"{text!r} is not a list of distances; write 'auto' or LO-HI,… e.g. 16-64,700-900"
            ) from None
        if lo < 2 or hi < lo:
            raise ValueError(f"bad distance range {part!r}; need 2 <= LO <= HI, e.g. 16-64")
        if hi > MAX_DISTANCE:
            raise ValueError(
                f"distance {hi:,} in {part!r} is above the limit of {MAX_DISTANCE:,} tokens"
            )
        out.append((lo, hi))
    if any(b[0] <= a[1] for a, b in itertools.pairwise(out)):
        raise ValueError(f"distance ranges {text!r} must be increasing and not overlap")
    return out


def ranges_text(bins: Sequence[tuple[int, int]]) -> str:
    """Bins as `parse_ranges` reads them back ("14-126,127-1985")."""
    return ",".join(f"{int(lo)}-{int(hi)}" for lo, hi in bins)


def check_ranges(text: str) -> None:
    parse_ranges(text)


def gap_bins(horizon, offset: int) -> list[tuple[int, int]]:
    """Auto bins of a distance that ends `offset` tokens before the scored token (cross-doc: A's
    fact → the document boundary, B's answer `offset` tokens after it): `auto_bins` moved back by
    the offset, so each still falls in one reach region, after an adjacent bin (2, 8)."""
    out: list[tuple[int, int]] = [(2, 8)]
    for lo, hi in auto_bins(horizon):
        lo, hi = max(lo - offset, out[-1][1] + 1), hi - offset
        if hi >= lo:
            out.append((lo, hi))
    return out
