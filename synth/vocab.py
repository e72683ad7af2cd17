"""Word-level vocabulary: one whitespace-free string per token id.

Text is tokens joined by single spaces, so `decode(encode(text)) == text` for any text written in the
vocabulary's words, and `encode(decode(ids)) == ids` for any ids.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PAD = "<pad>"
EOD = "<eod>"


class Vocab:
    """Token strings ↔ ids. Id 0 is `<pad>`, id 1 is `<eod>` (it opens a document)."""

    def __init__(self, tokens: Sequence[str]):
        tokens = tuple(tokens)
        if tokens[:2] != (PAD, EOD):
            raise ValueError(f"a vocabulary starts with {PAD!r}, {EOD!r}; got {tokens[:2]!r}")
        index: dict[str, int] = {}
        for i, t in enumerate(tokens):
            if not t or any(c.isspace() for c in t):
                raise ValueError(f"token {i} is {t!r}: tokens must be non-empty, without spaces")
            if t in index:
                raise ValueError(f"token {t!r} appears twice (ids {index[t]} and {i})")
            index[t] = i
        self.tokens = tokens
        self._index = index
        self.pad_id = 0
        self.eod_id = 1

    @property
    def size(self) -> int:
        return len(self.tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self._index

    def id(self, token: str) -> int:
        """The id of one token string."""
        try:
            return self._index[token]
        except KeyError:
            raise ValueError(f"unknown token {token!r}: not in this vocabulary") from None

    def encode(self, text: str | Sequence[str]) -> np.ndarray:
        """A string (split on whitespace) or a list of token strings → int64 ids."""
        words = text.split() if isinstance(text, str) else list(text)
        return np.fromiter((self.id(w) for w in words), dtype=np.int64, count=len(words))

    def decode(self, ids: Sequence[int] | np.ndarray) -> str:
        """Ids → the tokens joined by single spaces."""
        arr = np.asarray(ids, dtype=np.int64).reshape(-1)
        if arr.size and (arr.min() < 0 or arr.max() >= self.size):
            bad = arr[(arr < 0) | (arr >= self.size)][0]
            raise ValueError(f"token id {int(bad)} is outside this vocabulary (0..{self.size - 1})")
        return " ".join(self.tokens[i] for i in arr.tolist())

    def words(self, ids: Sequence[int] | np.ndarray) -> list[str]:
        """Ids → token strings."""
        return [self.tokens[i] for i in np.asarray(ids, dtype=np.int64).reshape(-1).tolist()]
