"""Filler of a model-token length: a synth edit evened for the tokenizer bridge.

A length-preserving synth edit keeps every later synth token in place, but not every later
model token: the words it writes (a fact over filler, filler over a fact, another topic's
filler) seldom take as many model tokens as the words they replace. `fill` evens each run of
edited positions to the model-token length of the base's words there, by redrawing filler words
of the variant: the filler the edit itself wrote when the run holds some (a deleted fact, a
shifted topic), then, if that is not enough, up to PAD filler words right after the run and
right before it (runs less than PAD filler words apart are evened together) —
neutral filler of the document's topic (or `topic`), which then belongs to the edit. Words are
swapped one at a time for pool words (a fresh chain of that topic) that bring the run's length
toward the base's, a word's length read from `Bridge.lengths`; the render then checks the whole
pair (`Bridge.pair`), so a tokenizer whose words tokenize otherwise in context only loses pairs.
A run with no filler to redraw is left as it is; one that cannot be evened is Unmatched.
"""

from __future__ import annotations

import numpy as np

from synth import rng as rnd
from synth.example import Pair

PAD = 24  # filler words next to an edit that may be redrawn to even its length
POOL = 256  # pool words drawn per run


def runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of True in `mask`."""
    edges = np.flatnonzero(np.diff(np.r_[0, mask.astype(np.int8), 0]))
    return [(int(s), int(e)) for s, e in zip(edges[::2], edges[1::2], strict=True)]


def clusters(spans: list[tuple[int, int]], free: np.ndarray) -> list[tuple[int, int]]:
    """The runs, those less than PAD free positions apart merged (evened together: the filler
    between them belongs to the edit)."""
    out: list[tuple[int, int]] = []
    for s, e in spans:
        if out and s - out[-1][1] < PAD and free[out[-1][1] : s].all():
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _slots(free: np.ndarray, doc_ids: np.ndarray, s: int, e: int) -> np.ndarray:
    """The free positions, up to PAD each side, running on from [s, e) in its document."""
    doc = doc_ids[s]
    out = []
    for side in (range(e, min(e + PAD, len(free))), range(s - 1, max(s - 1 - PAD, -1), -1)):
        for j in side:
            if not free[j] or doc_ids[j] != doc:
                break
            out.append(j)
    return np.array(sorted(out), dtype=np.int64)


def _even(tokens, slots, pool, lengths, diff: int, rng) -> int:
    """Swap words at `slots` of `tokens` for pool words until they gain `diff` model tokens,
    spreading the change over the slots (each takes about its share, a random pool word among
    the ones that fit best), then greedily; returns what is left of `diff`."""
    gain = lengths[pool]
    order = rnd.permutation(rng, len(slots)).tolist()
    for spread in (True, False):
        for n, i in enumerate(order):
            if diff == 0:
                return 0
            left = len(order) - n
            want = diff if not spread else int(np.sign(diff)) * max(1, round(abs(diff) / left))
            change = gain - lengths[tokens[slots[i]]]  # what each pool word adds
            miss = np.abs(want - change)
            best = np.flatnonzero(miss == miss.min())
            j = int(best[rnd.choice(rng, np.arange(len(best)))])
            if abs(diff - change[j]) < abs(diff):
                tokens[slots[i]] = pool[j]
                diff -= int(change[j])
    return diff


def fill(bridge, pair: Pair, rng, *, topic: int | None = None, protect=()) -> Pair:
    """`pair` with every edited run evened to the base's model-token length (module
    docstring); `protect`: positions never redrawn (the base's answers never are). A pair that
    does not keep its synth tokens in place is returned as it is."""
    from probes.engine.bridge import Unmatched
    from synth.edits._common import doc_topic
    from synth.generate import filler

    a = pair.alignment
    keep = a >= 0
    if not pair.preserves_length or not np.array_equal(a[keep], np.flatnonzero(keep)):
        return pair
    lengths = bridge.lengths
    base, var = pair.base, pair.variant
    tokens = var.tokens.copy()
    new = ~keep
    free = base.filler_mask() & var.filler_mask() & ~new
    free[base.targets] = False
    free[np.asarray(protect, dtype=np.int64)] = False
    written = var.filler_mask() & (new | free)
    for s, e in clusters(runs(new), free):
        diff = int(lengths[base.tokens[s:e]].sum() - lengths[tokens[s:e]].sum())
        if diff == 0:
            continue
        inside = s + np.flatnonzero(written[s:e])
        outside = _slots(free, var.doc_ids, s, e)
        if not inside.size and not outside.size:
            continue  # nothing to even it with: the render decides
        t = doc_topic(var, int(var.doc_ids[s])) if topic is None else topic
        pool = filler(bridge.lang, rng, POOL, int(t))
        for slots in (inside, outside):  # the edit's own filler first, then its neighbours
            if diff != 0 and slots.size:
                diff = _even(tokens, slots, pool, lengths, diff, rng)
        if diff != 0:
            raise Unmatched(f"the edit at {s}..{e - 1} cannot be evened to its model tokens")
        slots = np.r_[inside, outside]
        moved = slots[tokens[slots] != var.tokens[slots]]
        lo, hi = min(s, int(moved.min(initial=s))), max(e, int(moved.max(initial=e - 1)) + 1)
        new[lo:hi] = True  # the run and the filler evened with it: the tokens there move
        free[lo:hi] = False
    if np.array_equal(tokens, var.tokens):
        return pair
    alignment = np.where(new, -1, np.arange(len(tokens)))
    refilled = int((tokens != var.tokens).sum())
    return Pair(base, var.replace(tokens=tokens), alignment.astype(np.int64),
                {**pair.meta, "bridge_refilled": refilled})  # fmt: skip
