"""Synthetic language with facts, controlled edits and alignment. numpy and the standard library only.

    from synth import Language, make_example, make_pair, TrainStream, make_rng

    lang = Language.default()
    pair = make_pair("replace", lang, make_rng(3, "probe"), distance=96)
    stream = TrainStream(lang, batch_size=32, tgt_len=64, seed=0)
    tokens, doc_ids = stream.next_batch()          # (32, 65) each

Modules: `language` (vocabulary, grammar, templates, JSON identity), `grammar` (Markov filler and its
entropy), `example` (Span, Fact, Query, Example, Pair), `generate` (examples at exact distances,
local-only corpus), `edits/` (one edit per file, each registered by name), `pairs` (edit name →
pair), `documents` and `stream` (the training stream), `rng` (seed namespaces, version-stable
draws).
"""

from synth.example import Example, Fact, Pair, Query, Span
from synth.generate import make_example, make_local_example
from synth.language import Language, LanguageConfig
from synth.pairs import make_pair
from synth.rng import make_rng, seed_sequence
from synth.stream import StreamBatch, StreamConfig, TrainStream

# Changes whenever a seed would generate other text (language, examples, edits or the training
# stream; tests/test_synth_golden.py pins each version's text). Recorded in every probe run.
# 2: language version 2, queries "? ATTR of ENTITY VALUE ."
# 3: the rebind edit (the value kept, bound to another entity); earlier text unchanged
GENERATOR_VERSION = 3

__all__ = [
    "GENERATOR_VERSION",
    "Example",
    "Fact",
    "Language",
    "LanguageConfig",
    "Pair",
    "Query",
    "Span",
    "StreamBatch",
    "StreamConfig",
    "TrainStream",
    "make_example",
    "make_local_example",
    "make_pair",
    "make_rng",
    "seed_sequence",
]
