"""A corpus of real text: files or directories of UTF-8 text → documents.

    corpus = read_corpus(["notes/", "book.txt"], per="file")     # or per="paragraph"

One document per file, or per blank-line-separated block of a file (`per="paragraph"`); a
directory contributes every regular file under it (sorted; names starting with "." skipped).
Each document's text is normalised to its words joined by single spaces: line breaks and runs
of whitespace carry no meaning here, and a text whose pieces are " word" (each with its one
leading space) can be built and cut at word boundaries exactly (`synth.text.render`). In token
space every document is opened by `<eod>`, as in the synthetic language.

Bad input is a `CorpusError` whose one line names the file and what is wrong with it: missing,
binary (a NUL byte), not UTF-8 (with the byte offset), empty (no words), or holding a "word"
longer than `MAX_WORD_CHARS` (data, not prose). Sizes are checked
before anything is read: `corpus_files` lists the files with their sizes, and `read_corpus`
refuses more than `MAX_CORPUS_BYTES`.

The bytes come from `read` (a function of a path), which a caller reading user input gives:
`probes` passes the project's bounded reader (txl.files: a regular file within its size, a FIFO
or a device refused for what it is), which synth may not import. A path given by name that is
neither a directory nor missing (a FIFO, `/dev/zero`) is listed and left to `read` to refuse;
under a directory only regular files are taken. Without `read`, files are read whole.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

MAX_CORPUS_BYTES = 1 << 30  # 1 GiB of text: beyond it, shard the corpus or train elsewhere
# The longest run of characters without a space a text may hold: longer than any word of prose
# (a long URL is a few hundred). A longer run is data (base64, a minified file), and one piece of
# megabytes stalls a BPE's merges or panics the tokenizer's regular expression.
MAX_WORD_CHARS = 4096
_LONG_WORD = re.compile(rf"(?<!\S)\S{{{MAX_WORD_CHARS + 1}}}")  # tried at word starts only
PER = ("file", "paragraph")
_BLANK_LINE = re.compile(r"\n[ \t\r\f\v]*\n")
Reader = Callable[[Path], bytes]  # a file's bytes; ValueError or OSError when it is refused


class CorpusError(ValueError):
    """A corpus that cannot be read as asked; the message is one line naming the file."""


@dataclass(frozen=True)
class Document:
    text: str  # words joined by single spaces
    source: str  # the file, with "#N" for the N-th paragraph (from 1) under per="paragraph"


@dataclass(frozen=True)
class Corpus:
    documents: tuple[Document, ...]
    files: tuple[str, ...]  # the files read, in order
    per: str  # "file" | "paragraph"

    @property
    def sha256(self) -> str:
        """sha256 of the normalised documents in order (what a run records)."""
        return documents_sha256(d.text for d in self.documents)

    @property
    def n_bytes(self) -> int:
        return sum(len(d.text.encode("utf-8")) for d in self.documents)

    def subset(self, keep: Sequence[int]) -> Corpus:
        """The documents at `keep`, in that order."""
        return Corpus(tuple(self.documents[i] for i in keep), self.files, self.per)


def documents_sha256(texts: Iterable[str]) -> str:
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\x00")  # never inside a document: the boundaries count
    return h.hexdigest()


def normalise(text: str) -> str:
    """The words of `text` joined by single spaces."""
    return " ".join(text.split())


def corpus_files(paths: Sequence[str | os.PathLike]) -> list[tuple[Path, int]]:
    """Every file the paths name, with its size in bytes, without reading any (CorpusError
    for a path that does not exist, a directory without files, or more than MAX_CORPUS_BYTES)."""
    if not paths:
        raise CorpusError("no text given; name at least one file or directory")
    out: list[tuple[Path, int]] = []
    for given in paths:
        p = Path(given).expanduser()
        if p.is_dir():
            found = [
                f
                for f in sorted(p.rglob("*"))
                if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts)
            ]
            if not found:
                raise CorpusError(f"{str(given)!r} is a directory without files; give text files")
            out += [(f, f.stat().st_size) for f in found]
        elif p.is_file():
            out.append((p, p.stat().st_size))
        elif p.exists():  # a FIFO, a device: `read` says what it is (its size means nothing)
            out.append((p, 0))
        else:
            raise CorpusError(
                f"{str(given)!r} does not exist; give UTF-8 text files or directories"
            )
    total = sum(size for _, size in out)
    if total > MAX_CORPUS_BYTES:
        raise CorpusError(
            f"the text given holds {total:,} bytes, above the limit of {MAX_CORPUS_BYTES:,}; "
            "give a smaller corpus"
        )
    return out


def read_file(path: Path, read: Reader | None = None) -> str:
    """A file's text (a leading byte-order mark dropped); CorpusError naming it when `read`
    refuses it, or it is binary, not UTF-8 or empty."""
    try:
        data = (read or Path.read_bytes)(path)
    except OSError as e:
        raise CorpusError(
            f"{str(path)!r} cannot be read ({e.strerror}); check its permissions"
        ) from None
    except ValueError as e:  # refused by the caller's reader: its own one line
        raise CorpusError(str(e)) from None
    if b"\x00" in data:
        at = data.index(b"\x00")
        raise CorpusError(
            f"{str(path)!r} is binary (a NUL byte at offset {at:,}); give UTF-8 text files"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise CorpusError(
            f"{str(path)!r} is not UTF-8 (byte {e.start:,}: {e.reason}); convert it to UTF-8"
        ) from None
    if not text.split():
        raise CorpusError(f"{str(path)!r} is empty (no words); remove it or add text")
    long = _LONG_WORD.search(text)
    if long is not None:
        raise CorpusError(
            f"{str(path)!r} holds more than {MAX_WORD_CHARS:,} characters without a space (from "
            f"character {long.start():,}): not prose; remove that part or give text files"
        )
    return text


def split_documents(text: str, source: str, per: str) -> list[Document]:
    """The documents of one file's text: the whole file, or each blank-line-separated block."""
    if per == "file":
        return [Document(normalise(text), source)]
    blocks = _BLANK_LINE.split(text.replace("\r\n", "\n"))
    docs = [normalise(b) for b in blocks]
    return [Document(t, f"{source}#{i}") for i, t in enumerate((t for t in docs if t), start=1)]


def read_corpus(
    paths: Sequence[str | os.PathLike], per: str = "file", read: Reader | None = None
) -> Corpus:
    """The documents of every file the paths name, each read with `read` (module docstring)."""
    if per not in PER:
        raise CorpusError(f"documents per {per!r}: use {' or '.join(PER)}")
    files = corpus_files(paths)
    docs: list[Document] = []
    for path, _ in files:
        docs += split_documents(read_file(path, read), str(path), per)
    return Corpus(tuple(docs), tuple(str(p) for p, _ in files), per)
