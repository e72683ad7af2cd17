"""prior-doc-conflict: the document before the query's states the queried fact with another value,
so that only a document boundary separates the conflict from the query; and the texts built on
it (`prepend`: a document before the base; `cross_document`: the conflict and a foreign document)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from synth import rng as rnd
from synth.edits.common import (
    Op,
    assemble_variant,
    fresh_value,
    get_query,
    moved,
    new_fact,
    query_key,
    random_ops,
    sorted_facts,
    splice,
)
from synth.edits.registry import register
from synth.example import Example, Fact, Pair
from synth.generate import assemble, filler, make_example
from synth.language import Language


@register("prior-doc-conflict", length_changing=True)
def prior_doc_conflict(
    base: Example,
    rng: np.random.Generator,
    lang: Language,
    *,
    query: int = 0,
    value: tuple[int, ...] | None = None,
    same_length: bool = True,
    prev_len: int = 64,
    topic: int | None = None,
    gap: int | None = None,
    start: tuple[int, int] = (1, 1),
) -> Pair:
    """Write "the ATTR of ENTITY is B ." — the queried fact with another value B — into the document
    before the query's, so that only `<eod>` separates it from the query's document.

    Length-preserving (default): the base must already have a previous document (`make_example(...,
    prev_len=N)`); the conflicting fact overwrites filler at a random place inside it, so with `reset`
    the query's losses must not change at all. `same_length=False`: a new previous document holding
    the fact is prepended (`prepend`; doc ids of the base move up by one), in `topic` (default:
    drawn): of `prev_len` tokens with the fact at a random place, or, given `gap`, with the fact
    starting at a position drawn from `start` (lo, hi, both included) and its last token exactly
    `gap` tokens before the query document's `<eod>` (the new document's length follows).
    B defaults to a value of the answer's length sharing no token with the example's values."""
    q = get_query(base, query)
    entity, attribute = query_key(base, q)
    answer = tuple(int(t) for t in base.tokens[q.answer.start : q.answer.end])
    val = (
        fresh_value(lang, rng, base, len(answer)) if value is None else tuple(int(t) for t in value)
    )
    toks = lang.fact_tokens(entity, attribute, val)
    qdoc = int(base.doc_ids[q.span.start])
    if same_length:
        qstart = base.doc_span(qdoc).start
        if qstart == 0:
            raise ValueError(
                "prior-doc-conflict: the base has no document before the query's; build it with "
                "make_example(..., prev_len=N) or pass same_length=False"
            )
        pdoc = int(base.doc_ids[qstart - 1])
        p = base.doc_span(pdoc)
        ops = random_ops(base, rng, [toks], p.start + 1, p.end, True, "prior-doc-conflict")
        sp = splice(base, ops)
        s = sp.starts[0]
        facts, queries, distractors = moved(base, sp)
        facts.append(new_fact(lang, entity, attribute, val, s, pdoc))
        variant, index = assemble_variant(base, sp, facts, queries, distractors)
        prev = pdoc
        alignment = sp.alignment
    else:
        if gap is None and prev_len < len(toks) + 2:
            raise ValueError(
                f"prior-doc-conflict: prev_len={prev_len} cannot hold the fact ({len(toks)} tokens) after <eod>"
            )
        if gap is not None and (gap < 1 or not 1 <= start[0] <= start[1]):
            raise ValueError(
                f"prior-doc-conflict: need gap >= 1 and 1 <= start lo <= hi, got {gap}, {start}"
            )
        topic = rnd.randint(rng, lang.n_topics) if topic is None else int(topic)
        if gap is None:
            s = 1 + rnd.randint(rng, prev_len - len(toks))
        else:
            s = rnd.randrange(rng, *start)
            prev_len = s + len(toks) - 1 + gap
        pre = prepend(base, rng, lang, length=prev_len, topic=topic, blocks=[(s, toks)])
        prev = pre.meta["doc"]
        fs, qs, index = sorted_facts(
            [*pre.variant.facts, new_fact(lang, entity, attribute, val, s, prev)],
            pre.variant.queries,
        )
        variant, alignment = pre.variant.replace(facts=fs, queries=qs), pre.alignment
    conflict = variant.facts[index[-1]]
    meta = {
        "edit": "prior-doc-conflict",
        "query": query,
        "conflict_fact": index[-1],
        "conflict_doc": prev,
        "old_value": list(answer),
        "new_value": list(val),
        "conflict": [conflict.span.start, conflict.span.end],
        "cross_distance": int(variant.queries[query].answer.start - (conflict.span.end - 1)),
    }
    return Pair(base, variant, alignment, meta)


def prepend(
    base: Example,
    rng: np.random.Generator,
    lang: Language,
    *,
    length: int,
    topic: int,
    blocks: Sequence[tuple[int, np.ndarray]] = (),
) -> Pair:
    """`base` after a new first document of `length` tokens in `topic`: `<eod>`, the `blocks`
    ((start, tokens), not annotated) and topic filler (`generate.assemble`). The new document takes
    the base's lowest doc id and the base's ids move up by one; the base's annotations keep their
    order. Variant: the longer text (alignment −1 on the new document); meta["doc"] its doc id."""
    head = assemble(lang, rng, length, blocks, int(topic))
    prev = int(base.doc_ids.min()) if len(base) else 0
    shifted = base.replace(doc_ids=base.doc_ids + 1)
    sp = splice(shifted, [Op(0, 0, head, prev)])
    facts, queries, distractors = moved(base, sp)
    variant = shifted.replace(
        tokens=sp.tokens,
        doc_ids=sp.doc_ids,
        facts=tuple(_redoc(f, f.doc + 1) for f in facts),
        queries=tuple(queries),
        distractors=tuple(sorted(distractors)),
        topics=(int(topic), *base.topics),
    )
    meta = {"edit": "prepend", "length": int(length), "topic": int(topic), "doc": prev}
    return Pair(base, variant, sp.alignment, meta)


@dataclasses.dataclass(frozen=True)
class CrossDocument:
    """Document B after a document A that states B's fact with a conflicting value (`conflict`),
    and the same B after an unrelated document of A's length (`foreign`): the texts of the
    cross-doc probe. Positions index both texts alike."""

    conflict: Example  # A ; B
    foreign: Example  # foreign ; B
    len_a: int  # tokens before B's <eod>
    fact_end: int  # position of the last token of A's conflicting fact
    stale: tuple[int, ...]  # A's value V′ (as many tokens as B's value)


def cross_document(
    lang: Language,
    rng: np.random.Generator,
    *,
    b_distance: int,
    b_lead: int,
    gap: int,
    start: tuple[int, int],
) -> CrossDocument:
    """B: a fact `b_lead` tokens after its <eod> and its query `b_distance` later, in one topic;
    A: B's fact with another value V′, in another topic, starting `start` = (lo, hi) tokens after
    A's <eod> and ending `gap` tokens before B's <eod>; the foreign document: a third topic, as
    long as A, no facts. ValueError when B cannot be built."""

    n_top = lang.n_topics
    t_b, t_a, t_f = (rnd.sample(rng, range(n_top), 3) if n_top >= 3 else [0, 0, 0])[:3]
    b = make_example(lang, rng, [b_distance], lead=b_lead, topic=int(t_b))
    conf = prior_doc_conflict(b, rng, lang, same_length=False, topic=int(t_a), gap=gap, start=start)
    len_a = len(conf.variant) - len(b)
    foreign = prepend(b, rng, lang, length=len_a, topic=int(t_f)).variant
    return CrossDocument(
        conflict=conf.variant,
        foreign=foreign,
        len_a=len_a,
        fact_end=conf.meta["conflict"][1] - 1,
        stale=tuple(int(x) for x in conf.meta["new_value"]),
    )


def extend_b(texts: CrossDocument, rng: np.random.Generator, lang: Language, n: int):
    """The same texts with `n` more filler tokens of B's topic at the end of B (the same tokens
    after A and after the foreign document; nothing before them changes)."""

    def longer(ex: Example, more: np.ndarray) -> Example:
        doc = np.full(len(more), ex.doc_ids[-1], dtype=ex.doc_ids.dtype)
        return ex.replace(tokens=np.r_[ex.tokens, more], doc_ids=np.r_[ex.doc_ids, doc])

    more = filler(
        lang, rng, n, texts.conflict.topics[-1], prev_token=int(texts.conflict.tokens[-1])
    )
    return dataclasses.replace(
        texts, conflict=longer(texts.conflict, more), foreign=longer(texts.foreign, more)
    )


def _redoc(f: Fact, doc: int) -> Fact:
    return dataclasses.replace(f, doc=doc)
