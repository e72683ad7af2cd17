"""Fact documents on real text, and the edits of the fact probes.

    base = fact_text(world, rng, [96], lead=20)    # one document: a fact, its query 96 tokens on
    pair = swap_value(world, rng, base)              # fact-swap: the stated value replaced

A fact document is laid out as synth's `make_example` lays one out — `<eod>` (the tokenizer's
separator), `lead` filler tokens, the facts, filler, the queries at the end, `tail` filler
tokens — with haystack filler (`synth.text.compose`). Each query's first answer token is exactly
its distance after its fact's last token (the full stop), in the model's tokens. Within a
document entities are distinct and values token-disjoint where the value list allows (always
distinct). Annotations are synth's: `Fact.entity` and `Fact.attribute` hold indices into the
world's lists (there is no single token naming a multi-token name), `Fact.value` the value's
token ids. `meta["composed"]` keeps the rendering and `meta["blocks"]` which placed block each
fact and query is, for the edits.

Edits are length-preserving and keep every token outside the edit: `swap_value` re-renders the
document with another value of the same token length in the fact (its answer kept: the variant
contradicts it), `rebind_entity` states the same value of another entity (its statement as
long in tokens), `delete_fact` puts a haystack run of the fact's exact length in its place. Each
checks that the re-rendered text differs from the base only inside the edit
(`synth.text.render.mismatch`) and draws again when it does not.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from synth import rng as rnd
from synth.example import Example, Fact, Pair, Query, Span
from synth.text.compose import Composed, DocPlan, Placed, compose
from synth.text.lexicon import Lexicon
from synth.text.render import Misaligned, edited, mismatch
from synth.text.world import TextWorld

REDRAWS = 8  # other values / filler tried for an edit whose text does not match its base


def draw_values(
    world: TextWorld, rng: np.random.Generator, k: int, exclude: Sequence[int] = ()
) -> list[int]:
    """k distinct value indices not in `exclude`, sharing no token with each other or with the
    excluded values where the list allows, else merely distinct."""
    n = len(world.values)
    free = [i for i in rnd.permutation(rng, n).tolist() if i not in set(exclude)]
    if len(free) < k:
        raise ValueError(f"cannot draw {k} values besides {len(exclude)}: the world has {n}")
    out: list[int] = []
    used = {t for i in exclude for t in world.values[i]}
    for i in free:
        if len(out) < k and used.isdisjoint(world.values[i]):
            out.append(i)
            used.update(world.values[i])
    for i in free:  # top up with distinct values when the disjoint ones ran out
        if len(out) < k and i not in out:
            out.append(i)
    return out


def fact_text(
    world: TextWorld,
    rng: np.random.Generator,
    distances: Sequence[int],
    *,
    lead: int,
    tail: int = 2,
    length: int | None = None,
) -> Example:
    """One document with a query per distance, each `distance` tokens after its fact's last token
    (module docstring). ValueError when a distance is shorter than its query allows or the facts
    cannot be laid out without overlapping."""
    n = len(distances)
    if n > len(world.entities):
        raise ValueError(f"{n} facts need distinct entities; the world has {len(world.entities)}")
    ents = [int(e) for e in rnd.sample(rng, range(len(world.entities)), n)]
    attrs = [rnd.randint(rng, len(world.attributes)) for _ in range(n)]
    vals = draw_values(world, rng, n)
    facts = [world.fact(ents[k], attrs[k], vals[k]) for k in range(n)]
    queries = [world.query(ents[k], attrs[k], vals[k]) for k in range(n)]
    for k, d in enumerate(distances):
        if d < queries[k].value_offset + 1:
            raise ValueError(
                f"distance {d} is too short: its query puts {queries[k].value_offset} tokens "
                f"before the answer (distances from {world.min_distance} always fit)"
            )
    for _attempt in range(100):  # queries last, one after the other; facts at their distances
        order = rnd.permutation(rng, n).tolist()
        q_start, end = {}, 0
        for k in reversed(order):
            q_start[k] = end - len(queries[k])
            end = q_start[k]
        f_start = {
            k: q_start[k] + queries[k].value_offset - distances[k] - len(facts[k]) + 1
            for k in range(n)
        }
        spans = sorted(
            [(q_start[k], q_start[k] + len(queries[k])) for k in range(n)]
            + [(f_start[k], f_start[k] + len(facts[k])) for k in range(n)]
        )
        if all(a[1] <= b[0] for a, b in itertools.pairwise(spans)):
            break
    else:
        raise ValueError(f"distances {list(distances)} cannot be laid out without overlapping")
    need = tail - spans[0][0] + 1 + lead
    L = need if length is None else int(length)
    if L < need:
        raise ValueError(f"length {L} is too short for distances {list(distances)}: need {need}")
    off = L - tail
    placed = [Placed(f_start[k] + off, facts[k]) for k in range(n)]
    placed += [Placed(q_start[k] + off, queries[k]) for k in range(n)]
    composed = compose(world, rng, [DocPlan(L, tuple(placed))])
    return composed_example(
        world, composed, [placed], {"kind": "text-facts", "distances": list(distances)}
    )


def composed_example(
    world: TextWorld, composed: Composed, placed: Sequence[Sequence[Placed]], meta: dict
) -> Example:
    """The Example of a composition whose placed blocks (per document) include facts and
    queries: facts in text order, each query pointing at the fact of its entity and attribute in
    its own document (−1: none stated there). `meta["fact_blocks"]`: (doc, block) of each fact."""
    r = composed.rendered

    def blocks(kind: str) -> list[tuple[int, int]]:
        found = [
            (d, k)
            for d, doc in enumerate(placed)
            for k, p in enumerate(doc)
            if getattr(p.block, "kind", "") == kind
        ]
        return sorted(found, key=lambda dk: composed.blocks[dk[0]][dk[1]])

    fact_k, query_k = blocks("fact"), blocks("query")
    facts = tuple(
        Fact(
            placed[d][k].block.entity,
            placed[d][k].block.attribute,
            world.values[placed[d][k].block.value],
            composed.block_span(d, k, 3),
            composed.value_span(d, k),
            d,
        )
        for d, k in fact_k
    )
    by_key = {(f.doc, f.entity, f.attribute): i for i, f in enumerate(facts)}
    queries = tuple(
        Query(
            by_key.get((d, placed[d][k].block.entity, placed[d][k].block.attribute), -1),
            composed.block_span(d, k, 3),
            composed.value_span(d, k),
        )
        for d, k in query_k
    )
    return Example(
        tokens=r.tokens,
        doc_ids=r.doc_ids,
        facts=facts,
        queries=queries,
        topics=(-1,) * len(placed),
        meta={
            **meta,
            "composed": composed,
            "placed": tuple(map(tuple, placed)),
            "fact_blocks": fact_k,
        },
    )


def _stated(base: Example, query: int, edit: str):
    """(the fact's index, the fact, the composition, (doc, block) of the fact) of the query an
    edit of the fact probes works on, which a stated fact must answer."""
    fi = base.queries[query].fact
    if fi < 0:
        raise ValueError(f"{edit} needs a query with a supporting fact")
    return fi, base.facts[fi], base.meta["composed"], base.meta["fact_blocks"][fi]


def swap_value(
    world: TextWorld,
    rng: np.random.Generator,
    base: Example,
    query: int = 0,
) -> Pair:
    """synth's `replace` on real text: the value A of `query`'s fact becomes another value B of
    A's token length (sharing no token with the document's values where possible); the query and
    its answer A are kept. meta as synth's `replace`."""
    fi, f, composed, (d, k) = _stated(base, query, "swap_value")
    piece = composed.blocks[d][k] + 1
    used = [world.value_index(x.value) for x in base.facts]
    for _ in range(REDRAWS):
        new = draw_values(world, rng, 1, exclude=used)[0]
        variant = edited(composed.rendered, world.tokenizer, {piece: world.value_pieces(new)})
        if mismatch(composed.rendered, variant, [f.value_span]) is None:
            break
        used.append(new)
    else:
        raise Misaligned("no value of the same token length leaves the rest of the text unchanged")
    new_ids = world.values[new]
    facts = list(base.facts)
    facts[fi] = Fact(f.entity, f.attribute, new_ids, f.span, f.value_span, f.doc)
    alignment = np.arange(len(base), dtype=np.int64)
    alignment[f.value_span.start : f.value_span.end] = -1
    meta = {
        "edit": "replace",
        "query": query,
        "fact": fi,
        "old_value": list(f.value),
        "new_value": list(new_ids),
        "old_word": world.value_words[world.value_index(f.value)],
        "new_word": world.value_words[new],
        "edited": [f.value_span.start, f.value_span.end],
        "answer": "old",
    }
    out = base.replace(tokens=variant.tokens, facts=tuple(facts), meta={"kind": "text-facts"})
    return Pair(base, out, alignment, meta)


def rebind_entity(
    world: TextWorld,
    rng: np.random.Generator,
    base: Example,
    query: int = 0,
) -> Pair:
    """synth's `rebind` on real text: `query`'s fact bound to another entity (one the document
    never names) whose statement has as many tokens before the value; the value A and the query
    (still asking for the first entity) are kept. meta as synth's `rebind` (entities: world
    indices)."""
    fi, f, composed, (d, k) = _stated(base, query, "rebind_entity")
    piece = composed.blocks[d][k]  # the statement's first piece: everything before the value
    prefix = Span(int(f.span.start), int(f.value_span.start))
    named = {x.entity for x in base.facts} | {
        p.block.entity for doc in base.meta["placed"] for p in doc if hasattr(p.block, "entity")
    }
    attribute = world.attributes[f.attribute]

    def statement(e: int) -> str:
        return Lexicon.fact(world.entities[e], attribute, "x")[0]

    own = world.length(statement(f.entity))
    others = [e for e in range(len(world.entities))
              if e not in named and world.length(statement(e)) == own]  # fmt: skip
    for other in rnd.sample(rng, others, min(REDRAWS, len(others))):
        variant = edited(composed.rendered, world.tokenizer, {piece: statement(other)})
        if mismatch(composed.rendered, variant, [prefix]) is None:
            break
    else:
        raise Misaligned("no other entity's statement has the token length of the fact's")
    facts = list(base.facts)
    facts[fi] = Fact(other, f.attribute, f.value, f.span, f.value_span, f.doc)
    alignment = np.arange(len(base), dtype=np.int64)
    alignment[prefix.start : prefix.end] = -1
    meta = {
        "edit": "rebind",
        "query": query,
        "fact": fi,
        "old_entity": int(f.entity),
        "new_entity": int(other),
        "old_word": world.entities[f.entity],
        "new_word": world.entities[other],
        "edited": [prefix.start, prefix.end],
        "answer": "old",
    }
    out = base.replace(tokens=variant.tokens, facts=tuple(facts), meta={"kind": "text-facts"})
    return Pair(base, out, alignment, meta)


def delete_fact(
    world: TextWorld,
    rng: np.random.Generator,
    base: Example,
    query: int = 0,
) -> Pair:
    """synth's `delete` on real text: `query`'s fact becomes a haystack run of exactly its
    length; its query keeps its answer and gets fact −1. meta as synth's `delete`."""
    fi, f, composed, (d, k) = _stated(base, query, "delete_fact")
    if len(composed.doc_starts) != 1:
        raise ValueError("delete_fact edits one-document texts")
    placed = list(base.meta["placed"][d])
    h = world.haystack
    for _ in range(REDRAWS):
        i, j = h.run_from(rnd.randint(rng, h.n_pieces), len(f.span))
        placed[k] = Placed(placed[k].start, world.filler(i, j))
        plan = DocPlan(len(base), tuple(placed), composed.runs[0])
        try:
            variant = compose(world, rng, [plan]).rendered
        except Misaligned:
            continue
        if mismatch(composed.rendered, variant, [f.span]) is None:
            break
    else:
        raise Misaligned("no filler of the fact's length leaves the rest of the text unchanged")
    facts = tuple(x for n, x in enumerate(base.facts) if n != fi)
    queries = tuple(
        Query(-1 if x.fact == fi else x.fact - (x.fact > fi), x.span, x.answer)
        for x in base.queries
    )
    alignment = np.arange(len(base), dtype=np.int64)
    alignment[f.span.start : f.span.end] = -1
    meta = {
        "edit": "delete",
        "query": query,
        "fact": fi,
        "deleted": [f.span.start, f.span.end],
        "value": list(f.value),
        "filled": True,
    }
    out = base.replace(
        tokens=variant.tokens, facts=facts, queries=queries, meta={"kind": "text-facts"}
    )
    return Pair(base, out, alignment, meta)
