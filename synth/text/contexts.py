"""The other probes' texts on real text: independent sentences (boundary), a previous document
with a conflicting fact (cross-doc), and distant context from another document (topic-shift).

- `sentence_text`: shuffled independent sentences of the haystack, the One Billion Word
  analogue — nothing in it depends on anything beyond its own sentence but what real prose
  shares anyway; cut to an exact number of tokens.
- `contiguous_text`: the haystack as it is, from a random place on, its documents in order (a
  long text read straight through, as a book is; long-nll).
- `cross_document`: document B (a fact, its query `b_distance` later, filler past the end of
  what the model can reach) after a document A that states B's fact with another value, its
  last token `gap` tokens before B's separator; and the same B after a foreign document of A's
  length (haystack text without facts). B's tokens are the same after both.
- `topic_shift`: a document whose first `region` filler tokens are replaced by as many tokens of
  another haystack document's text; everything after them — the document's own text, the fact,
  its query — is the same token for token.
"""

from __future__ import annotations

import numpy as np

from synth import rng as rnd
from synth.edits.prior_doc_conflict import CrossDocument
from synth.example import Example, Pair, Span
from synth.text.compose import DocPlan, Placed, compose
from synth.text.facts import REDRAWS, composed_example, draw_values
from synth.text.haystack import HaystackError
from synth.text.render import Misaligned, Piece, mismatch, render
from synth.text.world import TextWorld


def sentence_text(world: TextWorld, rng: np.random.Generator, length: int) -> Example:
    """One document of exactly `length` tokens: the separator, then haystack sentences drawn at
    random (each whole, in its own words), the last cut where the length ends."""
    h = world.haystack
    sentences = world.sentences()
    pieces = [Piece(world.tokenizer.separator, 0, "eod")]
    planned, total = [1], 1
    while total < length:
        i, j = sentences[rnd.randint(rng, len(sentences))]
        pieces += [Piece(w, 0) for w in h.pieces(i, j)]
        planned += h.piece_lengths(i, j)
        total += int(h.cum[j] - h.cum[i])
    r = render(world.tokenizer, pieces, planned)
    return Example(
        tokens=r.tokens[:length],
        doc_ids=r.doc_ids[:length],
        topics=(-1,),
        meta={"kind": "text-sentences"},
    )


def contiguous_text(world: TextWorld, rng: np.random.Generator, length: int) -> Example:
    """One document of exactly `length` tokens: the separator, then a run of the haystack from
    a random piece on (its documents in order), cut where the length ends."""
    h = world.haystack
    i, j = h.runs(rng, [length - 1])[0]
    pieces = [Piece(world.tokenizer.separator, 0, "eod")]
    pieces += [Piece(w, 0) for w in h.pieces(i, j)]
    r = render(world.tokenizer, pieces, [1, *h.piece_lengths(i, j)])
    return Example(
        tokens=r.tokens[:length],
        doc_ids=np.zeros(length, dtype=r.doc_ids.dtype),
        topics=(-1,),
        meta={"kind": "text-contiguous", "pieces": [i, j]},
    )


def cross_document(
    world: TextWorld,
    rng: np.random.Generator,
    *,
    b_distance: int,
    b_lead: int,
    gap: int,
    start: tuple[int, int],
    tail: int,
) -> CrossDocument:
    """The cross-doc texts (module docstring); `tail` filler tokens end B. ValueError when B's
    distance is shorter than its query allows."""
    e = rnd.randint(rng, len(world.entities))
    a = rnd.randint(rng, len(world.attributes))
    v, stale = draw_values(world, rng, 2)
    fb, qb, fa = world.fact(e, a, v), world.query(e, a, v), world.fact(e, a, stale)
    if b_distance < qb.value_offset + 1:
        raise ValueError(
            f"B's distance {b_distance} is too short on real text: its query puts "
            f"{qb.value_offset} tokens before the answer"
        )
    f_at = 1 + b_lead
    q_at = f_at + len(fb) - 1 + b_distance - qb.value_offset
    b = DocPlan(q_at + len(qb) + tail, (Placed(f_at, fb), Placed(q_at, qb)))
    s = rnd.randrange(rng, *start)
    len_a = s + len(fa) - 1 + gap
    a_doc = DocPlan(len_a, (Placed(s, fa),))
    conflict = compose(world, rng, [a_doc, b])
    b_fixed = DocPlan(b.length, b.placed, conflict.runs[1])
    foreign = compose(world, rng, [DocPlan(len_a), b_fixed])
    if not np.array_equal(conflict.rendered.tokens[len_a:], foreign.rendered.tokens[len_a:]):
        raise Misaligned("B tokenizes differently after A and after the foreign document")
    conf_ex = composed_example(
        world, conflict, [a_doc.placed, b.placed], {"kind": "text-cross-doc"}
    )
    foreign_ex = composed_example(world, foreign, [(), b.placed], {"kind": "text-cross-doc"})
    return CrossDocument(
        conflict=conf_ex,
        foreign=foreign_ex,
        len_a=len_a,
        fact_end=conf_ex.facts[0].span.end - 1,
        stale=world.values[stale],
    )


def topic_shift(
    world: TextWorld,
    rng: np.random.Generator,
    *,
    region: int,
    distance: int,
    window: int,
    fact_distance: int,
) -> Pair:
    """Base: `region` tokens of a haystack document X, then `distance` − 1 + `window` more of
    X's text, a fact, its query `fact_distance` after it, two tokens of filler. Variant: the
    region replaced by `region` tokens of another document Z. meta as synth's topic_shift
    (topics: the haystack document indices)."""
    h = world.haystack
    e = rnd.randint(rng, len(world.entities))
    a = rnd.randint(rng, len(world.attributes))
    (v,) = draw_values(world, rng, 1)
    f, q = world.fact(e, a, v), world.query(e, a, v)
    if fact_distance < q.value_offset + 1:
        raise ValueError(
            f"--fact-distance {fact_distance} is too short on real text: the query puts "
            f"{q.value_offset} tokens before its answer"
        )
    kept = distance - 1 + window
    f_at = 1 + region + kept
    q_at = f_at + len(f) - 1 + fact_distance - q.value_offset
    length = q_at + len(q) + 2
    for _ in range(REDRAWS):
        x, lo, _ = h.document_run(rng, region + kept + 2 * len(f))
        hi = int(h.doc_start[x + 1])
        try:
            r0, r1 = h.run_from(lo, region, limit=hi)
            k0, k1 = h.run_from(r1, kept, limit=hi)
            _, z0, z1 = h.document_run(rng, region, exclude=x)
        except HaystackError:
            continue
        g0, g1 = h.run_from(k1, q_at - (f_at + len(f)))
        t0, t1 = h.run_from(g1, 2)
        runs = ((r0, r0), (k0, k1), (g0, g1), (t0, t1))
        blocks = (Placed(f_at, f), Placed(q_at, q))
        base_plan = DocPlan(length, (Placed(1, world.filler(r0, r1)), *blocks), runs)
        var_plan = DocPlan(length, (Placed(1, world.filler(z0, z1)), *blocks), runs)
        try:
            base = compose(world, rng, [base_plan])
            variant = compose(world, rng, [var_plan])
        except Misaligned:
            continue
        if mismatch(base.rendered, variant.rendered, [Span(1, 1 + region)]) is None:
            break
    else:
        raise Misaligned("no region of another document leaves the rest of the text unchanged")
    placed = [base_plan.placed]
    ex = composed_example(world, base, placed, {"kind": "text-topic-shift"})
    var = ex.replace(tokens=variant.rendered.tokens, meta={"kind": "text-topic-shift"})
    alignment = np.arange(length, dtype=np.int64)
    alignment[1 : 1 + region] = -1
    meta = {
        "edit": "topic_shift",
        "query": 0,
        "old_topic": int(x),
        "new_topic": int(h.doc_of[z0 % h.n_pieces]),
        "old_source": h.sources[x],
        "new_source": h.sources[int(h.doc_of[z0 % h.n_pieces])],
        "region": [1, 1 + region],
        "kept": [1 + region, int(ex.queries[0].answer.start)],
        "n_replaced": region,
    }
    return Pair(ex, var, alignment, meta)
