"""Shared machinery of the edits: splicing tokens with an alignment, remapping annotations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from synth import rng as rnd
from synth.example import Example, Fact, Query, Span
from synth.generate import disjoint_values, filler
from synth.language import FACT_VALUE_OFFSET, Language


@dataclass(frozen=True)
class Op:
    """Replace base[start:end] by `tokens` (insert: start == end; remove: no tokens)."""

    start: int
    end: int
    tokens: np.ndarray
    doc: int | None = None  # doc id of the new tokens (default: the doc they sit in)


@dataclass(frozen=True)
class Spliced:
    tokens: np.ndarray
    doc_ids: np.ndarray
    alignment: np.ndarray  # variant position → base position or −1
    newpos: np.ndarray  # base position → variant position or −1 (removed / overwritten)
    starts: tuple[int, ...]  # variant start of each op's new tokens, in the order given


def splice(base: Example, ops: Sequence[Op]) -> Spliced:
    order = sorted(range(len(ops)), key=lambda i: (ops[i].start, ops[i].end))
    toks, docs, align = [], [], []
    starts = [0] * len(ops)
    cur, vpos = 0, 0
    for i in order:
        op = ops[i]
        if op.start < cur or op.end < op.start or op.end > len(base):
            raise ValueError(f"overlapping or invalid edit at [{op.start}, {op.end})")
        toks.append(base.tokens[cur : op.start])
        docs.append(base.doc_ids[cur : op.start])
        align.append(np.arange(cur, op.start, dtype=np.int64))
        vpos += op.start - cur
        starts[i] = vpos
        doc = op.doc
        if doc is None:  # replaced tokens: their own doc; inserted: the doc of the token before
            at = op.start if op.start < op.end or op.start == 0 else op.start - 1
            doc = int(base.doc_ids[at])
        new = np.asarray(op.tokens, dtype=np.int64)
        toks.append(new)
        docs.append(np.full(len(new), doc, dtype=np.int64))
        align.append(np.full(len(new), -1, dtype=np.int64))
        vpos += len(new)
        cur = op.end
    toks.append(base.tokens[cur:])
    docs.append(base.doc_ids[cur:])
    align.append(np.arange(cur, len(base), dtype=np.int64))
    alignment = np.concatenate(align)
    newpos = np.full(len(base), -1, dtype=np.int64)
    keep = alignment >= 0
    newpos[alignment[keep]] = np.flatnonzero(keep)
    return Spliced(np.concatenate(toks), np.concatenate(docs), alignment, newpos, tuple(starts))


def move(span: Span, sp: Spliced) -> Span:
    """A base span's place in the variant (its tokens must have survived)."""
    if len(span) == 0:
        return span
    s, e = sp.newpos[span.start], sp.newpos[span.end - 1]
    if s < 0 or e < 0:
        raise ValueError(f"span [{span.start}, {span.end}) did not survive the edit")
    return Span(int(s), int(e) + 1)


def move_fact(f: Fact, sp: Spliced) -> Fact:
    return Fact(f.entity, f.attribute, f.value, move(f.span, sp), move(f.value_span, sp), f.doc)


def move_query(q: Query, sp: Spliced) -> Query:
    return Query(q.fact, move(q.span, sp), move(q.answer, sp))


def moved(base: Example, sp: Spliced) -> tuple[list[Fact], list[Query], list[Span]]:
    """The base's facts, queries and distractor spans at their places in the spliced text
    (lists, for an edit to add its own)."""
    return (
        [move_fact(f, sp) for f in base.facts],
        [move_query(q, sp) for q in base.queries],
        [move(d, sp) for d in base.distractors],
    )


def new_fact(
    lang: Language, entity: int, attribute: int, value: tuple[int, ...], start: int, doc: int
) -> Fact:
    end = start + FACT_VALUE_OFFSET + len(value) + 1
    return Fact(
        entity,
        attribute,
        tuple(value),
        Span(start, end),
        Span(start + FACT_VALUE_OFFSET, end - 1),
        doc,
    )


def sorted_facts(
    facts: Sequence[Fact], queries: Sequence[Query]
) -> tuple[tuple[Fact, ...], tuple[Query, ...], list[int]]:
    """Facts in text order; queries' fact indices follow. Returns (facts, queries, old→new index)."""
    order = sorted(range(len(facts)), key=lambda i: facts[i].span.start)
    new_index = [0] * len(facts)
    for new, old in enumerate(order):
        new_index[old] = new
    qs = tuple(Query(new_index[q.fact] if q.fact >= 0 else -1, q.span, q.answer) for q in queries)
    return tuple(facts[i] for i in order), qs, new_index


def get_query(base: Example, query: int) -> Query:
    if not 0 <= query < len(base.queries):
        raise ValueError(f"query {query} does not exist: the base has {len(base.queries)} queries")
    return base.queries[query]


def supporting_fact(base: Example, query: int, edit: str) -> tuple[Query, int, Fact]:
    q = get_query(base, query)
    if q.fact < 0:
        raise ValueError(f"{edit} needs a query with a supporting fact; query {query} has none")
    return q, q.fact, base.facts[q.fact]


def query_key(base: Example, q: Query) -> tuple[int, int]:
    """(entity, attribute) token ids a query asks about: "? ATTR of ENTITY ..."."""
    return int(base.tokens[q.span.start + 3]), int(base.tokens[q.span.start + 1])


def value_tokens(base: Example) -> set[int]:
    """Every token of every stated value and every answer in the example."""
    used: set[int] = set()
    for f in base.facts:
        used.update(f.value)
    for q in base.queries:
        used.update(int(t) for t in base.tokens[q.answer.start : q.answer.end])
    return used


def entities(base: Example) -> set[int]:
    out = {f.entity for f in base.facts}
    out.update(query_key(base, q)[0] for q in base.queries)
    return out


def fresh_value(
    lang: Language,
    rng: np.random.Generator,
    base: Example,
    length: int | None,
    exclude: set[int] = frozenset(),
) -> tuple[int, ...]:
    return disjoint_values(lang, rng, 1, exclude=value_tokens(base) | set(exclude), length=length)[
        0
    ]


def replacement_value(
    lang: Language,
    rng: np.random.Generator,
    base: Example,
    old: tuple[int, ...],
    value: tuple[int, ...] | None,
    same_length: bool,
    edit: str,
) -> tuple[int, ...]:
    """The value to state instead of `old`: `value` checked (of `old`'s token length when
    `same_length`), or a fresh one sharing no token with the example's values (of `old`'s length
    when `same_length`, else any length)."""
    if value is None:
        return fresh_value(lang, rng, base, len(old) if same_length else None, exclude=set(old))
    new = tuple(int(t) for t in value)
    if same_length and len(new) != len(old):
        raise ValueError(
            f"{edit}: value has {len(new)} tokens but the fact's has {len(old)}; pass same_length=False"
        )
    return new


def fresh_entity(
    lang: Language, rng: np.random.Generator, base: Example, exclude: set[int] = frozenset()
) -> int:
    used = entities(base) | set(exclude)
    pool = [int(e) for e in lang.entity_ids if int(e) not in used]
    if not pool:
        raise ValueError("no entity left that the example does not already use")
    return rnd.choice(rng, pool)


def doc_topic(base: Example, doc: int) -> int:
    docs = np.unique(base.doc_ids).tolist()
    i = docs.index(doc)
    return base.topics[i] if i < len(base.topics) else -1


def neutral_filler(
    lang: Language, rng: np.random.Generator, base: Example, start: int, n: int
) -> np.ndarray:
    """n filler tokens in the topic of the document at `start`, continuing the chain before it."""
    doc = int(base.doc_ids[start])
    prev = int(base.tokens[start - 1]) if start > 0 and base.doc_ids[start - 1] == doc else None
    return filler(lang, rng, n, doc_topic(base, doc), prev)


def free_slot(
    rng: np.random.Generator, free: np.ndarray, size: int, lo: int, hi: int
) -> int | None:
    """A random start s in [lo, hi − size] with free[s : s + size] all True, or None."""
    if hi - size < lo:
        return None
    ok = np.convolve((~free[lo:hi]).astype(np.int64), np.ones(size, dtype=np.int64), "valid") == 0
    cand = np.flatnonzero(ok)
    return None if len(cand) == 0 else lo + int(rnd.choice(rng, cand))


def insertion_points(base: Example, lo: int, hi: int) -> np.ndarray:
    """Positions x in [lo, hi] where inserting before base token x splits no fact, query or
    distractor (x − 1 is filler or the end of a block, x is filler or the start of a block)."""
    inside = np.zeros(len(base) + 1, dtype=bool)  # inside[x]: x is strictly inside a block
    for s in [*(f.span for f in base.facts), *(q.span for q in base.queries), *base.distractors]:
        inside[s.start + 1 : s.end] = True
    xs = np.arange(lo, hi + 1)
    return xs[~inside[xs]]


def exact_op(
    base: Example, toks: np.ndarray, last: int, doc: int, same_length: bool, what: str
) -> Op:
    """Place `toks` so that its last token ends up where base position `last` is now, relative to
    everything after it: overwriting filler at [last − len + 1, last] (same_length), or inserted before
    base token last + 1 (later tokens move by len). Either way the distance from its last token to any
    later base token t is t − last in the variant."""
    m = len(toks)
    d = base.doc_span(doc)
    if same_length:
        s = last - m + 1
        if s <= d.start or last >= d.end or not base.filler_mask()[s : last + 1].all():
            raise ValueError(
                f"{what}: positions {s}..{last} are not all filler inside document {doc} "
                f"[{d.start}, {d.end}); choose another distance or pass same_length=False"
            )
        return Op(s, last + 1, np.asarray(toks))
    x = last + 1
    if x <= d.start or x > d.end or len(insertion_points(base, x, x)) == 0:
        raise ValueError(
            f"{what}: inserting before position {x} would split a statement or leave document {doc}; "
            "choose another distance"
        )
    return Op(x, x, np.asarray(toks), doc)


def random_ops(
    base: Example,
    rng: np.random.Generator,
    blocks: Sequence[np.ndarray],
    lo: int,
    hi: int,
    same_length: bool,
    what: str,
) -> list[Op]:
    """Place each block at a random spot inside base positions [lo, hi): overwriting filler
    (same_length; blocks never overlap each other) or inserted at distinct insertion points."""
    ops: list[Op] = []
    if same_length:
        free = base.filler_mask()
        for toks in blocks:
            s = free_slot(rng, free, len(toks), lo, hi)
            if s is None:
                raise ValueError(
                    f"{what}: not enough filler in [{lo}, {hi}) for {len(blocks)} statement(s); "
                    "use a base with more room"
                )
            free[s : s + len(toks)] = False
            ops.append(Op(s, s + len(toks), np.asarray(toks)))
        return ops
    points = insertion_points(base, max(lo, 1), hi)
    points = points[base.doc_ids[points - 1] == base.doc_ids[np.minimum(points, len(base) - 1)]]
    if len(points) < len(blocks):
        raise ValueError(f"{what}: no room in [{lo}, {hi}) to insert {len(blocks)} statement(s)")
    chosen = sorted(rnd.sample(rng, points, len(blocks)))
    return [
        Op(int(x), int(x), np.asarray(t), int(base.doc_ids[x - 1]))
        for x, t in zip(chosen, blocks, strict=True)
    ]


def assemble_variant(
    base: Example,
    sp: Spliced,
    facts: Sequence[Fact],
    queries: Sequence[Query],
    distractors: Sequence[Span] = (),
) -> tuple[Example, list[int]]:
    """The variant with facts in text order; returns it and the map from the given fact order to it."""
    fs, qs, index = sorted_facts(facts, queries)
    variant = base.replace(
        tokens=sp.tokens,
        doc_ids=sp.doc_ids,
        facts=fs,
        queries=qs,
        distractors=tuple(sorted(distractors)),
    )
    return variant, index
