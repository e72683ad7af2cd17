"""rebind: the queried fact's value stays in the text, bound to another entity."""

from __future__ import annotations

import numpy as np

from synth.edits.common import Op, fresh_entity, moved, splice, supporting_fact
from synth.edits.registry import register
from synth.example import Example, Fact, Pair
from synth.language import FACT_ENTITY_OFFSET, Language


@register("rebind", real="synth.text.facts:rebind_entity")
def rebind(
    base: Example,
    rng: np.random.Generator,
    lang: Language,
    *,
    query: int = 0,
    same_length: bool = True,
) -> Pair:
    """ "the ATTR of ENTITY is A ." becomes "the ATTR of OTHER is A ." (OTHER: an entity the
    example never mentions); the query still asks for ENTITY. The value A stays in the text at
    the same place, so a model that copies "the value in context" loses nothing, while one that
    looks ENTITY up has lost its fact: the part of fact-swap's effect that is keyed lookup.
    Length-preserving (an entity is one token): only that token differs; meta: both entities."""
    if not same_length:
        raise ValueError("rebind replaces one entity token: it always keeps the length")
    _, fi, f = supporting_fact(base, query, "rebind")
    other = fresh_entity(lang, rng, base)
    at = int(f.span.start) + FACT_ENTITY_OFFSET
    if int(base.tokens[at]) != f.entity:
        raise ValueError("rebind: the fact's entity is not where a statement puts it")
    sp = splice(base, [Op(at, at + 1, np.array([other]))])
    facts, queries, distractors = moved(base, sp)
    facts[fi] = Fact(other, f.attribute, f.value, facts[fi].span, facts[fi].value_span, f.doc)
    variant = base.replace(
        tokens=sp.tokens,
        doc_ids=sp.doc_ids,
        facts=tuple(facts),
        queries=tuple(queries),
        distractors=tuple(distractors),
    )
    meta = {
        "edit": "rebind",
        "query": query,
        "fact": fi,
        "old_entity": int(f.entity),
        "new_entity": int(other),
        "edited": [at, at + 1],
        "answer": "old",
    }
    return Pair(base, variant, sp.alignment, meta)
