"""The texts of cross-doc (probes.library.cross_doc) as one pair's arrays — A with its conflicting
fact then B, the same with a foreign A, the positions scored and checked — whichever texts the
run writes (`Texts.cross_doc_pair`): synth ids, real text, or synth text mapped to a model's own
tokens through the tokenizer bridge (`BridgedTexts.cross_doc_pair`).

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

from synth.edits.prior_doc_conflict import CrossDocument

B_LEAD = 8  # filler tokens between B's <eod> and its fact (at least --first)


@dataclass(frozen=True)
class TextShape:
    """What every pair of one run shares."""

    b_distance: int  # B's own fact → answer distance (as the texts are drawn)
    b_lead: int  # filler between B's <eod> and its fact
    first: int  # B's first tokens scored
    tail: int  # filler after B's query, so that B ends past A's layered reach
    n_check: int  # how many of B's last tokens the beyond-reach check takes
    tail_rng: Any  # the stream B's tail filler is drawn from (not the pair's own rng)
    a_start: tuple[int, int]  # where A's fact starts: drawn in [lo, hi)


def cross_doc_arrays(texts: CrossDocument, shape: TextShape, group: int, gap: int) -> dict:
    """One pair at `gap`, its texts written in the model's tokens (synth ids or real text)."""
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
