"""What a probe writes real text with: the model's tokenizer, a haystack and the lexicon.

    world = TextWorld(tokenizer, haystack)
    fact = world.fact(entity=3, attribute=1, value=0)     # a Sentence: pieces and token counts

The lexicon is cut to what fits the haystack and the tokenizer: entities and values that share
a word with the haystack are dropped (a value never occurs in its filler), and of the values
left only those of the most common token length under the tokenizer are kept (ties: the
shorter), so every value — and every swap of one value for another — has the same number of
tokens. `values` holds their token ids as the synth language's `values` does (the edits read
it), `vocab` the pad and separator ids and the size.

Facts and queries are `Sentence`s (`Block`s of three pieces (`synth.text.lexicon`)) whose token counts are
those of each piece on its own; `synth.text.compose` lays them out and checks the counts hold
in context. `min_distance`: the shortest fact → answer distance any entity and attribute allow
(the longest query prefix, plus one).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from synth.text.haystack import Haystack, HaystackError
from synth.text.lexicon import VERSION as LEXICON_VERSION
from synth.text.lexicon import Lexicon

MIN_VALUES = 4  # a swap needs a value, another and room to draw around the example's own


ROLES = {"fact": ("fact", "value", "fact"), "query": ("query", "answer", "query")}


@dataclass(frozen=True, eq=False)
class Block:
    """Pieces placed together: a fact, a query, or a run of filler words; each piece's tokens
    on its own and what it is."""

    pieces: tuple[str, ...]
    lengths: tuple[int, ...]
    roles: tuple[str, ...]

    def __len__(self) -> int:
        return sum(self.lengths)


@dataclass(frozen=True, eq=False)
class Sentence(Block):
    """A fact or a query: (before the value, the value, the full stop)."""

    kind: str = "fact"  # "fact" | "query"
    entity: int = 0  # index into world.entities
    attribute: int = 0  # index into world.attributes
    value: int = 0  # index into world.values

    @property
    def value_offset(self) -> int:
        """Tokens before the value (the answer, for a query)."""
        return self.lengths[0]


class TextWorld:
    """The tokenizer, haystack and lexicon of probe texts on real text (module docstring)."""

    def __init__(self, tokenizer, haystack: Haystack, lexicon: Lexicon | None = None):
        self.tokenizer = tokenizer
        self.haystack = haystack
        self.vocab = tokenizer.vocab
        lex = (lexicon or Lexicon.default()).without(haystack.vocabulary)
        ids = tokenizer.encode_pieces([f" {v}" for v in lex.values])
        counts = Counter(len(x) for x in ids)
        if not counts:
            raise HaystackError("every value of the lexicon occurs in the haystack")
        length = min(counts, key=lambda k: (-counts[k], k))
        keep = [i for i, x in enumerate(ids) if len(x) == length]
        if len(keep) < MIN_VALUES:
            raise HaystackError(
                f"only {len(keep)} values of one token length are left once the haystack's words "
                f"are removed; need {MIN_VALUES}"
            )
        if len(lex.entities) < 2:
            raise HaystackError("the haystack holds nearly every entity name of the lexicon")
        self.entities = lex.entities
        self.attributes = lex.attributes
        self.value_words = tuple(lex.values[i] for i in keep)
        self.values: tuple[tuple[int, ...], ...] = tuple(
            tuple(int(t) for t in ids[i]) for i in keep
        )
        self.value_len = length
        prefix = tokenizer.encode_pieces(
            [Lexicon.query(e, a, "x")[0] for e in self.entities for a in self.attributes]
        )
        self.min_distance = max(len(x) for x in prefix) + 1
        self._lengths: dict[str, int] = {}
        self._sentences: list[tuple[int, int]] | None = None

    def length(self, piece: str) -> int:
        """Tokens of one piece on its own (cached)."""
        n = self._lengths.get(piece)
        if n is None:
            n = self._lengths[piece] = len(self.tokenizer.encode_pieces([piece])[0])
        return n

    def sentence(self, kind: str, entity: int, attribute: int, value: int) -> Sentence:
        build = Lexicon.fact if kind == "fact" else Lexicon.query
        pieces = build(self.entities[entity], self.attributes[attribute], self.value_words[value])
        lengths = (self.length(pieces[0]), self.value_len, self.length(pieces[2]))
        return Sentence(pieces, lengths, ROLES[kind], kind, entity, attribute, value)

    def filler(self, start: int, end: int) -> Block:
        """Haystack pieces [start, end) as a block of filler."""
        h = self.haystack
        words = tuple(h.pieces(start, end))
        return Block(words, tuple(h.piece_lengths(start, end)), ("",) * len(words))

    def fact(self, entity: int, attribute: int, value: int) -> Sentence:
        return self.sentence("fact", entity, attribute, value)

    def query(self, entity: int, attribute: int, value: int) -> Sentence:
        return self.sentence("query", entity, attribute, value)

    def sentences(self) -> list[tuple[int, int]]:
        """The haystack's sentences (piece ranges), computed once."""
        if self._sentences is None:
            self._sentences = self.haystack.sentences()
        return self._sentences

    def value_index(self, ids) -> int:
        return self.values.index(tuple(int(t) for t in ids))

    def provenance(self) -> dict[str, Any]:
        """What a run records of the text it wrote."""
        h = self.haystack
        return {
            "tokenizer_sha256": self.tokenizer.sha256,
            "separator": self.tokenizer.separator,
            "separator_id": int(self.vocab.eod_id),
            "haystack_sha256": h.sha256,
            "haystack_documents": len(h.sources),
            "haystack_tokens": h.n_tokens,
            "lexicon_version": LEXICON_VERSION,
            "values": list(self.value_words),
            "value_tokens": self.value_len,
            "entities": len(self.entities),
            "min_distance": self.min_distance,
        }

    def value_pieces(self, value: int) -> str:
        return f" {self.value_words[value]}"
