"""delete: one stated fact is removed."""

from __future__ import annotations

import numpy as np

from synth.edits.common import Op, move, move_fact, neutral_filler, splice, supporting_fact
from synth.edits.registry import register
from synth.example import Example, Pair, Query
from synth.language import Language


@register("delete", length_changing=True, real="synth.text.facts:delete_fact")
def delete(
    base: Example,
    rng: np.random.Generator,
    lang: Language,
    *,
    query: int = 0,
    fact: int | None = None,
    same_length: bool = True,
) -> Pair:
    """Remove `query`'s fact, or the stated fact `fact` (an index into `base.facts`: one that no
    query needs to refer to, such as an update's stale statement). By default its span becomes
    neutral filler of the same length (the document's topic, continuing the chain), so every other
    token keeps its index; with `same_length=False` the span is cut out and later tokens move up.
    Queries of the deleted fact keep their answer tokens and get `fact=-1`."""
    if fact is None:
        _, fi, f = supporting_fact(base, query, "delete")
    elif 0 <= fact < len(base.facts):
        fi, f = fact, base.facts[fact]
    else:
        raise ValueError(
            f"delete: fact {fact} does not exist: the base has {len(base.facts)} facts"
        )
    s, e = f.span.start, f.span.end
    new = neutral_filler(lang, rng, base, s, e - s) if same_length else np.zeros(0, dtype=np.int64)
    sp = splice(base, [Op(s, e, new)])
    facts = tuple(move_fact(x, sp) for i, x in enumerate(base.facts) if i != fi)
    queries = tuple(
        Query(-1 if x.fact == fi else x.fact - (x.fact > fi), move(x.span, sp), move(x.answer, sp))
        for x in base.queries
    )
    variant = base.replace(
        tokens=sp.tokens,
        doc_ids=sp.doc_ids,
        facts=facts,
        queries=queries,
        distractors=tuple(move(d, sp) for d in base.distractors if d != f.span),
    )
    meta = {
        "edit": "delete",
        "query": query if fact is None else None,
        "fact": fi,
        "deleted": [s, e],
        "value": list(f.value),
        "filled": bool(same_length),
    }
    return Pair(base, variant, sp.alignment, meta)
