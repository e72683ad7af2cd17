"""The texts of cross-doc (probes.library.cross_doc): one pair's arrays — A with its conflicting
fact then B, the same with a foreign A, the positions scored and checked — in the synth
language, on real text, or mapped to a model's own tokens through the tokenizer bridge.

Every array a pair holds is in the scored model's tokens: `conf` (A;B) and `foreign`
(A_foreign;B) of one length with B's tokens at the same positions, `doc_ids`, `fact_end` (A's
fact's last token), `len_a` (B's `<eod>`), `answer` (B's answer), `first` (B's first tokens),
`stale` (A's value V′ in B's answer's tokens, for the contrast), `check` (B's last filler, past
A's layered reach: the beyond-reach check's tokens) and `gap` (fact_end → B's `<eod>`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from probes.api.probe_base import ProbeInputError, RunContext

B_LEAD = 8  # filler tokens between B's <eod> and its fact (at least --first)


@dataclass(frozen=True)
class TextShape:
    """What every pair of one run shares."""

    b_distance: int  # B's own fact → answer distance (synth tokens)
    b_lead: int  # filler between B's <eod> and its fact
    first: int  # B's first tokens scored
    tail: int  # filler after B's query, so that B ends past A's layered reach
    n_check: int  # how many of B's last tokens the beyond-reach check takes
    tail_rng: Any  # the stream B's tail filler is drawn from (not the pair's own rng)


def _texts(ctx: RunContext, shape: TextShape, rng, gap: int):
    """The synth (or real-text) CrossDocTexts at `gap`; None when not aligned in the tokenizer."""
    from synth.edits.prior_doc_conflict import cross_document, extend_b
    from synth.text import contexts
    from synth.text.haystack import HaystackError
    from synth.text.render import Misaligned

    kw = {"b_distance": shape.b_distance, "b_lead": shape.b_lead, "gap": gap,
          "start": (1, ctx.geometry.tgt_len)}  # fmt: skip
    try:  # B ends in `tail` filler past A's reach: on real text haystack text; else from its
        # own stream (the texts before it are the same whatever the tail)
        if ctx.text is not None:
            return contexts.cross_document(ctx.text, rng, tail=shape.tail, **kw)
        texts = cross_document(ctx.lang, rng, **kw)
        return extend_b(texts, shape.tail_rng, ctx.lang, shape.tail)
    except Misaligned:
        return None
    except HaystackError as e:  # what the plan's room check (CrossDoc.plan) did not foresee
        raise ProbeInputError(f"cross-doc: {e}") from None
    except ValueError as e:
        raise ProbeInputError(f"B's fact → answer distance {shape.b_distance}: {e}") from None


def pair_arrays(ctx: RunContext, shape: TextShape, rng, group: int, gap: int) -> dict | None:
    """One pair at `gap` in the synth language or on real text (None: not aligned)."""
    texts = _texts(ctx, shape, rng, gap)
    if texts is None:
        return None
    a_b = texts.conflict
    return {
        "group": group,
        "gap": gap,
        "fact_end": texts.fact_end,
        "len_a": texts.len_a,
        "conf": a_b.tokens,
        "foreign": texts.foreign.tokens,
        "doc_ids": a_b.doc_ids,
        "answer": a_b.queries[0].answer.indices(),
        "first": texts.len_a + 1 + np.arange(shape.first),
        "stale": np.array(texts.stale, dtype=np.int64),
        "check": np.arange(len(a_b) - shape.n_check, len(a_b)),
    }


def bridged_draw(ctx: RunContext, shape: TextShape, rng, group: int, gap: int):
    """The bridge's draw (probes.texts.bridged.Bridge.fit) of a pair at synth gap `gap` in the
    model's tokens: the foreign document's filler is evened to A's model tokens, so B's tokens
    sit at the same positions after either. -> draw() -> (pair, synth gap, gap in model tokens)."""
    from probes.texts.bridged import Unmatched
    from synth.example import Pair

    bridge = ctx.bridge

    def draw():
        texts = _texts(ctx, shape, rng, gap)
        if texts is None:
            raise Unmatched("the texts do not tokenize word by word")
        conf, len_a = texts.conflict, texts.len_a
        alignment = np.arange(len(conf), dtype=np.int64)
        alignment[1:len_a] = -1  # the foreign document's filler
        pair = bridge.fill(Pair(conf, texts.foreign, alignment), rng)
        mapped, rc, _ = bridge.pair(pair)
        answer = conf.queries[0].answer.indices()
        stale = bridge.alternative(conf, rc, answer, texts.stale)
        a = int(rc.spans[len_a, 0])  # B's <eod> in model tokens
        end = int(rc.spans[texts.fact_end, 1]) - 1
        n = len(conf)
        out = {
            "group": group,
            "gap": a - end,
            "synth_gap": gap,
            "fact_end": end,
            "len_a": a,
            "conf": mapped.base.tokens,
            "foreign": mapped.variant.tokens,
            "doc_ids": mapped.base.doc_ids,
            "answer": bridge.positions(rc, answer),
            "first": a + 1 + np.arange(shape.first),
            "stale": np.array(stale, dtype=np.int64),
            "check": bridge.positions(rc, np.arange(n - shape.n_check, n)),
        }
        return out, texts.len_a - texts.fact_end, a - end

    return draw
