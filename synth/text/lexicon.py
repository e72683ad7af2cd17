"""English entities, attributes and values, and the two sentences written with them.

    fact   " The ATTRIBUTE of ENTITY is" + " VALUE" + "."
    query  " What is the ATTRIBUTE of ENTITY? It is" + " VALUE" + "."

Each sentence is three pieces (`synth.text.render`): the words before the value, the value with
its leading space, and the final full stop; the query's value is its answer (the scored tokens).
Entities are a first name and a surname ("Ada Lowe"); any value can bind to any attribute, as in
the synthetic language, so the attributes are words that name an arbitrary word (a password, a
code word). Facts are drawn per document: a value can only be read from the text.

`without(words)` drops every entry that shares a word with a text (a haystack), so a value never
occurs in the filler it is planted in; `synth.text.world` then keeps the values of one token
length under the model's tokenizer, so a swapped value keeps every later token in place.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

VERSION = 1  # changes whenever a list or a sentence changes (runs record it)

FACT_PREFIX = " The {attribute} of {entity} is"
QUERY_PREFIX = " What is the {attribute} of {entity}? It is"
SENTENCE_END = "."

FIRST_NAMES = (
    "Ada", "Alma", "Arlo", "Basil", "Bea", "Cara", "Cyril", "Dana", "Della", "Edgar", "Elsa",
    "Enid", "Felix", "Flora", "Gus", "Hattie", "Hugo", "Ida", "Ines", "Jonas", "Kit", "Lena",
    "Lottie", "Mabel", "Milo", "Nell", "Nico", "Olive", "Otto", "Pia", "Quinn", "Rhea",
    "Rufus", "Sadie", "Silas", "Tess", "Theo", "Una", "Vera", "Wanda", "Wes", "Yara", "Zane",
)  # fmt: skip
SURNAMES = (
    "Abbott", "Barlow", "Cotter", "Dunmore", "Ellery", "Farrow", "Gaskell", "Hollis", "Ingram",
    "Jessop", "Kemble", "Lowe", "Marlow", "Nairn", "Orton", "Pembry", "Quayle", "Rook",
    "Sallow", "Thorne", "Upton", "Voss", "Whitlow", "Yarrow", "Ashby", "Brandt", "Corby",
    "Delane", "Egan", "Fenwick", "Garner", "Hale", "Iveson", "Jarvis", "Kirby", "Larkin",
)  # fmt: skip
ATTRIBUTES = (
    "password", "code word", "secret word", "call sign", "nickname", "watchword",
    "pass phrase", "lucky word", "favourite word", "pen name", "stage name", "signal word",
    "pet name", "motto", "safe word", "cipher word",
)  # fmt: skip
VALUES = (
    "walrus", "otter", "badger", "falcon", "heron", "lynx", "panther", "beaver", "bison",
    "camel", "cobra", "coyote", "donkey", "eagle", "ferret", "gazelle", "giraffe", "gorilla",
    "hamster", "hedgehog", "jaguar", "koala", "lemur", "magpie", "meerkat", "moose", "narwhal",
    "ocelot", "ostrich", "owl", "panda", "parrot", "pelican", "penguin", "puffin", "rabbit",
    "raccoon", "raven", "salmon", "sparrow", "squirrel", "swan", "tiger", "toucan", "turtle",
    "weasel", "wolf", "zebra", "apricot", "banana", "cherry", "coconut", "grape", "kiwi",
    "lemon", "lime", "mango", "melon", "olive", "papaya", "peach", "pear", "plum", "quince",
    "raisin", "tangerine", "amber", "azure", "crimson", "indigo", "ivory", "magenta",
    "maroon", "ochre", "scarlet", "teal", "turquoise", "violet", "emerald", "garnet", "jade",
    "opal", "pearl", "ruby", "sapphire", "topaz", "birch", "cedar", "maple", "oak", "willow",
    "cypress", "spruce", "lantern", "meadow", "harbor", "canyon", "glacier", "volcano",
    "prairie", "lagoon", "orchard", "pebble", "thistle", "tulip", "daisy", "lotus", "orchid",
    "acorn", "anchor", "barley", "biscuit", "blossom", "bramble", "candle", "carrot", "clover",
    "comet", "copper", "cricket", "dolphin", "ember", "fennel", "fern", "frost", "ginger",
    "hazel", "honey", "juniper", "kettle", "lilac", "marble", "mint", "mustard", "nutmeg",
    "oyster", "pepper", "pickle", "pumpkin", "saffron", "sage", "thimble", "velvet", "walnut",
)  # fmt: skip

_WORD = re.compile(r"[A-Za-z]+")


def words_of(text: str) -> set[str]:
    """The lowercase letter runs of a text (what `without` compares)."""
    return {w.lower() for w in _WORD.findall(text)}


@dataclass(frozen=True)
class Lexicon:
    entities: tuple[str, ...]
    attributes: tuple[str, ...]
    values: tuple[str, ...]

    @classmethod
    def default(cls) -> Lexicon:
        """Every first name with every surname (in a fixed interleaved order), the attributes
        and the values above."""
        n, m = len(FIRST_NAMES), len(SURNAMES)
        entities = tuple(
            f"{FIRST_NAMES[k % n]} {SURNAMES[(k * 7 + k // n) % m]}" for k in range(n * m)
        )
        return cls(tuple(dict.fromkeys(entities)), ATTRIBUTES, VALUES)

    def without(self, words: Iterable[str]) -> Lexicon:
        """The entries none of whose words occurs in `words` (lowercase)."""
        taken = set(words)

        def keep(items: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(x for x in items if not (words_of(x) & taken))

        return Lexicon(keep(self.entities), self.attributes, keep(self.values))

    @staticmethod
    def fact(entity: str, attribute: str, value: str) -> tuple[str, str, str]:
        """The fact's three pieces: before the value, the value, the full stop."""
        return FACT_PREFIX.format(attribute=attribute, entity=entity), f" {value}", SENTENCE_END

    @staticmethod
    def query(entity: str, attribute: str, value: str) -> tuple[str, str, str]:
        """The query's three pieces; the middle one is the answer."""
        return QUERY_PREFIX.format(attribute=attribute, entity=entity), f" {value}", SENTENCE_END
