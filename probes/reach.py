"""How far back a scored token can see: the direct window and the layered reach.

Transformer-XL keeps three lengths apart that are easy to conflate (docs/design.md, *Three lengths*):
the **direct window** (keys the last layer's query attends to), the **layered reach** (how far
information can still arrive through states computed in earlier segments, one layer per segment
crossed) and the backprop length (tgt_len in training, not a property of evaluation).

Conventions, used everywhere in `probes`:
- positions index a row of the stream as the evaluator sees it; segment 0 starts at position 0;
- a scored token `t` is predicted by the query at input position `q = t − 1`;
- distances are counted from the scored token back: the token at `t − d` is at distance `d`
  (so a fact's last token at `f` and the first answer token at `a` are `d = a − f` apart);
- `direct(t)` is the largest `d` such that token `t − d` is a key of `t`'s last-layer query,
  `reach(t)` the largest `d` such that token `t − d` can influence `t`'s prediction at all.

Cached (streaming) evaluator, segment length T, memory M, n layers:
    direct(t) = t − (seg_start(q) − M)        = M + o + 1,  o = q − seg_start(q)
              = t − (q − M + 1)               = M            with same_length
    r₀ = q;  r_{k+1} = seg_start(r_k) − M    (same_length: r_k − M + 1),   reach(t) = t − r_n
Both are clipped at the stream start and, under `reset`, at the start of the query's document
(its first token is the `<eod>` that opens it). In query-key terms the direct window is
"mem_len + offset in segment" keys back (docs/design.md); counted from the scored token it is one more.

Recompute (sliding-window) evaluator with window w: every scored token sees the w tokens before
it and nothing else: direct(t) = reach(t) = w (clipped the same way).

A model's own sliding attention window s (`sliding_window`, e.g. Mistral's; None: none) further
limits every layer's query at r to keys at r − s + 1 or later:
    direct(t) = min(direct(t), s);   r_{k+1} = max(r_{k+1}, r_k − s + 1)
so a recompute window w gives direct(t) = min(w, s) and reach(t) = min(w, 1 + n·(s − 1)).
A model whose layers differ (`layer_windows`, one entry per layer from the first: Gemma 2/3 mix
sliding and global layers) applies each layer's own s while the recursion walks down from the
last layer; the direct window is the last layer's.

Attention sinks (`sinks` = k, the `sinks` evaluator): every query also sees the first k tokens of
the row (under `reset`: of its own document), whatever the distance, in every layer without a
sliding window of its own. Such a token is not at one distance from the rest, so it is labelled by
position (`label`, `within_reach`): "direct" when the last layer sees sinks, "layered" when only an
earlier layer does, and not at all on a model whose every layer has a sliding window (there the
window masks the sinks and `sinks` computes what `stream` does).

A recurrent state (`state=True`: Mamba, RWKV scored by `probes.adapters.hf_state`) attends to
nothing: every earlier token reaches the scored one through the state, at any distance. Its
direct window is 0 and its reach unbounded (`UNBOUNDED`), clipped like the others (under `reset`,
at the query's document start, where the state starts afresh).

A distance `d` of token `t` is "direct" if d ≤ direct(t), "layered" if direct(t) < d ≤ reach(t)
("state" instead when the direct window is 0: a recurrent state), and "beyond" otherwise. A bin's label is the most common label of its scored tokens (a tie goes
to the farther label); `within_horizon` means the label is "direct" or "state".
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from probes.limits import MAX_DISTANCE

REACH_LABELS = ("direct", "layered", "beyond", "state")  # indices are stored (tokens.npz)
# the labels of a fact the answer reads without relaying it through the layers: in the direct
# window, or anywhere in a recurrent state (whose reach is unbounded)
WITHIN_HORIZON = ("direct", "state")
# how far each label lies (ties in `label_bin` go to the farther one)
FARNESS = {"direct": 0, "layered": 1, "state": 1, "beyond": 2}
# A window this long stands for "the whole row": a transformer scored in one forward without a
# sliding window of its own, or a recurrent state. Nothing in a row is beyond it; `unbounded`.
UNBOUNDED = 2**40


@dataclass(frozen=True)
class Horizon:
    """What the evaluator lets a token see. `window` is the recompute window (None: cached);
    `sliding_window` the model's own attention window in every layer (None: none); `state` a
    recurrent state (direct window 0, reach unbounded; module docstring)."""

    tgt_len: int
    mem_len: int
    n_layer: int
    same_length: bool = False
    reset: bool = True
    window: int | None = None
    sliding_window: int | None = None
    state: bool = False
    layer_windows: tuple[int | None, ...] | None = None  # per layer, when layers differ
    sinks: int = 0

    @classmethod
    def of(
        cls,
        geometry,
        n_layer: int,
        window: int | None = None,
        sliding_window: int | None = None,
        state: bool = False,
        layer_windows: tuple[int | None, ...] | None = None,
        sinks: int = 0,
    ) -> Horizon:
        if layer_windows is not None:
            layer_windows = tuple(layer_windows)
            if len(layer_windows) != n_layer:
                raise ValueError(f"{len(layer_windows)} layer windows for {n_layer} layers")
            if len(set(layer_windows)) == 1:  # one window for every layer
                sliding_window, layer_windows = layer_windows[0], None
        return cls(
            tgt_len=geometry.tgt_len,
            mem_len=geometry.mem_len,
            n_layer=n_layer,
            same_length=geometry.same_length,
            reset=geometry.reset,
            window=window,
            sliding_window=sliding_window,
            state=state,
            layer_windows=layer_windows,
            sinks=int(sinks),
        )

    def _seg_start(self, r: int) -> int:
        return (r // self.tgt_len) * self.tgt_len

    def _layer_window(self, i: int) -> int | None:
        """The sliding window of layer i (0 = the first), None for none."""
        if self.layer_windows is not None:
            return self.layer_windows[i]
        return self.sliding_window

    def _sink_label(self) -> str | None:
        """What a sink is to a scored token: "direct" when the last layer sees it, "layered"
        when only an earlier one does, None without sinks (or with every layer windowed)."""
        if self.sinks <= 0 or self.state:
            return None
        if self._layer_window(self.n_layer - 1) is None:
            return "direct"
        if any(self._layer_window(i) is None for i in range(self.n_layer)):
            return "layered"
        return None

    def is_sink(self, source: int, doc_start: int = 0) -> bool:
        """Whether the token at `source` is a sink for a query whose document starts at
        doc_start (the row's first k tokens; under reset, its document's first k)."""
        if self._sink_label() is None:
            return False
        start = doc_start if self.reset else 0
        return start <= source < start + self.sinks

    def label(self, t: int, source: int, doc_start: int = 0) -> str:
        """The reach label of the token at `source` for the token scored at t (see module
        docstring), sinks included."""
        direct, reach = self.token(t, doc_start)
        own = classify(t - source, direct, reach)
        if own != "direct" and self.is_sink(source, doc_start):
            sink = self._sink_label()
            return sink if FARNESS[sink] < FARNESS[own] else own
        return own

    def within_reach(self, t: int, source: int, doc_start: int = 0) -> bool:
        """Whether the token at `source` can influence the score of the token at t at all."""
        return self.label(t, source, doc_start) != "beyond"

    def unclipped(self, t: int) -> tuple[int, int]:
        """(direct, reach) of the token at position t, before any clipping."""
        if self.state:
            return 0, UNBOUNDED
        last = self._layer_window(self.n_layer - 1)
        layers = range(self.n_layer - 1, -1, -1)  # the recursion walks down from the last layer
        if self.window is not None:
            w = self.window
            if last is None and self.layer_windows is None:
                return w, w
            reach = 0  # distance from t: the last layer's keys reach s back, each earlier s − 1
            for i in layers:
                s = self._layer_window(i)
                step = w if s is None else s
                reach = min(w, reach + step - (1 if reach else 0))
            return (w if last is None else min(w, last)), reach
        q = t - 1
        m = self.mem_len
        if self.same_length:
            return m, t - (q - self.n_layer * (m - 1))
        direct = t - (self._seg_start(q) - m)
        r = q
        for i in layers:
            if r <= 0:  # nothing exists before position 0
                break
            s = self._layer_window(i)
            r = self._seg_start(r) - m if s is None else max(self._seg_start(r) - m, r - s + 1)
        return (direct if last is None else min(direct, last)), t - r

    def token(self, t: int, doc_start: int = 0) -> tuple[int, int]:
        """(direct, reach) of the token at t whose query's document starts at doc_start."""
        if t < 1:
            raise ValueError(f"position {t} has no prediction (t must be >= 1)")
        direct, reach = self.unclipped(t)
        limit = t - (doc_start if self.reset else 0)
        limit = min(limit, t)  # the stream start
        return min(direct, limit), min(reach, limit)

    def tokens(self, positions: np.ndarray, doc_starts: np.ndarray | None = None):
        """Vectorised `token` over arrays of positions (and their query documents' starts)."""
        positions = np.asarray(positions, dtype=np.int64)
        if doc_starts is None:
            doc_starts = np.zeros_like(positions)
        pairs = [self.token(int(t), int(s)) for t, s in zip(positions, doc_starts, strict=True)]
        direct = np.array([p[0] for p in pairs], dtype=np.int64)
        reach = np.array([p[1] for p in pairs], dtype=np.int64)
        return direct, reach

    def ranges(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """((min, max) direct, (min, max) reach) over every offset in a segment, deep in a stream
        (no clipping): the span a distance bin should stay inside to have one label."""
        if self.window is not None or self.state:
            d, r = self.unclipped((self.window or 0) + 1)
            return (d, d), (r, r)
        base = self.tgt_len * (self.n_layer + 2) * max(1, self.mem_len // self.tgt_len + 2)
        vals = [self.unclipped(base + o + 1) for o in range(self.tgt_len)]
        d = [v[0] for v in vals]
        r = [v[1] for v in vals]
        return (min(d), max(d)), (min(r), max(r))

    @property
    def unbounded(self) -> bool:
        """Whether nothing in a row lies beyond the reach (see UNBOUNDED)."""
        return self.ranges()[1][1] >= UNBOUNDED

    def to_dict(self) -> dict:
        (dmin, dmax), (rmin, rmax) = self.ranges()
        if dmax >= UNBOUNDED or self.state:
            dmin = dmax = None
        if rmax >= UNBOUNDED:
            rmin = rmax = None
        return {
            "direct_window": {"min": dmin, "max": dmax},
            "layered_reach": {"min": rmin, "max": rmax},
            "n_layer": self.n_layer,
            "window": self.window,
            **({"sliding_window": self.sliding_window} if self.sliding_window else {}),
            **({"layer_windows": list(self.layer_windows)} if self.layer_windows else {}),
            **({"sinks": self.sinks, "sinks_seen": self._sink_label()} if self.sinks else {}),
            **({"unbounded": True} if rmax is None else {}),
            **({"state": True} if self.state else {}),
        }


def doc_starts(doc_ids: np.ndarray) -> np.ndarray:
    """For each position, the first position of its document (doc ids per token, one row)."""
    doc_ids = np.asarray(doc_ids)
    starts = np.zeros(doc_ids.shape, dtype=np.int64)
    if doc_ids.size:
        change = np.flatnonzero(np.diff(doc_ids) != 0) + 1
        bounds = np.concatenate([[0], change])
        lengths = np.diff(np.concatenate([bounds, [doc_ids.size]]))
        starts = np.repeat(bounds, lengths)
    return starts


def classify(distance: int, direct: int, reach: int) -> str:
    if distance <= direct:
        return "direct"
    if distance <= reach:
        return "state" if direct == 0 else "layered"
    return "beyond"


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
