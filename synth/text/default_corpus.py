"""The default corpus: English prose the standard library ships, so nothing is downloaded.

`pydoc_data.topics` holds the text of `help()`'s topics (in Python 3.11: 79 documents, about
465 KB, 65,000 words). Its content changes between Python versions, so whatever uses it records
`python_version()` and the corpus sha256.

It is split once, by name, into training and haystack documents: a topic whose name hashes
(sha256, first byte) to 0 mod 4 is a haystack document (in 3.11: 19 documents, a fifth of the
text), every other one a training document. The split depends on the names only, so a topic keeps its side across Python
versions, and a haystack built from `--haystack default` holds only documents that no model
trained with `--text default` has seen. It is a demo and a test corpus (about 130k BPE tokens),
not a training set to draw conclusions from.
"""

from __future__ import annotations

import hashlib
import platform

from synth.text.corpus import Corpus, Document, normalise

SOURCE = "pydoc_data.topics"
HAYSTACK_EVERY = 4  # one name in four (by hash) is a haystack document


def python_version() -> str:
    return platform.python_version()


def is_haystack_name(name: str) -> bool:
    return hashlib.sha256(name.encode("utf-8")).digest()[0] % HAYSTACK_EVERY == 0


def _topics() -> dict[str, str]:
    from pydoc_data.topics import topics

    return topics


def default_corpus(part: str = "all") -> Corpus:
    """The topics in name order: `part` = "all", "train" or "haystack"."""
    if part not in ("all", "train", "haystack"):
        raise ValueError(f"part {part!r}: use all, train or haystack")
    docs = []
    for name, text in sorted(_topics().items()):
        if part != "all" and is_haystack_name(name) != (part == "haystack"):
            continue
        if text.split():
            docs.append(Document(normalise(text), f"{SOURCE}:{name}"))
    return Corpus(tuple(docs), (SOURCE,), "file")


def provenance(part: str) -> dict:
    """What a run records of the default corpus it used."""
    corpus = default_corpus(part)
    return {
        "source": SOURCE,
        "part": part,
        "python_version": python_version(),
        "documents": len(corpus.documents),
        "sha256": corpus.sha256,
        "all_sha256": default_corpus("all").sha256,
    }
