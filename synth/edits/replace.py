"""replace: the value of one stated fact is swapped for another value."""

from __future__ import annotations

import numpy as np

from synth.edits.common import (
    Op,
    move,
    move_fact,
    move_query,
    replacement_value,
    splice,
    supporting_fact,
)
from synth.edits.registry import register
from synth.example import Example, Fact, Pair, Span
from synth.language import Language


@register("replace", length_changing=True, real="synth.text.facts:swap_value")
def replace(
    base: Example,
    rng: np.random.Generator,
    lang: Language,
    *,
    query: int = 0,
    value: tuple[int, ...] | None = None,
    same_length: bool = True,
) -> Pair:
    """Swap the value A of `query`'s fact for B; nothing else changes.

    B defaults to a random value sharing no token with any value of the example, of A's token length
    (`same_length=False`: any length, which shifts the tokens after it). The variant keeps the query
    and its answer tokens A (docs/design.md, *Pairs, deltas and exact zeros*): only the stated value becomes B; meta holds both for
    the answer contrast log p(A) − log p(B)."""
    _, fi, f = supporting_fact(base, query, "replace")
    old = f.value
    new = replacement_value(lang, rng, base, old, value, same_length, "replace")
    if value is not None and new == old:
        raise ValueError("replace: the new value equals the old one")
    sp = splice(base, [Op(f.value_span.start, f.value_span.end, np.array(new))])
    s = sp.starts[0]
    facts = [move_fact(x, sp) if i != fi else None for i, x in enumerate(base.facts)]
    span = Span(sp.newpos[f.span.start], s + len(new) + 1)
    facts[fi] = Fact(f.entity, f.attribute, new, span, Span(s, s + len(new)), f.doc)
    variant = base.replace(
        tokens=sp.tokens,
        doc_ids=sp.doc_ids,
        facts=tuple(facts),
        queries=tuple(move_query(x, sp) for x in base.queries),
        distractors=tuple(move(d, sp) for d in base.distractors),
    )
    meta = {
        "edit": "replace",
        "query": query,
        "fact": fi,
        "old_value": list(old),
        "new_value": list(new),
        "edited": [s, s + len(new)],
        "answer": "old",
    }
    return Pair(base, variant, sp.alignment, meta)
