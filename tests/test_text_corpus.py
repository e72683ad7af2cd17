"""synth.text.corpus and the default corpus: documents per file or per paragraph, normalised;
every bad file named in one line; the default corpus's training and haystack documents apart.
Standard library only (no tokenizers)."""

import pytest

from synth.text.corpus import CorpusError, corpus_files, read_corpus
from synth.text.default_corpus import default_corpus, is_haystack_name, provenance


def test_one_document_per_file_or_per_blank_line_block_words_joined_by_single_spaces(tmp_path):
    (tmp_path / "a.txt").write_text("One  two\nthree.\n\n\n  Four\tfive.\n", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.md").write_text("\ufeffSix seven.\r\n\r\nEight.", encoding="utf-8")
    (tmp_path / ".hidden").write_text("never read", encoding="utf-8")
    per_file = read_corpus([tmp_path])
    assert [d.text for d in per_file.documents] == [
        "One two three. Four five.",
        "Six seven. Eight.",
    ]
    per_block = read_corpus([tmp_path], per="paragraph")
    assert [d.text for d in per_block.documents] == [
        "One two three.", "Four five.", "Six seven.", "Eight.",
    ]  # fmt: skip
    assert per_block.documents[1].source.endswith("a.txt#2")
    assert per_file.sha256 != per_block.sha256 and per_file.sha256 == read_corpus([tmp_path]).sha256


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"text\x00more", "is binary (a NUL byte at offset 4"),
        (b"caf\xe9 au lait", "is not UTF-8 (byte 3"),
        (b" \n\t\n", "is empty"),
    ],
)
def test_a_bad_file_is_named_in_one_line(tmp_path, content, needle):
    (tmp_path / "good.txt").write_text("fine words", encoding="utf-8")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    with pytest.raises(CorpusError) as e:
        read_corpus([tmp_path])
    msg = str(e.value)
    assert needle in msg and "bad.txt" in msg and "\n" not in msg


def test_missing_paths_and_empty_directories_are_refused_before_reading(tmp_path):
    (tmp_path / "empty").mkdir()
    for paths, needle in (
        ([tmp_path / "none"], "does not exist"),
        ([tmp_path / "empty"], "without files"),
        ([], "no text"),
    ):
        with pytest.raises(CorpusError, match=needle):
            corpus_files(paths)
    with pytest.raises(CorpusError, match="use file or paragraph"):
        read_corpus([tmp_path], per="line")


def test_default_corpus_splits_training_and_haystack_documents_by_name():
    train, haystack, every = (default_corpus(p) for p in ("train", "haystack", "all"))
    names = {
        p: {d.source for d in c.documents} for p, c in (("t", train), ("h", haystack), ("a", every))
    }
    assert names["t"].isdisjoint(names["h"]) and names["t"] | names["h"] == names["a"]
    assert all(is_haystack_name(s.split(":", 1)[1]) for s in names["h"])
    assert 0.1 < haystack.n_bytes / every.n_bytes < 0.4  # a usable haystack, most text to train on
    record = provenance("haystack")
    assert record["python_version"] and record["sha256"] == haystack.sha256
    assert record["documents"] == len(haystack.documents)
