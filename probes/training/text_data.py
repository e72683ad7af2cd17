"""`probe train --text`: the corpus, its held-out slice, the BPE and the stream, from the
training config's `data.text` table (opaque to txl).

    data.text = {paths = ["notes/"], documents = "file", vocab_size = 2048,
                 heldout = 0.05, facts = 0.5, facts_per_doc = [1, 4]}

`paths` are files or directories of UTF-8 text (`synth.text.corpus`), or ["default"]: the
training documents of the standard library's pydoc topics (`synth.text.default_corpus`; its
haystack documents are never trained on, and are scored as a second held-out NLL). A share
`heldout` of the documents, chosen by the sha256 of their source names (at least one), is held
out: never in the stream, scored for the held-out NLL. The byte-level BPE is trained on the
other documents (`synth.text.tokenizer.train_bpe`), once: a resumed run reads it back from its
newest checkpoint, so it never changes under a model. `facts`: the share of training documents
given English facts and queries (`synth.text.facts_mix`), so the model can learn lookup on real
text. The table records the corpus sha256 (and for the default corpus the Python version whose
pydoc topics it is); a resume over changed files is refused.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probes.limits import require_memory
from probes.texts.choose import read_text_file
from synth.text.corpus import CorpusError, corpus_files, read_corpus
from synth.text.default_corpus import default_corpus, provenance
from synth.text.facts_mix import FactMixer
from synth.text.tokenizer import TextTokenizer, TokenizerError, tokenizer_kind, train_bpe
from synth.text.train_stream import TextStream, TokenizedDocs
from txl import files
from txl.run_dir import complete_checkpoints

DEFAULTS: dict[str, Any] = {
    "documents": "file",
    "vocab_size": 2048,
    "heldout": 0.05,
    "facts": 0.0,
    "facts_per_doc": [1, 4],
}
KEYS = ("paths", *DEFAULTS, "corpus_sha256", "python_version")
# memory per byte of training text (its words, tokens and the BPE's counts): 28–49 measured on
# 10.5 MB of prose in 10 and 2 files (the pieces encoded a chunk at a time), with a margin
BYTES_FACTOR = 64


def text_table(data: dict[str, Any]) -> dict[str, Any] | None:
    """The `data.text` table completed with its defaults, checked (ValueError, one line), or
    None when the run trains on the synth stream."""
    table = data.get("text")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ValueError(f"bad value for data.text: {table!r}; expected a table")
    other = sorted(k for k in data if k != "text")
    if other:
        raise ValueError(
            f"data.{other[0]} belongs to the synth stream; a run on text (data.text) takes none "
            "(use the text preset, or a config without synth data keys)"
        )
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ValueError(f"unknown key data.text.{unknown[0]}; known: {', '.join(KEYS)}")
    t = {**DEFAULTS, **table}
    paths = t.get("paths")
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and p for p in paths):
        raise ValueError("data.text.paths: give --text with UTF-8 files, directories or 'default'")
    if "default" in paths and len(paths) > 1:
        raise ValueError("--text default stands alone; give it or paths, not both")
    if t["documents"] not in ("file", "paragraph"):
        raise ValueError(f"bad value for data.text.documents: {t['documents']!r}; file | paragraph")
    for key, lo, hi in (("heldout", 0.0, 0.5), ("facts", 0.0, 1.0)):
        v = t[key]
        if isinstance(v, bool) or not isinstance(v, int | float) or not lo <= v <= hi:
            raise ValueError(f"bad value for data.text.{key}: {v!r}; expected {lo} to {hi}")
    v = t["vocab_size"]
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"bad value for data.text.vocab_size: {v!r}; expected an integer")
    f = t["facts_per_doc"]
    if not (isinstance(f, list) and len(f) == 2 and all(isinstance(x, int) for x in f)):
        raise ValueError(f"bad value for data.text.facts_per_doc: {f!r}; expected [lo, hi]")
    return t


def _held_out(sources: list[str], share: float) -> list[bool]:
    """Which documents are held out: those whose source name, relative to the directory all
    the files share, hashes below `share` (at least one, and never all) — so the same files
    give the same split wherever they lie."""
    if len(sources) < 2:
        raise ValueError(
            "the text holds one document; the held-out NLL needs another: give more files or "
            "--documents paragraph"
        )
    files = [s.rsplit("#", 1)[0] if "#" in Path(s).name else s for s in sources]
    root = os.path.commonpath(files) if len(set(files)) > 1 else os.path.dirname(files[0])
    names = [os.path.relpath(f, root) + s[len(f) :] for f, s in zip(files, sources, strict=True)]
    u = [int.from_bytes(hashlib.sha256(s.encode()).digest()[:8], "little") / 2**64 for s in names]
    held = [x < share for x in u]
    if not any(held):
        held[min(range(len(u)), key=u.__getitem__)] = True
    if all(held):
        held[max(range(len(u)), key=u.__getitem__)] = False
    return held


@dataclass(frozen=True, eq=False)
class TextData:
    table: dict[str, Any]
    tokenizer: Any  # synth.text.tokenizer.TextTokenizer
    train: Any  # synth.text.train_stream.TokenizedDocs
    heldout: Any  # synth.text.train_stream.TokenizedDocs
    heldout_corpus: Any  # synth.text.corpus.Corpus (the recall evaluation's haystack)
    haystack: Any  # TokenizedDocs of the default corpus's haystack documents, or None
    provenance: dict[str, Any]

    @property
    def vocab(self):
        return self.tokenizer.vocab

    def to_json(self) -> dict:
        """The checkpoint's tokenizer.json (a tokenizers-format JSON)."""
        return self.tokenizer.to_json()

    def stream(self, tgt_len: int, seed: int, batch_size: int, rank: int, world_size: int):

        facts = float(self.table["facts"])
        mixer = (
            FactMixer(self.tokenizer, per_doc=tuple(self.table["facts_per_doc"])) if facts else None
        )
        return TextStream(
            self.train,
            self.vocab.eod_id,
            batch_size=batch_size,
            tgt_len=tgt_len,
            seed=seed,
            rank=rank,
            world_size=world_size,
            facts=facts,
            mixer=mixer,
            identity={
                "corpus_sha256": self.table["corpus_sha256"],
                "tokenizer_sha256": self.tokenizer.sha256,
            },
        )


def _saved_tokenizer(run_dir: Path):
    """The tokenizer of the run's newest complete checkpoint, or None."""

    if not run_dir.is_dir():
        return None
    for ckpt in complete_checkpoints(run_dir):
        try:
            data = files.read_json(ckpt / "tokenizer.json", "tokenizer")
        except files.FileRefused:
            continue
        if tokenizer_kind(data) == "tokenizers":
            return TextTokenizer(data)
    return None


def load_text(table: dict[str, Any], run_dir: Path, resume: bool) -> TextData:
    """Read the corpus, hold its slice out, train (or on a resume read back) the BPE and
    tokenize; ValueError (one line) for bad input. `table` gains `corpus_sha256`."""

    paths = table["paths"]
    try:
        if paths == ["default"]:
            corpus = default_corpus("train")
            haystack = default_corpus("haystack")
            record = {"text": "default", **provenance("train")}
        else:
            files = corpus_files(paths)
            total = sum(size for _, size in files)
            require_memory(f"the text ({total:,} bytes)", BYTES_FACTOR * total, "give less text")
            corpus = read_corpus(paths, per=table["documents"], read=read_text_file)
            haystack = None
            record = {
                "text": paths,
                "documents_per": table["documents"],
                "files": len(corpus.files),
            }
    except CorpusError as e:
        raise ValueError(f"--text: {e}") from None
    held = _held_out([d.source for d in corpus.documents], float(table["heldout"]))
    train = corpus.subset([i for i, h in enumerate(held) if not h])
    heldout = corpus.subset([i for i, h in enumerate(held) if h])
    sha = corpus.sha256
    if table.get("corpus_sha256") not in (None, sha):
        raise ValueError(
            f"the text changed since the run started (corpus sha256 {sha[:12]}, the run's "
            f"{table['corpus_sha256'][:12]}); resume with the same files or start a new run"
        )
    table["corpus_sha256"] = sha
    if paths == ["default"]:  # the default corpus is the running Python's: say which
        table["python_version"] = record["python_version"]
    try:
        tok = _saved_tokenizer(run_dir) if resume else None
        if tok is None:
            tok = train_bpe((d.text for d in train.documents), int(table["vocab_size"]))
    except TokenizerError as e:
        raise ValueError(str(e)) from None
    return TextData(
        table=table,
        tokenizer=tok,
        train=TokenizedDocs.build([d.text for d in train.documents], tok),
        heldout=TokenizedDocs.build([d.text for d in heldout.documents], tok),
        heldout_corpus=heldout,
        haystack=None
        if haystack is None
        else TokenizedDocs.build([d.text for d in haystack.documents], tok),
        provenance={
            **record,
            "corpus_sha256": sha,
            "documents": len(corpus.documents),
            "train_documents": len(train.documents),
            "heldout_documents": len(heldout.documents),
            "tokenizer_sha256": tok.sha256,
            "vocab_size": tok.vocab.size,
        },
    )
