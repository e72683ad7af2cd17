"""Annotated examples and aligned pairs: the data every probe reads.

Conventions (docs/design.md, *Documents and `<eod>`*): every document begins with `<eod>`, which carries the document's own id (the
separator *opens* a document). Positions are token indices into `Example.tokens`; spans are half-open.

    distance(q) = q.answer.start − (facts[q.fact].span.end − 1)

i.e. from the fact's last token (its ".") to the first answer token, in this example's positions.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True, order=True)
class Span:
    """Token positions [start, end)."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(f"a span needs 0 <= start <= end, got [{self.start}, {self.end})")

    def __len__(self) -> int:
        return self.end - self.start

    def __contains__(self, i: object) -> bool:
        return isinstance(i, int | np.integer) and self.start <= i < self.end

    def indices(self) -> np.ndarray:
        return np.arange(self.start, self.end, dtype=np.int64)

    def shift(self, k: int) -> Span:
        return Span(self.start + k, self.end + k)

    def overlaps(self, other: Span) -> bool:
        return self.start < other.end and other.start < self.end


@dataclass(frozen=True)
class Fact:
    """A statement "the ATTR of ENTITY is VALUE ." (token ids) at `span`, in document `doc`."""

    entity: int  # token id of the entity name
    attribute: int  # token id of the attribute
    value: tuple[int, ...]  # token ids of the value
    span: Span  # the whole statement, final "." included
    value_span: Span  # the value tokens inside it
    doc: int  # doc id


@dataclass(frozen=True)
class Query:
    """A query "? ATTR of ENTITY ANSWER ." at `span`; the `answer` tokens are the scored targets.

    `fact` indexes `Example.facts` (the statement that answers it), or is −1 when the text states no
    fact for it (a base for `insert`, or a variant after `delete`). Edits keep a query's answer tokens
    unless asked otherwise, so a variant's answer may differ from its fact's value: the pair's meta
    says which value the variant's text supports."""

    fact: int
    span: Span  # the whole query, answer and final "." included
    answer: Span


def _frozen_array(a: Any) -> np.ndarray:
    arr = np.array(a, dtype=np.int64, copy=True).reshape(-1)
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True, eq=False)
class Example:
    """Tokens with their annotations. Arrays are int64 and read-only."""

    tokens: np.ndarray  # (N,)
    doc_ids: np.ndarray  # (N,) doc id of every token; `<eod>` carries the id of the doc it opens
    facts: tuple[Fact, ...] = ()
    queries: tuple[Query, ...] = ()
    distractors: tuple[Span, ...] = ()  # spans of statements placed to mislead (also in `facts`)
    topics: tuple[int, ...] = ()  # per document, in order of doc id (−1: no topic)
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tokens", _frozen_array(self.tokens))
        object.__setattr__(self, "doc_ids", _frozen_array(self.doc_ids))
        if self.tokens.shape != self.doc_ids.shape:
            raise ValueError(
                f"tokens {self.tokens.shape} and doc_ids {self.doc_ids.shape} differ in shape"
            )
        n = len(self.tokens)
        for s in [
            *(f.span for f in self.facts),
            *(q.span for q in self.queries),
            *self.distractors,
        ]:
            if s.end > n:
                raise ValueError(f"span [{s.start}, {s.end}) lies outside an example of {n} tokens")
        for q in self.queries:
            if not -1 <= q.fact < len(self.facts):
                raise ValueError(
                    f"query refers to fact {q.fact}, but there are {len(self.facts)} facts"
                )

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def targets(self) -> np.ndarray:
        """All answer positions (the tokens whose loss a probe reads), query by query."""
        if not self.queries:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([q.answer.indices() for q in self.queries])

    def distance(self, q: Query | int) -> int:
        """From the supporting fact's last token to the query's first answer token."""
        q = self.queries[q] if isinstance(q, int | np.integer) else q
        if q.fact < 0:
            raise ValueError(
                "this query has no supporting fact in the text: its distance is undefined"
            )
        return q.answer.start - (self.facts[q.fact].span.end - 1)

    @property
    def distances(self) -> tuple[int | None, ...]:
        return tuple(self.distance(q) if q.fact >= 0 else None for q in self.queries)

    @property
    def doc_starts(self) -> np.ndarray:
        """Position of each document's first token (its `<eod>`)."""
        d = self.doc_ids
        if len(d) == 0:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(np.r_[True, d[1:] != d[:-1]])

    def doc_span(self, doc: int) -> Span:
        """The tokens of document `doc` (its `<eod>` included)."""
        idx = np.flatnonzero(self.doc_ids == doc)
        if len(idx) == 0:
            raise ValueError(f"no document with id {doc} in this example")
        return Span(int(idx[0]), int(idx[-1]) + 1)

    def structure_mask(self) -> np.ndarray:
        """True on every token that is not filler: document openers, facts, queries, distractors."""
        m = np.zeros(len(self), dtype=bool)
        m[self.doc_starts] = True
        for s in [
            *(f.span for f in self.facts),
            *(q.span for q in self.queries),
            *self.distractors,
        ]:
            m[s.start : s.end] = True
        return m

    def filler_mask(self) -> np.ndarray:
        return ~self.structure_mask()

    def replace(self, **changes: Any) -> Example:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, eq=False)
class Pair:
    """A base and a variant that differ in one controlled edit.

    alignment[i] is the base position of variant token i, or −1 where the variant token is new
    (inserted or substituted). Aligned tokens are equal: variant.tokens[i] == base.tokens[alignment[i]]."""

    base: Example
    variant: Example
    alignment: np.ndarray  # (len(variant),) int64
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        a = _frozen_array(self.alignment)
        object.__setattr__(self, "alignment", a)
        if a.shape != (len(self.variant),):
            raise ValueError(f"alignment has shape {a.shape}, expected ({len(self.variant)},)")
        if a.size and (a.min() < -1 or a.max() >= len(self.base)):
            raise ValueError("alignment entries must be −1 or a base position")

    @property
    def preserves_length(self) -> bool:
        return len(self.base) == len(self.variant)

    def inverse_alignment(self) -> np.ndarray:
        """(len(base),): the variant position of each base token, −1 where it was removed/replaced."""
        inv = np.full(len(self.base), -1, dtype=np.int64)
        keep = self.alignment >= 0
        inv[self.alignment[keep]] = np.flatnonzero(keep)
        return inv

    def reversed(self, meta: dict[str, Any] | None = None) -> Pair:
        """The same two texts the other way round: the variant becomes the base (the alignment
        inverted). `meta` describes the new pair (default: this pair's, with "reversed": True)."""
        meta = {**self.meta, "reversed": True} if meta is None else meta
        return Pair(self.variant, self.base, self.inverse_alignment(), meta)

    def edited(self) -> np.ndarray:
        """Variant positions whose token is new (alignment −1)."""
        return np.flatnonzero(self.alignment < 0)

    def aligned_targets(self) -> tuple[np.ndarray, np.ndarray]:
        """The base's answer positions and the same tokens' positions in the variant."""
        b = self.base.targets
        v = self.inverse_alignment()[b]
        if (v < 0).any():
            raise ValueError("an answer token of the base has no counterpart in the variant")
        return b, v
