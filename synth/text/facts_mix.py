"""Facts mixed into training documents: the probes' English sentences at word boundaries.

A document chosen to carry facts gets `per_doc` (lo, hi) facts, each "The ATTRIBUTE of ENTITY is
VALUE." inserted at a word boundary and its query "What is the ATTRIBUTE of ENTITY? It is VALUE."
inserted later, at the first word boundary that puts its answer at least a distance drawn from
`distance_bins` (lo, hi, weight) after the fact (or at the document's end): the distance is
whatever it lands at, which is what the model sees. Entities, attributes and values come from the whole lexicon (any token length: the model
learns to copy values, not one length of them); entities and values are distinct within a
document, so a value can only be read from its own fact. Sentence pieces are tokenized on their
own and joined to the document's word pieces, the junctions the probes' texts have.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from synth import rng as rnd
from synth.text.lexicon import Lexicon

DISTANCE_BINS = ((8, 64, 0.4), (64, 256, 0.4), (256, 896, 0.2))


class FactMixer:
    def __init__(
        self,
        tokenizer,
        lexicon: Lexicon | None = None,
        per_doc: tuple[int, int] = (1, 4),
        distance_bins: Sequence[tuple[int, int, float]] = DISTANCE_BINS,
    ):
        lo, hi = (int(x) for x in per_doc)
        if not 1 <= lo <= hi:
            raise ValueError(f"facts per document {per_doc!r}: need 1 <= lo <= hi")
        if not distance_bins or any(not 1 <= a <= b or w < 0 for a, b, w in distance_bins):
            raise ValueError(f"distance bins {distance_bins!r}: need 1 <= lo <= hi, weights >= 0")
        self.tokenizer = tokenizer
        self.lexicon = lexicon or Lexicon.default()
        self.per_doc = (lo, hi)
        self.bins = tuple((int(a), int(b), float(w)) for a, b, w in distance_bins)
        self._cum = rnd.cumulative([w for *_, w in self.bins])
        self._ids: dict[str, np.ndarray] = {}

    def _tokens(self, pieces: tuple[str, ...]) -> tuple[np.ndarray, int]:
        """A sentence's ids and the offset of its value."""
        missing = [p for p in pieces if p not in self._ids]
        for p, ids in zip(missing, self.tokenizer.encode_pieces(missing), strict=True):
            self._ids[p] = ids
        return np.concatenate([self._ids[p] for p in pieces]), len(self._ids[pieces[0]])

    def insert(self, rng: np.random.Generator, tokens: np.ndarray, cuts: np.ndarray) -> np.ndarray:
        """The document's tokens with facts and queries inserted. `cuts`: the token offsets of
        its word boundaries (0 and len(tokens) included)."""
        lex = self.lexicon
        k = min(rnd.randrange(rng, *self.per_doc), len(lex.values), len(lex.entities))
        ents = rnd.sample(rng, range(len(lex.entities)), k)
        vals = rnd.sample(rng, range(len(lex.values)), k)
        inserts: list[tuple[int, int, np.ndarray]] = []  # (cut, order, ids)
        for n, (e, v) in enumerate(zip(ents, vals, strict=True)):
            a = lex.attributes[rnd.randint(rng, len(lex.attributes))]
            ent, val = lex.entities[e], lex.values[v]
            fact, _ = self._tokens(Lexicon.fact(ent, a, val))
            query, at = self._tokens(Lexicon.query(ent, a, val))
            lo, hi, _ = self.bins[rnd.categorical(rng, self._cum)]
            d = rnd.randrange(rng, lo, hi)
            f = int(cuts[rnd.randint(rng, len(cuts))])
            # the answer sits `at` tokens into the query, the fact's last token 1 before f
            want = f + d - at - 1
            q = int(cuts[min(int(np.searchsorted(cuts, want)), len(cuts) - 1)])
            inserts += [(f, 2 * n, fact), (max(q, f), 2 * n + 1, query)]
        inserts.sort(key=lambda x: (x[0], x[1]))
        out, at = [], 0
        for cut, _, ids in inserts:
            out += [tokens[at:cut], ids]
            at = cut
        out.append(tokens[at:])
        return np.concatenate(out).astype(np.int64)
