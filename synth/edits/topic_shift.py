"""topic-shift: distant filler replaced by another topic's filler; facts and queries untouched."""

from __future__ import annotations

import numpy as np

from synth import rng as rnd
from synth.edits.common import doc_topic, get_query
from synth.edits.registry import register
from synth.example import Example, Pair
from synth.generate import filler
from synth.language import Language


@register("topic-shift")
def topic_shift(
    base: Example,
    rng: np.random.Generator,
    lang: Language,
    *,
    query: int = 0,
    keep: int = 64,
    topic: int | None = None,
    same_length: bool = True,
) -> Pair:
    """Replace every filler token of `query`'s document that lies more than `keep` tokens before the
    query's first answer token with filler of another topic (one chain through those positions).
    Facts, queries, distractors and the `keep` most recent tokens are untouched; length never changes.

    meta: "region" [doc start + 1, answer − keep) (replaced filler inside it), "kept" [answer − keep,
    answer) and the old and new topics. A topic-adapting model predicts the kept filler worse in the
    variant. `topics` keeps the document's own (recent) topic."""
    if not same_length:
        raise ValueError("topic_shift always keeps the length; it has no length-changing mode")
    q = get_query(base, query)
    doc = int(base.doc_ids[q.span.start])
    old = doc_topic(base, doc)
    if topic is None:
        others = [t for t in range(lang.n_topics) if t != old]
        if not others:
            raise ValueError("topic_shift: the language has a single topic")
        topic = rnd.choice(rng, others)
    elif topic == old or not 0 <= topic < lang.n_topics:
        raise ValueError(
            f"topic_shift: topic must differ from the document's ({old}) and lie in 0..{lang.n_topics - 1}, got {topic}"
        )
    lo = base.doc_span(doc).start + 1
    hi = q.answer.start - int(keep)
    if hi <= lo:
        raise ValueError(
            f"topic_shift: keep={keep} leaves no distant filler before the query (answer at {q.answer.start})"
        )
    region = np.zeros(len(base), dtype=bool)
    region[lo:hi] = True
    pos = np.flatnonzero(region & base.filler_mask())
    tokens = base.tokens.copy()
    tokens[pos] = filler(lang, rng, len(pos), int(topic))
    alignment = np.arange(len(base), dtype=np.int64)
    alignment[pos] = -1
    variant = base.replace(tokens=tokens)
    meta = {
        "edit": "topic_shift",
        "query": query,
        "old_topic": int(old),
        "new_topic": int(topic),
        "region": [lo, hi],
        "kept": [hi, q.answer.start],
        "n_replaced": len(pos),
    }
    return Pair(base, variant, alignment, meta)
