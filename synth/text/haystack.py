"""Filler of exact token lengths from real text.

A haystack is one long text made of consecutive haystack documents, as the needle-in-a-haystack
test concatenates essays: its documents' words in order, each word a piece (" word", with its
leading space) tokenized on its own. A filler run is a stretch of consecutive pieces whose
tokens add up to exactly the length asked for; the stream wraps from its end to its start. The
words are the documents' own (normalised to single spaces, `synth.text.corpus`), so a run reads
as the haystack does, cut at word boundaries.

`runs(rng, lengths)` gives runs that follow each other in the haystack (the filler of one probe
document reads on across the facts planted in it), skipping a few words only where a multi-token
word would overshoot a length. `document_run` stays inside one haystack document (a text "on
one subject"); `sentences` splits the documents at ., ? and ! for texts of independent
sentences.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from synth import rng as rnd
from synth.text.corpus import Corpus
from synth.text.lexicon import words_of

SEARCH = 256  # start pieces tried for an exact run before giving up
_SENTENCE_END = (".", "?", "!", '."', '?"', '!"', ".)", "?)", "!)")


class HaystackError(ValueError):
    """A haystack too small (or too odd) for what was asked; one line."""


@dataclass(frozen=True, eq=False)
class Haystack:
    words: tuple[str, ...]  # every piece, " word", in order
    lengths: np.ndarray  # (P,) tokens of each piece on its own
    doc_of: np.ndarray  # (P,) the haystack document of each piece
    doc_start: np.ndarray  # (D + 1,) first piece of each document (and P)
    sources: tuple[str, ...]  # each document's source
    sha256: str  # of the corpus it was built from
    vocabulary: frozenset[str] = field(repr=False)  # every lowercase word it holds
    cum: np.ndarray = field(init=False, repr=False)  # (2P + 1,) token offsets, wrapped twice

    def __post_init__(self) -> None:
        c = np.concatenate([[0], np.cumsum(self.lengths)])
        object.__setattr__(self, "cum", np.concatenate([c, c[-1] + c[1:]]).astype(np.int64))

    @classmethod
    def build(cls, corpus: Corpus, tokenizer) -> Haystack:
        words: list[str] = []
        doc_of: list[int] = []
        starts = [0]
        for d, doc in enumerate(corpus.documents):
            ws = [" " + w for w in doc.text.split(" ") if w]
            words += ws
            doc_of += [d] * len(ws)
            starts.append(len(words))
        if not words:
            raise HaystackError("the haystack holds no words")
        lengths = tokenizer.piece_lengths(words)
        vocabulary = frozenset().union(*(words_of(d.text) for d in corpus.documents))
        return cls(
            tuple(words),
            lengths,
            np.asarray(doc_of, dtype=np.int64),
            np.asarray(starts, dtype=np.int64),
            tuple(d.source for d in corpus.documents),
            corpus.sha256,
            vocabulary,
        )

    @property
    def n_pieces(self) -> int:
        return len(self.words)

    @property
    def n_tokens(self) -> int:
        return int(self.cum[self.n_pieces])

    def pieces(self, start: int, end: int) -> list[str]:
        """The pieces [start, end) of the wrapped stream."""
        P = self.n_pieces
        return [self.words[i % P] for i in range(start, end)]

    def piece_lengths(self, start: int, end: int) -> list[int]:
        P = self.n_pieces
        return [int(self.lengths[i % P]) for i in range(start, end)]

    def exact_end(self, start: int, n: int) -> int | None:
        """The end piece of the run of exactly n tokens from `start`, or None."""
        target = self.cum[start] + n
        j = int(np.searchsorted(self.cum, target))
        return (
            j
            if j < len(self.cum) and self.cum[j] == target and j - start <= self.n_pieces
            else None
        )

    def run_from(self, start: int, n: int, limit: int | None = None) -> tuple[int, int]:
        """The first exact run of n tokens starting at `start` or within SEARCH pieces after it
        (before piece `limit` when given)."""
        if n > self.n_tokens:
            raise HaystackError(
                f"a filler of {n:,} tokens is longer than the haystack ({self.n_tokens:,} tokens); "
                "give a larger haystack or shorter distances"
            )
        for i in range(start, start + SEARCH):
            j = self.exact_end(i % self.n_pieces, n)
            if j is not None:
                j = i + (j - i % self.n_pieces)
                if limit is None or j <= limit:
                    return i, j
        raise HaystackError(f"no run of exactly {n:,} tokens in the haystack near piece {start}")

    def runs(self, rng: np.random.Generator, lengths: Sequence[int]) -> list[tuple[int, int]]:
        """Exact runs of the given lengths, one after the other from a random start."""
        cur = rnd.randint(rng, self.n_pieces)
        out = []
        for n in lengths:
            i, j = self.run_from(cur, int(n))
            out.append((i, j))
            cur = j
        return out

    def document_run(
        self, rng: np.random.Generator, n: int, exclude: int = -1
    ) -> tuple[int, int, int]:
        """(doc, start, end): an exact run of n tokens inside one haystack document (not
        `exclude`), the document drawn among those long enough."""
        sizes = self.cum[self.doc_start[1:]] - self.cum[self.doc_start[:-1]]
        fits = [d for d in np.flatnonzero(sizes >= n + 8).tolist() if d != exclude]
        if not fits:
            raise HaystackError(
                f"no haystack document holds {n:,} tokens (the longest: {int(sizes.max()):,}); "
                "give longer haystack documents or a shorter --region/--distance"
            )
        for _ in range(8):
            d = int(rnd.choice(rng, fits))
            lo, hi = int(self.doc_start[d]), int(self.doc_start[d + 1])
            last = int(np.searchsorted(self.cum[: hi + 1], self.cum[hi] - n, side="right")) - 1
            if last >= lo:
                try:
                    i, j = self.run_from(rnd.randrange(rng, lo, last), n, limit=hi)
                    return d, i, j
                except HaystackError:
                    continue
        raise HaystackError(f"no run of exactly {n:,} tokens inside one haystack document")

    def sentences(self) -> list[tuple[int, int]]:
        """Piece ranges [start, end) of the sentences of every document (a sentence ends at a
        word ending in ., ? or !, or at its document's end)."""
        out = []
        for d in range(len(self.sources)):
            lo, hi = int(self.doc_start[d]), int(self.doc_start[d + 1])
            s = lo
            for i in range(lo, hi):
                if self.words[i].endswith(_SENTENCE_END) or i == hi - 1:
                    out.append((s, i + 1))
                    s = i + 1
        return out
