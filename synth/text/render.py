"""Pieces of text → token ids, with each piece's tokens found by character offsets.

What probe texts on real text (`compose`, `texts`) and the tokenizer bridge of models with their
own tokenizer (`probes.texts.bridged`) share. A text is a sequence of `Piece`s — filler words,
the parts of a fact or a query, a document's separator — each tagged with its document. `render`
joins their strings, tokenizes the whole string once with offsets and gives every piece the
tokens whose first character lies in it. A token that runs past the end of its piece (the
tokenizer merged across a junction) makes the text `Misaligned`: its annotations would not be
exact, so it is never scored.

Junctions: every piece this project writes starts at a word boundary (a word with its leading
space, or punctuation directly after a word) or is a special token. A byte-level BPE with the
GPT-2 split never merges across such a boundary, so the whole string's tokens are the
concatenation of the pieces' own tokens, and a text built from separately tokenized pieces has
exactly the planned length (`render(..., planned=…)` checks it). Other tokenizers are held to
the same test on every text, and a text that fails it is counted, not used.

A pair (a base and a variant that differ in some pieces) matches when both have the same number
of tokens and every token outside the edit keeps its id and position (`mismatch`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from synth.example import Span


class Misaligned(ValueError):
    """A tokenization that does not respect the pieces' boundaries (or their planned lengths)."""


@dataclass(frozen=True)
class Piece:
    text: str
    doc: int  # the document the piece belongs to (a separator piece opens it)
    role: str = ""  # "" filler, or eod | fact | value | query | answer | … (what it is)


@dataclass(frozen=True, eq=False)
class Rendered:
    """A text tokenized as a whole: its tokens, their doc ids and each piece's token span."""

    pieces: tuple[Piece, ...]
    tokens: np.ndarray  # (N,) int64
    doc_ids: np.ndarray  # (N,) int64: the doc of the piece each token belongs to
    spans: np.ndarray  # (P, 2) int64: token [start, end) of each piece

    def __len__(self) -> int:
        return len(self.tokens)

    def span(self, first: int, last: int | None = None) -> Span:
        """The tokens of pieces first..last (inclusive; default: the one piece)."""
        last = first if last is None else last
        return Span(int(self.spans[first, 0]), int(self.spans[last, 1]))


def render(tokenizer, pieces: Sequence[Piece], planned: Sequence[int] | None = None) -> Rendered:
    """Tokenize the joined pieces and map tokens to pieces by offsets (module docstring).
    `planned`: the token count each piece must have (Misaligned otherwise)."""
    pieces = tuple(pieces)
    lengths = np.fromiter((len(p.text) for p in pieces), dtype=np.int64, count=len(pieces))
    char_end = np.cumsum(lengths)
    ids, offsets = tokenizer.encode("".join(p.text for p in pieces))
    # the piece holding each token's first character (empty pieces hold none)
    owner = np.searchsorted(char_end, offsets[:, 0], side="right")
    if len(ids) and owner.max(initial=0) >= len(pieces):
        raise Misaligned("a token lies past the last piece")
    runs_past = (offsets[:, 1] > char_end[np.minimum(owner, len(pieces) - 1)]) & (
        offsets[:, 1] > offsets[:, 0]
    )
    if runs_past.any():
        t = int(np.flatnonzero(runs_past)[0])
        p = int(owner[t])
        raise Misaligned(
            f"token {t} ({tokenizer.id_to_token(int(ids[t]))!r}) joins piece {p} "
            f"({pieces[p].text[-12:]!r}) to the next ({pieces[p + 1].text[:12]!r})"
        )
    counts = np.bincount(owner, minlength=len(pieces)) if len(ids) else np.zeros(len(pieces), int)
    end = np.cumsum(counts)
    spans = np.stack([end - counts, end], axis=1).astype(np.int64)
    if planned is not None:
        bad = np.flatnonzero(counts != np.asarray(planned, dtype=np.int64))
        if bad.size:
            p = int(bad[0])
            raise Misaligned(
                f"piece {p} ({pieces[p].text[:24]!r}) has {int(counts[p])} tokens in its text, "
                f"{int(planned[p])} on its own"
            )
    docs = np.fromiter((p.doc for p in pieces), dtype=np.int64, count=len(pieces))
    return Rendered(pieces, ids, docs[owner] if len(ids) else ids.copy(), spans)


def edited(rendered: Rendered, tokenizer, changes: Mapping[int, str]) -> Rendered:
    """The same text with the strings of some pieces replaced, rendered again."""
    pieces = [
        Piece(changes[i], p.doc, p.role) if i in changes else p
        for i, p in enumerate(rendered.pieces)
    ]
    return render(tokenizer, pieces)


def mismatch(base: Rendered, variant: Rendered, edited: Iterable[Span]) -> str | None:
    """Why two texts are not a length-preserving pair whose edit is `edited` (token spans of
    the base), or None when they are: the same number of tokens, and the same ids and doc ids
    at every position outside the edit."""
    if len(base) != len(variant):
        return f"the variant has {len(variant)} tokens, the base {len(base)}"
    keep = np.ones(len(base), dtype=bool)
    for span in edited:
        keep[span.start : span.end] = False
    same = (base.tokens == variant.tokens) & (base.doc_ids == variant.doc_ids)
    if not same[keep].all():
        return f"token {int(np.flatnonzero(keep & ~same)[0])} outside the edit changed"
    return None
