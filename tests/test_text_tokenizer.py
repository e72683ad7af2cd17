"""synth.text.tokenizer and synth.text.render: the BPE round-trips (as JSON and on text), its
offsets cover the text, a text of word pieces tokenizes to its pieces' own tokens (the junction
rule texts are built on), a tokenizer that merges across pieces is caught, and the two kinds of
tokenizer.json are told apart by content."""

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from text_helpers import require_tokenizers, small_bpe

require_tokenizers()

from synth.language import Language  # noqa: E402
from synth.text.default_corpus import default_corpus  # noqa: E402
from synth.text.render import Misaligned, Piece, render  # noqa: E402
from synth.text.tokenizer import (  # noqa: E402
    TextTokenizer,
    TokenizerError,
    separator_from_dir,
    tokenizer_kind,
    train_bpe,
)

WORDS = default_corpus("haystack").documents[0].text.split(" ")


def test_bpe_round_trips_as_json_and_keeps_pad_and_eod_first():
    tok = small_bpe()
    again = TextTokenizer.from_json(json.loads(json.dumps(tok.to_json())))
    assert again == tok and again.sha256 == tok.sha256
    assert (tok.vocab.pad_id, tok.vocab.eod_id, tok.separator) == (0, 1, "<eod>")
    assert tok.vocab.size <= 512
    docs = [d.text for d in default_corpus("train").documents]
    assert train_bpe(docs, 512).sha256 == tok.sha256  # deterministic
    with pytest.raises(TokenizerError, match="--vocab-size 10"):
        train_bpe(docs, 10)


def test_encode_decode_round_trip_and_offsets_cover_the_text():
    tok = small_bpe()
    text = "<eod> " + " ".join(WORDS[:300]) + " Ünïcödé — ✓"
    ids, offsets = tok.encode(text)
    assert tok.decode(ids) == text
    assert offsets[0, 0] == 0 and offsets[-1, 1] == len(text)
    assert np.all(offsets[1:, 0] >= offsets[:-1, 0])  # in order
    assert ids[0] == tok.vocab.eod_id  # the separator is one special token


@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=40))
def test_a_text_of_word_pieces_tokenizes_to_its_pieces_own_tokens(words):
    tok = small_bpe()
    pieces = [Piece(tok.separator, 0, "eod"), *(Piece(" " + w, 0) for w in words)]
    own = tok.encode_pieces([p.text for p in pieces])
    r = render(tok, pieces, planned=[len(x) for x in own])
    assert np.array_equal(r.tokens, np.concatenate(own))
    for i, p in enumerate(pieces):  # every piece's span decodes to the piece
        s = r.span(i)
        assert tok.decode(r.tokens[s.start : s.end]) == p.text


def test_a_full_stop_after_a_letter_is_a_junction_after_punctuation_it_is_not():
    tok = small_bpe()
    value = [Piece(" walrus", 0, "value"), Piece(".", 0)]  # how a fact ends
    own = [len(x) for x in tok.encode_pieces([p.text for p in value])]
    assert list(np.diff(render(tok, value, planned=own).spans, axis=1)[:, 0]) == own
    with pytest.raises(Misaligned, match="joins piece 0"):  # ".." is one pre-token
        render(tok, [Piece(" methods.", 0), Piece(".", 0)])


def test_a_tokenizer_that_merges_across_pieces_is_caught():
    from tokenizers import Tokenizer, models, trainers

    merging = Tokenizer(models.BPE())  # no pre-tokenizer: merges may cross spaces
    trainer = trainers.BpeTrainer(vocab_size=60, special_tokens=["<eod>"], show_progress=False)
    merging.train_from_iterator([" of the"] * 500, trainer)
    tok = TextTokenizer(json.loads(merging.to_str()))
    assert len(tok.encode(" of the")[0]) == 1
    with pytest.raises(Misaligned, match="joins piece"):
        render(tok, [Piece(" of", 0), Piece(" the", 0)])


def test_synth_and_tokenizers_json_are_told_apart_by_content(tmp_path):
    assert tokenizer_kind(Language.default().to_json()) == "synth"
    assert tokenizer_kind(small_bpe().to_json()) == "tokenizers"
    assert tokenizer_kind({"model": {}}) is None and tokenizer_kind([]) is None
    (tmp_path / "tokenizer.json").write_text(json.dumps(Language.default().to_json()))
    with pytest.raises(TokenizerError, match="is a synth language"):
        TextTokenizer.from_path(tmp_path)


def test_the_separator_is_the_eos_a_directory_names(tmp_path):
    from text_helpers import foreign_bpe

    raw = foreign_bpe()
    (tmp_path / "tokenizer.json").write_text(raw.to_str())
    with pytest.raises(TokenizerError, match="cannot tell the tokenizer's document separator"):
        TextTokenizer.from_path(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|endoftext|>"}))
    assert separator_from_dir(tmp_path) == "<|endoftext|>"
    tok = TextTokenizer.from_path(tmp_path / "tokenizer.json")
    assert tok.separator == "<|endoftext|>" and tok.vocab.eod_id == raw.token_to_id("<|endoftext|>")
    (tmp_path / "tokenizer_config.json").unlink()
    eos = raw.token_to_id("<|endoftext|>")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "eos_token_id": eos}))
    assert separator_from_dir(tmp_path) == "<|endoftext|>"


def test_a_document_opens_with_the_bos_a_directory_names_before_its_eos(tmp_path):
    from text_helpers import foreign_bpe

    from synth.text.tokenizer import special_tokens_from_dir

    raw = foreign_bpe()
    raw.add_special_tokens(["<s>"])
    (tmp_path / "tokenizer.json").write_text(raw.to_str())
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"eos_token": "<|endoftext|>", "bos_token": {"content": "<s>"}})
    )
    assert special_tokens_from_dir(tmp_path) == {"bos": "<s>", "eos": "<|endoftext|>"}
    tok = TextTokenizer.from_path(tmp_path)
    assert tok.separator == "<s>" and tok.vocab.eod_id == raw.token_to_id("<s>")
    # a named bos missing from the vocabulary gives way to the eos
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"eos_token": "<|endoftext|>", "bos_token": "<bos-not-in-vocab>"})
    )
    assert TextTokenizer.from_path(tmp_path).separator == "<|endoftext|>"
    # candidates are taken in order, the first in the vocabulary wins
    data = json.loads(raw.to_str())
    assert TextTokenizer(data, [None, "<nope>", "<s>", "<|endoftext|>"]).separator == "<s>"
