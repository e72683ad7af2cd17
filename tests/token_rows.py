"""Random token rows for the adapter tests: b rows of n tokens below V, one document (or two,
split at `boundary`), every position but the first scored; and fact-swap units as the paired
engine declares them."""

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


def fact_swap_units(lengths, vocab=V, seed=0, width=44):
    """Rows of fact-swap units as the paired engine declares them: per unit a base (scored from
    12), its variant (identical here; forked at 10, or related with nothing shared at odd
    units), and each with another answer token at its last position (forked there)."""
    rng = np.random.default_rng(seed)
    tokens, docs, scored, parent, shared = [], [], [], [], []
    for u, n in enumerate(lengths):
        text = rng.integers(0, vocab, width)
        alt = text.copy()
        alt[n - 1] = (alt[n - 1] + 1) % vocab
        doc = np.where(np.arange(width) < n, 0, -1)
        body = (np.arange(width) >= 12) & (doc >= 0)
        answer = np.arange(width) == n - 1
        for row, up, at, sc in ((text, -1, 0, body), (text, 4 * u, 10 * (u % 2 == 0), body),
                                (alt, 4 * u, n - 1, answer), (alt, 4 * u + 1, n - 1, answer)):  # fmt: skip
            tokens.append(row)
            docs.append(doc)
            scored.append(sc)
            parent.append(up)
            shared.append(at)
    return (np.stack(tokens), np.stack(docs), np.stack(scored), np.array(parent),
            np.array(shared))  # fmt: skip
