"""Documents laid out at exact token positions: separator, filler runs and blocks.

    doc = DocPlan(length=300, placed=(Placed(40, fact), Placed(200, query)))
    composed = compose(world, rng, [doc])

A document plan says how many tokens the document has (its separator at position 0 included)
and where each block (a fact, a query, a given run of filler) starts; every gap between them is filled with a haystack run of exactly
its length (`Haystack.runs`: one reading on through the document, from a random start), unless
the plan gives its own runs. The pieces are rendered as one text (`synth.text.render`) and
every piece must have in context the token count it has on its own — so every position planned
is the position in the model's tokens. A text whose tokenizer merges across a junction is drawn
again with other filler, `ATTEMPTS` times, then refused (`Misaligned`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from synth.text.render import Misaligned, Piece, Rendered, render
from synth.text.world import Block, TextWorld

ATTEMPTS = 4


@dataclass(frozen=True)
class Placed:
    start: int  # token position in its document (the separator is 0)
    block: Block  # a fact, a query or a run of filler


@dataclass(frozen=True)
class DocPlan:
    length: int  # tokens, the separator included
    placed: tuple[Placed, ...] = ()
    runs: tuple[tuple[int, int], ...] | None = None  # haystack pieces for each gap, if given

    def gaps(self) -> list[int]:
        """Filler tokens before, between and after the blocks (ValueError if they overlap)."""
        out, at = [], 1
        for p in sorted(self.placed, key=lambda p: p.start):
            if p.start < at:
                raise ValueError(f"a block at {p.start} overlaps what ends at {at}")
            out.append(p.start - at)
            at = p.start + len(p.block)
        if at > self.length:
            raise ValueError(f"the blocks end at {at}, past the document's {self.length} tokens")
        out.append(self.length - at)
        return out


@dataclass(frozen=True, eq=False)
class Composed:
    rendered: Rendered
    doc_starts: tuple[int, ...]  # token position of each document's separator
    blocks: tuple[tuple[int, ...], ...]  # per document, per placed block (in the order given):
    # the index of its first piece
    runs: tuple[tuple[tuple[int, int], ...], ...]  # per document: the haystack runs used

    def block_span(self, doc: int, k: int, n_pieces: int):
        """The tokens of the k-th placed block of document `doc` (of `n_pieces` pieces)."""
        first = self.blocks[doc][k]
        return self.rendered.span(first, first + n_pieces - 1)

    def value_span(self, doc: int, k: int):
        """The value (answer) tokens of the k-th placed block, a fact or a query."""
        return self.rendered.span(self.blocks[doc][k] + 1)


def _pieces(world: TextWorld, plan: DocPlan, doc: int, runs, offset: int):
    """The pieces of one document, their planned lengths, and where its blocks begin."""
    h = world.haystack
    pieces = [Piece(world.tokenizer.separator, doc, "eod")]
    lengths = [1]
    order = sorted(range(len(plan.placed)), key=lambda k: plan.placed[k].start)
    first = [0] * len(plan.placed)
    for gap, (i, j) in enumerate(runs):
        pieces += [Piece(w, doc) for w in h.pieces(i, j)]
        lengths += h.piece_lengths(i, j)
        if gap < len(order):
            k = order[gap]
            b = plan.placed[k].block
            first[k] = offset + len(pieces)
            pieces += [Piece(t, doc, r) for t, r in zip(b.pieces, b.roles, strict=True)]
            lengths += list(b.lengths)
    return pieces, lengths, first


def compose(world: TextWorld, rng: np.random.Generator, docs: Sequence[DocPlan]) -> Composed:
    """The documents, one after the other (doc ids 0, 1, …), rendered (module docstring)."""
    gaps = [plan.gaps() for plan in docs]
    for plan, g in zip(docs, gaps, strict=True):
        if plan.runs is not None and len(plan.runs) != len(g):
            raise ValueError(f"{len(plan.runs)} runs given for {len(g)} gaps")
    last: Misaligned | None = None
    for _ in range(ATTEMPTS):
        pieces: list[Piece] = []
        lengths: list[int] = []
        firsts, used = [], []
        for d, (plan, g) in enumerate(zip(docs, gaps, strict=True)):
            runs = plan.runs if plan.runs is not None else world.haystack.runs(rng, g)
            p, n, first = _pieces(world, plan, d, runs, len(pieces))
            pieces += p
            lengths += n
            firsts.append(tuple(first))
            used.append(tuple(runs))
        try:
            rendered = render(world.tokenizer, pieces, planned=lengths)
        except Misaligned as e:
            if all(plan.runs is not None for plan in docs):
                raise
            last = e
            continue
        starts = np.cumsum([0, *(plan.length for plan in docs)])[:-1]
        return Composed(rendered, tuple(int(s) for s in starts), tuple(firsts), tuple(used))
    raise Misaligned(f"the tokenizer merges across the pieces of every text tried: {last}")
