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
("state" instead when the direct window is 0: a recurrent state), and "beyond" otherwise
(`classify`); "direct" and "state" are within the horizon (`WITHIN_HORIZON`). Distance bins
built on these regions are `probes.api.distance_bins`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
