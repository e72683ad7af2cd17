"""Table 7: NLL on local-only text — does recurrence help where nothing is far to retrieve?

The paper's One Billion Word is shuffled sentences: no dependency crosses a sentence. Its
analogue here is synth's local-only corpus (independent short sentences of the topic-free
grammar, `synth.generate.make_local_example`), the text of the `boundary` probe. A memory can
give a token only the rest of a sentence that segmentation cut: what recurrence buys here is
boundary repair, not retrieval.

`ROWS` rows of `LENGTH` tokens (one document each), every model streaming at its own training
geometry (the paper's models are evaluated at theirs); scored: every token after the first
`SKIP` (each model's first segment sees the same nothing). One more row evaluates the default
model without a memory: the same weights, so the difference is the memory alone.
Intervals: percentile bootstrap over rows (the same resamples for every model).
"""

from __future__ import annotations

import numpy as np

from probes.api.model import geometry
from synth import rng as rnd
from synth.generate import make_local_example

ROWS = 32
LENGTH = 1025
SKIP = 64
SEED = 7_000_001  # the local-only texts' own seed


def local_text(lang, rows: int = ROWS, length: int = LENGTH):

    rng = rnd.make_rng(SEED, "paper-table7")
    examples = [make_local_example(lang, rng, length) for _ in range(rows)]
    tokens = np.stack([e.tokens for e in examples])
    docs = np.stack([e.doc_ids for e in examples])
    return tokens, docs


def row_nll(lm, tokens, docs, mem_len: int | None = None) -> np.ndarray:
    """(rows,) mean NLL over the scored tokens; `mem_len` replaces the model's own."""

    scored = docs >= 0
    scored[:, : SKIP + 1] = False
    g = lm.default_geometry() if mem_len is None else geometry(lm, mem_len=mem_len)
    r = lm.score(tokens, docs, scored, g)
    out = np.where(scored, r.nll, 0.0).sum(axis=1) / scored.sum(axis=1)
    if not np.all(np.isfinite(out)):
        raise RuntimeError(f"{lm.info.id}: a non-finite NLL")
    return out
