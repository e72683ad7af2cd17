"""boundary (cross-doc): a previous document states a conflicting value of the queried fact."""

from __future__ import annotations

import dataclasses

import numpy as np

from synth import rng as rnd
from synth.edits._common import (
    Op,
    assemble_variant,
    fresh_value,
    get_query,
    move,
    move_fact,
    move_query,
    new_fact,
    query_key,
    random_ops,
    splice,
)
from synth.example import Example, Fact, Pair
from synth.generate import filler
from synth.language import Language


def boundary(
    base: Example,
    rng: np.random.Generator,
    lang: Language,
    *,
    query: int = 0,
    value: tuple[int, ...] | None = None,
    same_length: bool = True,
    prev_len: int = 64,
) -> Pair:
    """Write "the ATTR of ENTITY is B ." — the queried fact with another value B — into the document
    before the query's, so that only `<eod>` separates it from the query's document.

    Length-preserving (default): the base must already have a previous document (`make_example(...,
    prev_len=N)`); the conflicting fact overwrites filler at a random place inside it, so with `reset`
    the query's losses must not change at all. `same_length=False`: a new previous document of
    `prev_len` tokens holding the fact is prepended (doc ids of the base move up by one).
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
                "boundary: the base has no document before the query's; build it with "
                "make_example(..., prev_len=N) or pass same_length=False"
            )
        pdoc = int(base.doc_ids[qstart - 1])
        p = base.doc_span(pdoc)
        ops = random_ops(base, rng, [toks], p.start + 1, p.end, True, "boundary")
        sp = splice(base, ops)
        s = sp.starts[0]
        facts = [move_fact(f, sp) for f in base.facts]
        facts.append(new_fact(lang, entity, attribute, val, s, pdoc))
        queries = [move_query(x, sp) for x in base.queries]
        variant, index = assemble_variant(
            base, sp, facts, queries, [move(d, sp) for d in base.distractors]
        )
        prev = pdoc
    else:
        if prev_len < len(toks) + 2:
            raise ValueError(
                f"boundary: prev_len={prev_len} cannot hold the fact ({len(toks)} tokens) after <eod>"
            )
        topic = rnd.randint(rng, lang.n_topics)
        s = 1 + rnd.randint(rng, prev_len - len(toks))
        head = np.full(prev_len, -1, dtype=np.int64)
        head[0] = lang.vocab.eod_id
        head[s : s + len(toks)] = toks
        free = head == -1
        head[free] = filler(lang, rng, int(free.sum()), topic)
        prev = int(base.doc_ids.min()) if len(base) else 0
        shifted = base.replace(doc_ids=base.doc_ids + 1)
        sp = splice(shifted, [Op(0, 0, head, prev)])
        facts = [_redoc(move_fact(f, sp), f.doc + 1) for f in base.facts]
        facts.append(new_fact(lang, entity, attribute, val, s, prev))
        queries = [move_query(x, sp) for x in base.queries]
        shifted = shifted.replace(topics=(topic, *base.topics))
        variant, index = assemble_variant(
            shifted, sp, facts, queries, [move(d, sp) for d in base.distractors]
        )
    conflict = variant.facts[index[-1]]
    meta = {
        "edit": "boundary",
        "query": query,
        "conflict_fact": index[-1],
        "conflict_doc": prev,
        "old_value": list(answer),
        "new_value": list(val),
        "conflict": [conflict.span.start, conflict.span.end],
        "cross_distance": int(variant.queries[query].answer.start - (conflict.span.end - 1)),
    }
    return Pair(base, variant, sp.alignment, meta)


def _redoc(f: Fact, doc: int) -> Fact:
    return dataclasses.replace(f, doc=doc)
