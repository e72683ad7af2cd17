"""The synthetic language: vocabulary, filler grammar, topics and the fact/query templates.

Everything is rebuilt deterministically from a small `LanguageConfig` (sizes and a grammar seed).
`Language.to_json()` is what a checkpoint stores as its `tokenizer.json`; `Language.from_json()`
rebuilds the language from it and refuses a file whose fingerprint does not match, so a model and a
probe that speak different languages are stopped with a one-line error.

Templates (token offsets are fixed):

    fact   "the ATTR of ENTITY is VALUE ."        value at offset 5
    query  "? ATTR of ENTITY VALUE ."             answer (the scored targets) at offset 4

A query's answer follows its entity directly, while a fact's value is two tokens after it: reading a
fact back needs a lookup keyed on the entity (and attribute), not a copy of the statement's wording.
(With a separator before the answer, "ENTITY : VALUE", a 2-layer model did not learn to match the
entity within several thousand steps; docs/results.md, "The shipped models".)

Values are shared by all attributes (any value can bind to any attribute), half of them one token
("amber") and half two tokens ("deep amber"); every value has a *near miss*, another value sharing a
token with it. Value tokens never occur in filler, so an answer can only come from a stated fact.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from synth import rng as rnd
from synth.fields import from_fields
from synth.grammar import FillerGrammar
from synth.vocab import EOD, PAD, Vocab

FORMAT = "txl-probes/synth-language"
FORMAT_VERSION = 2  # 2: queries without ":" before the answer
FACT_TEMPLATE = "the {attribute} of {entity} is {value} ."
QUERY_TEMPLATE = "? {attribute} of {entity} {value} ."
FACT_ENTITY_OFFSET = 3  # tokens before the entity in a fact ("the ATTR of ENTITY")
FACT_VALUE_OFFSET = 5  # tokens before the value in a fact
QUERY_ANSWER_OFFSET = 4  # tokens before the answer in a query
MAX_VALUE_TOKENS = 2  # a value is one word or a prefix and a word ("deep amber")
MAX_FACT_TOKENS = FACT_VALUE_OFFSET + MAX_VALUE_TOKENS + 1  # "the ATTR of ENTITY is V1 V2 ."
PUNCT = (".", ",", "?")
FUNCTION_WORDS = ("the", "of", "is")

ATTRIBUTES = (
    "color", "city", "pet", "job", "car", "sport", "food", "hobby", "tool", "song", "game", "drink",
    "plant", "metal", "boat", "book", "gem", "bird", "fish", "dance", "house", "flag", "coin", "star",
    "hat", "lamp", "ship", "road", "tree", "wind", "horn", "bell",
)  # fmt: skip
VALUE_WORDS = (
    "amber", "azure", "birch", "cedar", "coral", "copper", "crimson", "ebony", "ember", "fern",
    "frost", "garnet", "ginger", "hazel", "indigo", "ivory", "jade", "jasper", "lemon", "lilac",
    "maple", "marble", "mint", "navy", "ochre", "olive", "onyx", "opal", "pearl", "pine", "plum",
    "quartz", "raven", "rose", "ruby", "rust", "saffron", "sage", "sand", "scarlet", "silver",
    "slate", "smoke", "stone", "tawny", "teal", "umber", "violet",
)  # fmt: skip
VALUE_PREFIXES = ("deep", "pale", "dark", "light", "old", "new", "north", "south")
_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


@dataclass(frozen=True)
class LanguageConfig:
    """Sizes of the language and its grammar seed; everything else follows from these."""

    n_entities: int = 100  # single-token names ("Kavoru"), the keys of facts
    n_attributes: int = 20  # "color", "city", ...
    n_value_words: int = 30  # one-token values; each also ends one two-token value
    n_value_prefixes: int = 5  # first tokens of the two-token values ("deep amber")
    n_filler: int = 200  # filler words
    n_topics: int = 8
    topic_words: int = 20  # words in each topic's cluster (clusters are disjoint)
    shared_successors: int = 6  # successors of a word in every topic (Zipf-weighted)
    topic_successors: int = 4  # extra successors inside the document topic's cluster
    topic_weight: float = 0.5  # λ: chance that the next filler word comes from the topic cluster
    seed: int = 0  # grammar seed: names, clusters, successor tables

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "topic_weight":
                continue
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"LanguageConfig.{f.name} must be a non-negative int, got {v!r}")
        if self.n_entities < 2 or self.n_attributes < 2 or self.n_topics < 1:
            raise ValueError("a language needs >= 2 entities, >= 2 attributes and >= 1 topic")
        if self.n_value_words < 2 or not 1 <= self.n_value_prefixes <= self.n_value_words:
            raise ValueError(
                f"need n_value_words >= 2 and 1 <= n_value_prefixes <= n_value_words, got "
                f"{self.n_value_words} and {self.n_value_prefixes}"
            )

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LanguageConfig:
        return from_fields(cls, d)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def sha256(self) -> str:
        """sha256 of the config's canonical JSON (probe runs record it beside the fingerprint)."""
        return _sha256(self.to_dict())


class Language:
    """Vocabulary + filler grammar + topics + values, rebuilt exactly from a `LanguageConfig`.

    Token ids: `<pad>` 0, `<eod>` 1, punctuation, function words, attributes, value prefixes, value
    words, entities, filler. `Fact`/`Query` fields hold token ids (entity, attribute, value tuple)."""

    def __init__(self, config: LanguageConfig | None = None):
        self.config = c = config or LanguageConfig()
        g = rnd.make_rng(c.seed, "language")
        reserved = [PAD, EOD, *PUNCT, *FUNCTION_WORDS]
        taken = set(reserved) | set(ATTRIBUTES) | set(VALUE_WORDS) | set(VALUE_PREFIXES)
        attributes = _names(ATTRIBUTES, c.n_attributes, g, taken)
        prefixes = _names(VALUE_PREFIXES, c.n_value_prefixes, g, taken)
        value_words = _names(VALUE_WORDS, c.n_value_words, g, taken)
        entities = [w.capitalize() for w in _pseudo_words(g, c.n_entities, 3, taken)]
        filler = _pseudo_words(g, c.n_filler, 2, taken)
        tokens = [*reserved, *attributes, *prefixes, *value_words, *entities, *filler]
        self.vocab = Vocab(tokens)
        v = self.vocab

        def ids(words: list[str]) -> np.ndarray:
            return np.array([v.id(w) for w in words], dtype=np.int64)

        self.attribute_ids = ids(attributes)
        self.prefix_ids = ids(prefixes)
        self.value_word_ids = ids(value_words)
        self.entity_ids = ids(entities)
        self.filler_ids = ids(filler)
        self.value_token_ids = np.concatenate([self.prefix_ids, self.value_word_ids])
        self.period_id, self.comma_id = v.id("."), v.id(",")
        self.question_id = v.id("?")
        self.the_id, self.of_id, self.is_id = v.id("the"), v.id("of"), v.id("is")

        # Values: every word alone, and once after a prefix (prefixes dealt round-robin over a
        # seeded order of the words), so every value has a near miss sharing a token with it.
        order = rnd.permutation(g, c.n_value_words)
        singles = [(int(w),) for w in self.value_word_ids]
        pairs = [
            (int(self.prefix_ids[k % c.n_value_prefixes]), int(self.value_word_ids[i]))
            for k, i in enumerate(order)
        ]
        self.values: tuple[tuple[int, ...], ...] = tuple(singles + pairs)

        self.grammar = FillerGrammar(
            c.n_filler,
            c.n_topics,
            c.topic_words,
            c.shared_successors,
            c.topic_successors,
            c.topic_weight,
            g,
        )
        self._entity_order = rnd.permutation(g, c.n_entities)

    # ---------------------------------------------------------------- construction and identity

    @classmethod
    def default(cls) -> Language:
        """The language the shipped default model is trained on and the probes use."""
        return _default()

    def to_json(self) -> dict[str, Any]:
        """The checkpoint's `tokenizer.json`: config, templates, tokens, grammar digest, fingerprint."""
        body = self._body()
        return {**body, "fingerprint": _sha256(body)}

    def _body(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "config": self.config.to_dict(),
            "templates": {"fact": FACT_TEMPLATE, "query": QUERY_TEMPLATE},
            "tokens": list(self.vocab.tokens),
            "grammar_sha256": self.grammar.digest(),
        }

    @cached_property
    def fingerprint(self) -> str:
        """sha256 of the canonical JSON of everything `to_json` stores (fingerprint excluded)."""
        return _sha256(self._body())

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Language:
        """Rebuild a language from its JSON; ValueError (one line) if it is not one or does not match."""
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            got = d.get("format") if isinstance(d, dict) else type(d).__name__
            raise ValueError(
                f"tokenizer.json is not a synth language (format {got!r}, expected {FORMAT!r})"
            )
        if d.get("version") != FORMAT_VERSION:
            raise ValueError(
                f"synth language format version {d.get('version')!r} is not supported (this synth reads {FORMAT_VERSION})"
            )
        try:
            lang = cls(LanguageConfig.from_dict(d["config"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"tokenizer.json has an invalid synth language config: {e}") from None
        mine = lang.to_json()
        for key in ("templates", "tokens", "grammar_sha256", "fingerprint"):
            if d.get(key) != mine[key]:
                raise ValueError(
                    f"tokenizer.json does not match the language rebuilt from its config ({key} differs; "
                    f"fingerprint {str(d.get('fingerprint'))[:12]} vs {lang.fingerprint[:12]}): written by another synth version?"
                )
        return lang

    def check_compatible(self, other: dict[str, Any] | Language, what: str = "checkpoint") -> None:
        """Raise ValueError (one line) unless `other` (a language or its JSON) is this language."""
        if isinstance(other, Language):
            fp = other.fingerprint
        elif isinstance(other, dict) and other.get("format") == FORMAT:
            fp = other.get("fingerprint")
        else:
            raise ValueError(
                f"the {what}'s tokenizer is not a synth language: cannot use it with synth text"
            )
        if fp != self.fingerprint:
            raise ValueError(
                f"language mismatch: the {what} was built for synth language {str(fp)[:12]}, but this "
                f"text uses {self.fingerprint[:12]}; build the text with Language.from_json(<the {what}'s tokenizer.json>)"
            )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Language) and other.fingerprint == self.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        c = self.config
        return (
            f"Language(vocab={self.vocab.size}, entities={c.n_entities}, attributes={c.n_attributes}, "
            f"values={len(self.values)}, filler={c.n_filler}, topics={c.n_topics}, fp={self.fingerprint[:12]})"
        )

    # ---------------------------------------------------------------- text

    def encode(self, text: str | list[str]) -> np.ndarray:
        return self.vocab.encode(text)

    def decode(self, ids: Any) -> str:
        return self.vocab.decode(ids)

    @property
    def n_topics(self) -> int:
        return self.config.n_topics

    def fact_tokens(self, entity: int, attribute: int, value: tuple[int, ...]) -> np.ndarray:
        """ "the ATTR of ENTITY is VALUE ." (value at offset FACT_VALUE_OFFSET)."""
        return np.array(
            [self.the_id, attribute, self.of_id, entity, self.is_id, *value, self.period_id],
            dtype=np.int64,
        )

    def query_tokens(self, entity: int, attribute: int, value: tuple[int, ...]) -> np.ndarray:
        """ "? ATTR of ENTITY VALUE ." (answer at offset QUERY_ANSWER_OFFSET)."""
        return np.array(
            [self.question_id, attribute, self.of_id, entity, *value, self.period_id],
            dtype=np.int64,
        )

    def filler_tokens(self, words: np.ndarray) -> np.ndarray:
        """Local filler word indices (what the grammar samples) → token ids."""
        return self.filler_ids[words]

    def filler_word(self, token_ids: np.ndarray) -> np.ndarray:
        """Token ids → local filler word indices (−1 where a token is not filler)."""
        t = np.asarray(token_ids, dtype=np.int64) - int(self.filler_ids[0])
        return np.where((t >= 0) & (t < self.config.n_filler), t, -1)

    def is_value_token(self, token_ids: np.ndarray) -> np.ndarray:
        return np.isin(token_ids, self.value_token_ids)

    def near_misses(self, value: tuple[int, ...]) -> list[tuple[int, ...]]:
        """Other values sharing at least one token with `value` ("amber" ↔ "deep amber")."""
        s = set(value)
        return [v for v in self.values if v != tuple(value) and s & set(v)]

    def entity_pool(self, namespace: str = "train", disjoint: bool = False) -> np.ndarray:
        """Entity token ids a generator may use. With `disjoint`, "train" gets a fixed 80 % of the
        entities and every other namespace ("probe") the other 20 %, so probes can use names the
        model never saw in training."""
        if not disjoint:
            return self.entity_ids
        cut = max(1, (len(self.entity_ids) * 4) // 5)
        order = self.entity_ids[self._entity_order]
        return np.sort(order[:cut] if namespace == "train" else order[cut:])

    # ---------------------------------------------------------------- entropy

    def filler_entropy_rate(self, topic: int | None = None) -> float:
        """Exact conditional entropy rate of the filler in nats/token: H(X_{k+1} | X_k) of the
        stationary chain of `topic` (−1: the topic-free chain of the local-only corpus). With
        `topic=None`, the mean over topics = H(X_{k+1} | X_k, topic): the per-token NLL floor on filler
        of a model that knows the document's topic. See `filler_bigram_entropy` for the topic-blind
        floor."""
        return self.grammar.entropy_rate(topic)

    def filler_bigram_entropy(self) -> float:
        """H(X_{k+1} | X_k) with the topic unknown: the floor of a model seeing one previous word."""
        return self.grammar.bigram_entropy()

    def filler_bayes_nll(self, tokens: np.ndarray, doc_ids: np.ndarray) -> np.ndarray:
        """Per-token NLL (nats) of every filler token of a row under the Bayes predictor that knows
        the grammar but not the topic, each document's filler read as one chain (facts and queries
        between its words skipped); NaN on other tokens. The achievable floor on filler: a model
        must infer the topic from the prefix, so this sits a little above `filler_entropy_rate()`."""
        words = self.filler_word(tokens)
        out = np.full(len(words), np.nan)
        for d in np.unique(doc_ids[words >= 0]):
            at = np.flatnonzero((words >= 0) & (doc_ids == d))
            out[at] = self.grammar.bayes_nll(words[at])
        return out


_DEFAULT: Language | None = None


def _default() -> Language:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Language(LanguageConfig())
    return _DEFAULT


def _sha256(obj: Any) -> str:
    canon = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canon.encode()).hexdigest()


def _names(words: tuple[str, ...], n: int, g: np.random.Generator, taken: set[str]) -> list[str]:
    """The first n of a word list, topped up with pseudo-words if the list is too short."""
    out = list(words[:n])
    if n > len(words):
        out += _pseudo_words(g, n - len(words), 2, taken)
    return out


def _pseudo_words(g: np.random.Generator, n: int, syllables: int, taken: set[str]) -> list[str]:
    """n distinct pronounceable lowercase words of CV syllables (plus an optional final consonant)."""
    out: list[str] = []
    while len(out) < n:
        k = syllables if rnd.randint(g, 2) else syllables - 1 if syllables > 2 else syllables
        w = "".join(rnd.choice(g, _CONSONANTS) + rnd.choice(g, _VOWELS) for _ in range(k))
        if rnd.randint(g, 3) == 0:
            w += rnd.choice(g, _CONSONANTS)
        if w not in taken and w.capitalize() not in taken:
            taken.add(w)
            out.append(w)
    return out
