"""update: the fact is restated later with a new value; the first one is stale."""

from __future__ import annotations

import numpy as np

from synth.edits.common import (
    Op,
    assemble_variant,
    exact_op,
    move,
    move_fact,
    move_query,
    new_fact,
    random_ops,
    replacement_value,
    splice,
    supporting_fact,
)
from synth.edits.registry import register
from synth.example import Example, Pair, Query, Span
from synth.language import Language


@register("update", length_changing=True)
def update(
    base: Example,
    rng: np.random.Generator,
    lang: Language,
    *,
    query: int = 0,
    value: tuple[int, ...] | None = None,
    distance: int | None = None,
    answer: str = "keep",
    same_length: bool = True,
) -> Pair:
    """Restate `query`'s fact with a new value B between the fact and the query: exactly `distance`
    tokens before the first answer token, or at a random place. The query now refers to the update;
    the first statement (value A) is stale.

    answer="keep" (default) leaves the answer tokens A, so base and variant targets stay aligned and a
    probe reads how much the update lowers p(A) (and the contrast log p(A) − log p(B));
    answer="new" writes B as the answer (those tokens become new: alignment −1)."""
    if answer not in ("keep", "new"):
        raise ValueError(f"update: answer must be 'keep' or 'new', got {answer!r}")
    q, fi, f = supporting_fact(base, query, "update")
    old = f.value
    new = replacement_value(lang, rng, base, old, value, same_length, "update")
    toks = lang.fact_tokens(f.entity, f.attribute, new)
    doc = int(base.doc_ids[q.span.start])
    if distance is None:
        ops = random_ops(base, rng, [toks], f.span.end, q.span.start, same_length, "update")
    else:
        last = q.answer.start - int(distance)
        if last - len(toks) + 1 < f.span.end or last >= q.span.start:
            raise ValueError(
                f"update: distance {distance} does not fall between the fact and the query "
                f"(allowed: {q.answer.start - q.span.start + 1}..{q.answer.start - f.span.end - len(toks) + 1})"
            )
        ops = [exact_op(base, toks, last, doc, same_length, "update")]
    if answer == "new":
        ops.append(Op(q.answer.start, q.answer.end, np.array(new)))
    sp = splice(base, ops)
    s = sp.starts[0]
    facts = [move_fact(x, sp) for x in base.facts]
    facts.append(new_fact(lang, f.entity, f.attribute, new, s, doc))
    queries = [move_query(x, sp) if i != query else None for i, x in enumerate(base.queries)]
    qspan_start = int(sp.newpos[q.span.start])
    a0 = sp.starts[1] if answer == "new" else int(sp.newpos[q.answer.start])
    alen = len(new) if answer == "new" else len(q.answer)
    queries[query] = Query(len(facts) - 1, Span(qspan_start, a0 + alen + 1), Span(a0, a0 + alen))
    variant, index = assemble_variant(
        base, sp, facts, queries, [move(d, sp) for d in base.distractors]
    )
    meta = {
        "edit": "update",
        "query": query,
        "stale_fact": index[fi],
        "update_fact": index[-1],
        "old_value": list(old),
        "new_value": list(new),
        "update": [s, s + len(toks)],
        "update_distance": variant.distance(query),
        "answer": "old" if answer == "keep" else "new",
    }
    return Pair(base, variant, sp.alignment, meta)
