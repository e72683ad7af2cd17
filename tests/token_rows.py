"""Random token rows for the adapter tests: b rows of n tokens below V, one document (or two,
split at `boundary`), every position but the first scored."""

import numpy as np

from synth.language import Language

V = Language.default().vocab.size


def rows(n=48, b=2, boundary=None, seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, V, (b, n))
    docs = np.zeros((b, n), dtype=np.int64)
    if boundary is not None:
        docs[:, boundary:] = 1
    scored = np.ones((b, n), dtype=bool)
    scored[:, 0] = False
    return tokens, docs, scored
