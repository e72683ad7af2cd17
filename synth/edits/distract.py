"""distract: misleading statements between a fact and its query."""

from __future__ import annotations

import numpy as np

from synth import rng as rnd
from synth.edits.common import (
    assemble_variant,
    fresh_entity,
    fresh_value,
    get_query,
    moved,
    new_fact,
    query_key,
    random_ops,
    splice,
)
from synth.edits.registry import register
from synth.example import Example, Pair
from synth.language import Language

KINDS = ("same_attribute", "same_entity", "near_miss")


@register("distract", length_changing=True)
def distract(
    base: Example,
    rng: np.random.Generator,
    lang: Language,
    *,
    query: int = 0,
    k: int = 1,
    kind: str = "same_attribute",
    same_length: bool = True,
) -> Pair:
    """Put `k` distractor statements at random places between `query`'s fact and the query (after the
    document start if the query has no fact). Kinds ("mixed": each drawn at random):

    - same_attribute: the same attribute of another entity ("the color of OTHER is B .");
    - same_entity: another attribute of the same entity ("the city of ENTITY is B .");
    - near_miss: the same attribute of another entity with a value sharing a token with the answer
      ("deep amber" for "amber"; it may share tokens with unqueried facts, never with other answers).

    Other values share no token with the example's values. Distractors are added to `facts` and their
    spans to `distractors`; they overwrite filler (or are inserted with `same_length=False`)."""
    if kind not in (*KINDS, "mixed"):
        raise ValueError(f"distract: unknown kind {kind!r}; choose one of {[*KINDS, 'mixed']}")
    if k < 1:
        raise ValueError(f"distract: k must be >= 1, got {k}")
    q = get_query(base, query)
    entity, attribute = query_key(base, q)
    answer = tuple(int(t) for t in base.tokens[q.answer.start : q.answer.end])
    doc = int(base.doc_ids[q.span.start])
    lo = base.facts[q.fact].span.end if q.fact >= 0 else base.doc_span(doc).start + 1
    kinds = [kind if kind != "mixed" else rnd.choice(rng, KINDS) for _ in range(k)]
    stated: list[tuple[int, int, tuple[int, ...]]] = []
    used_tokens: set[int] = set()  # every distractor value so far: fresh values avoid them all
    fresh_tokens: set[int] = set()  # non-near-miss values: near misses may repeat each other
    used_entities: set[int] = set()
    for kd in kinds:
        if kd == "same_entity":
            others = [int(a) for a in lang.attribute_ids if a != attribute]
            e, a = entity, rnd.choice(rng, others)
        else:
            e, a = fresh_entity(lang, rng, base, used_entities), attribute
            used_entities.add(e)
        if kd == "near_miss":
            # Near misses share the answer's tokens by design and may repeat one another (a one-token
            # answer often has a single near miss), so only the other kinds' values block them.
            blocked = _other_answers(base, query) | fresh_tokens
            near = [v for v in lang.near_misses(answer) if not blocked.intersection(v)]
            if not near:
                raise ValueError(
                    "distract: no near-miss value of the answer is free in this example"
                )
            v = rnd.choice(rng, near)
        else:
            v = fresh_value(lang, rng, base, None, exclude=used_tokens)
            fresh_tokens.update(v)
        used_tokens.update(v)
        stated.append((e, a, v))
    blocks = [lang.fact_tokens(e, a, v) for e, a, v in stated]
    ops = random_ops(base, rng, blocks, lo, q.span.start, same_length, "distract")
    sp = splice(base, ops)
    facts, queries, distractors = moved(base, sp)
    new_spans = []
    for (e, a, v), s in zip(stated, sp.starts, strict=True):
        f = new_fact(lang, e, a, v, s, doc)
        facts.append(f)
        new_spans.append(f.span)
    distractors += new_spans
    variant, index = assemble_variant(base, sp, facts, queries, distractors)
    n0 = len(base.facts)
    meta = {
        "edit": "distract",
        "query": query,
        "k": k,
        "kinds": kinds,
        "distractors": [
            {"fact": index[n0 + i], "span": [sp_.start, sp_.end], "kind": kd, "value": list(v)}
            for i, (sp_, kd, (_, _, v)) in enumerate(zip(new_spans, kinds, stated, strict=True))
        ],
    }
    return Pair(base, variant, sp.alignment, meta)


def _other_answers(base: Example, query: int) -> set[int]:
    """Tokens of the other queries' answers: a near miss must not give any of them away."""
    out: set[int] = set()
    for i, q in enumerate(base.queries):
        if i != query:
            out.update(int(t) for t in base.tokens[q.answer.start : q.answer.end])
    return out
