"""insert: a fact is stated at an exact distance before a query."""

from __future__ import annotations

import numpy as np

from synth.edits.common import (
    assemble_variant,
    exact_op,
    get_query,
    moved,
    new_fact,
    query_key,
    splice,
)
from synth.edits.registry import register
from synth.example import Example, Pair, Query
from synth.language import Language


@register("insert", length_changing=True)
def insert(
    base: Example,
    rng: np.random.Generator,
    lang: Language,
    *,
    distance: int,
    query: int = 0,
    value: tuple[int, ...] | None = None,
    same_length: bool = True,
) -> Pair:
    """State the fact `query` asks for so that its last token is exactly `distance` tokens before the
    query's first answer token (in the variant). The value defaults to the query's answer.

    Length-preserving by default: the fact overwrites filler at that place (the removed filler is
    exactly where the fact goes, `distance` from the query; no other token moves), and the place must
    be filler. `same_length=False` inserts the fact there instead. Typically the base comes from
    `make_example(..., supported=False)`; if the query already has a fact, this adds a restatement."""
    q = get_query(base, query)
    entity, attribute = query_key(base, q)
    answer = tuple(int(t) for t in base.tokens[q.answer.start : q.answer.end])
    val = answer if value is None else tuple(int(t) for t in value)
    toks = lang.fact_tokens(entity, attribute, val)
    doc = int(base.doc_ids[q.span.start])
    last = q.answer.start - int(distance)
    if last >= q.span.start:
        raise ValueError(
            f"insert: distance {distance} would put the fact inside the query; use >= {q.answer.start - q.span.start + 1}"
        )
    sp = splice(base, [exact_op(base, toks, last, doc, same_length, "insert")])
    s = sp.starts[0]
    facts, queries, distractors = moved(base, sp)
    facts.append(new_fact(lang, entity, attribute, val, s, doc))
    queries[query] = Query(len(facts) - 1, queries[query].span, queries[query].answer)
    variant, index = assemble_variant(base, sp, facts, queries, distractors)
    assert variant.distance(query) == distance
    meta = {
        "edit": "insert",
        "query": query,
        "fact": index[-1],
        "distance": int(distance),
        "inserted": [s, s + len(toks)],
        "value": list(val),
        "restatement": q.fact >= 0,
    }
    return Pair(base, variant, sp.alignment, meta)
