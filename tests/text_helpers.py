"""What the real-text tests share: the `tokenizers` requirement, a small BPE trained on the
default corpus's training documents, a haystack world and a randomly initialised Transformer-XL
that reads the BPE (a text-trained checkpoint's shape; `probe train --text` is tested on its own).

Without `tokenizers` (the `text` extra) these tests skip; `nox -s tests` and `nox -s hf` install
it and set TXL_REQUIRE_TEXT=1, where a missing package is a failure."""

from __future__ import annotations

import functools
import os

import pytest

REQUIRED = os.environ.get("TXL_REQUIRE_TEXT") == "1"


def require_tokenizers():
    return __import__("tokenizers") if REQUIRED else pytest.importorskip("tokenizers")


@functools.cache
def small_bpe(vocab_size: int = 512):
    from synth.text.default_corpus import default_corpus
    from synth.text.tokenizer import train_bpe

    return train_bpe((d.text for d in default_corpus("train").documents), vocab_size)


@functools.cache
def default_world(vocab_size: int = 512):
    from synth.text.default_corpus import default_corpus
    from synth.text.haystack import Haystack
    from synth.text.world import TextWorld

    tok = small_bpe(vocab_size)
    return TextWorld(tok, Haystack.build(default_corpus("haystack"), tok))


def text_checkpoint(path, *, mem_len: int = 16, tgt_len: int = 16, **kw):
    from probes.testing import tiny_checkpoint

    return tiny_checkpoint(path, tokenizer=small_bpe(), mem_len=mem_len, tgt_len=tgt_len, **kw)


def foreign_bpe(vocab_size: int = 400):
    """A tokenizer of a model's own: byte-level BPE with an end-of-text token and no <eod>."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from synth.text.default_corpus import default_corpus

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator((" " + d.text for d in default_corpus("train").documents), trainer)
    return tok


FOREIGN_EOS = "<|endoftext|>"


def own_tokenizer_llama(path, max_positions: int):
    """A tiny random Llama-style model directory that holds its own tokenizer (`foreign_bpe`,
    eos FOREIGN_EOS) beside its weights. Needs transformers."""
    import transformers

    from probes.testing import tiny_transformers

    raw = foreign_bpe()
    path = tiny_transformers(path, "llama", vocab_size=raw.get_vocab_size(),
                             max_positions=max_positions)  # fmt: skip
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=raw, eos_token=FOREIGN_EOS
    ).save_pretrained(path)
    return path
