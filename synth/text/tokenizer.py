"""The tokenizer of real text: a byte-level BPE trained with `tokenizers`, or any tokenizer
saved in the tokenizers JSON format (what `tokenizer.json` holds in a transformers directory).

    tok = train_bpe(texts, vocab_size=2048)       # ids: <pad> 0, <eod> 1, then the BPE's
    ids, offsets = tok.encode(" The password of Ada Lowe is walrus.")
    TextTokenizer.from_json(tok.to_json()) == tok # the checkpoint's tokenizer.json, round-tripped

The BPE's pre-tokenizer is byte-level with the GPT-2 split (words with their leading space,
digits, punctuation runs): no merge crosses a word boundary, so a text made of pieces that each
start at a word boundary tokenizes to the concatenation of its pieces' tokens (`render` checks
this on every text it builds, for any tokenizer).

A checkpoint's `tokenizer.json` is either a synth language (`{"format":
"txl-probes/synth-language", …}`) or a tokenizers-format JSON (`{"version": "1.0", "model":
{"type": …}, "added_tokens": […], …}`); `tokenizer_kind` tells them apart by content, without
importing anything. The document separator — the token that opens every document — is the bos
token the model directory names (tokenizer_config.json, special_tokens_map.json or config.json:
`separator_from_dir`), else its eos token, when it is in the vocabulary, else `<eod>` (every BPE
trained here has it, and names neither).

`tokenizers` is imported only when a tokenizer is built (`pip install -e .[text]`). The files
are read with the caller's `read` (a function of a path returning bytes; see synth.text.corpus):
`probes` passes its bounded reader, so a FIFO or an oversized file is refused, never read.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

PAD, EOD = "<pad>", "<eod>"
MIN_VOCAB = 300  # the 256 byte symbols, the two special tokens and a few merges
MAX_VOCAB = 1 << 18
SYNTH_FORMAT = "txl-probes/synth-language"  # synth.language.FORMAT (not imported: no cycle)


class TokenizerError(ValueError):
    """A tokenizer that cannot be built or used as asked; the message is one line."""


def tokenizer_kind(data: Any) -> str | None:
    """ "synth" (a synth language), "tokenizers" (a tokenizers-format JSON) or None."""
    if not isinstance(data, dict):
        return None
    if data.get("format") == SYNTH_FORMAT:
        return "synth"
    model = data.get("model")
    if isinstance(model, dict) and "type" in model and isinstance(data.get("added_tokens"), list):
        return "tokenizers"
    return None


def json_sha256(data: dict) -> str:
    """sha256 of a tokenizer JSON's canonical form (keys sorted, no spaces)."""
    canon = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


def _tokenizers():
    try:
        import tokenizers
    except ImportError:
        raise TokenizerError(
            "real text needs the tokenizers package: pip install -e .[text]"
        ) from None
    return tokenizers


@dataclass(frozen=True)
class TextVocab:
    """What the probes read of a vocabulary (the synth `Vocab` has the same three)."""

    size: int
    pad_id: int
    eod_id: int


class TextTokenizer:
    """A tokenizers-format tokenizer with its document separator (see module docstring)."""

    def __init__(self, data: dict, separator: str | Sequence[str | None] | None = None):
        if tokenizer_kind(data) != "tokenizers":
            raise TokenizerError(
                "not a tokenizers-format tokenizer JSON (no model and added_tokens)"
            )
        tk = _tokenizers()
        try:
            self._tok = tk.Tokenizer.from_str(json.dumps(data))
        except Exception as e:  # tokenizers raises its own exception kinds
            msg = " ".join(str(e).split())[:200]
            raise TokenizerError(f"the tokenizer JSON cannot be loaded ({msg})") from None
        self._data = data
        self.sha256 = json_sha256(data)
        known = self._tok.token_to_id
        wanted = [separator] if separator is None or isinstance(separator, str) else separator
        sep = next((s for s in wanted if s and known(s) is not None), None)
        sep = sep or (EOD if known(EOD) is not None else None)
        if sep is None:
            raise TokenizerError(
                f"cannot tell the tokenizer's document separator: it has no {EOD} and no eos "
                f"or bos token in its vocabulary is named ({wanted!r}); give a tokenizer "
                "directory whose tokenizer_config.json names its eos_token"
            )
        self.separator = sep
        eod = int(self._tok.token_to_id(sep))
        pad = self._tok.token_to_id(PAD)
        self.vocab = TextVocab(
            size=int(self._tok.get_vocab_size(with_added_tokens=True)),
            pad_id=eod if pad is None else int(pad),  # padding is never scored
            eod_id=eod,
        )

    # ------------------------------------------------------------------ identity

    @classmethod
    def from_json(cls, data: dict, separator: str | None = None) -> TextTokenizer:
        return cls(data, separator)

    @classmethod
    def from_path(
        cls,
        path: str | os.PathLike,
        read: Callable[[Path], bytes] | None = None,
        separator: str | Sequence[str | None] | None = None,
    ) -> TextTokenizer:
        """A tokenizer.json file, or a directory holding one, read with `read` (module
        docstring); its separator: the first of `separator` in its vocabulary, by default from
        the files beside it."""
        p = Path(path)
        file = p / "tokenizer.json" if p.is_dir() else p
        if not (file.exists() or file.is_symlink()) or file.is_dir():
            raise TokenizerError(f"{str(path)!r} holds no tokenizer.json")
        try:
            raw = (read or Path.read_bytes)(file)
        except OSError as e:
            raise TokenizerError(f"{str(file)!r} cannot be read ({e.strerror})") from None
        except ValueError as e:  # the reader's refusal (a FIFO, too large): its own one line
            raise TokenizerError(str(e)) from None
        try:
            data = json.loads(raw.decode("utf-8"))
        except ValueError as e:  # not UTF-8, not JSON
            raise TokenizerError(f"{str(file)!r} is not readable JSON ({e})") from None
        kind = tokenizer_kind(data)
        if kind != "tokenizers":
            what = "a synth language" if kind == "synth" else "not a tokenizer JSON"
            raise TokenizerError(f"{str(file)!r} is {what}, not a tokenizers-format tokenizer")
        if separator is None:
            named = special_tokens_from_dir(file.parent, read)
            separator = [named["bos"], named["eos"]]
        return cls(data, separator)

    def to_json(self) -> dict:
        return json.loads(json.dumps(self._data))

    @property
    def fingerprint(self) -> str:
        return self.sha256

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextTokenizer) and other.sha256 == self.sha256

    def __hash__(self) -> int:
        return hash(self.sha256)

    def __repr__(self) -> str:
        return f"TextTokenizer(vocab={self.vocab.size}, separator={self.separator!r}, sha256={self.sha256[:12]})"

    def check_compatible(self, other: Any, what: str = "model") -> None:
        """ValueError (one line) unless `other` (a tokenizer JSON) is this tokenizer."""
        kind = tokenizer_kind(other)
        if kind != "tokenizers":
            reads = "the synth language" if kind == "synth" else "no tokenizer it states"
            raise ValueError(f"the {what} reads {reads}, not this tokenizer ({self.sha256[:12]})")
        if json_sha256(other) != self.sha256:
            raise ValueError(
                f"tokenizer mismatch: the {what}'s tokenizer is {json_sha256(other)[:12]}, this "
                f"text's {self.sha256[:12]}"
            )

    # ------------------------------------------------------------------ text

    def encode(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """(ids, character offsets (N, 2)) of `text`, special tokens matched, none added."""
        enc = self._tok.encode(text, add_special_tokens=False)
        return (
            np.asarray(enc.ids, dtype=np.int64),
            np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2),
        )

    def encode_pieces(self, pieces: Sequence[str]) -> list[np.ndarray]:
        """Each piece tokenized on its own."""
        encs = self._tok.encode_batch(list(pieces), add_special_tokens=False)
        return [np.asarray(e.ids, dtype=np.int64) for e in encs]

    def encode_flat(
        self, pieces: Sequence[str], chunk: int = 4096
    ) -> tuple[np.ndarray, np.ndarray]:
        """(every piece's ids concatenated, int32; the number of tokens of each piece, int64),
        each piece tokenized on its own, `chunk` pieces at a time: a tokenizers Encoding weighs
        about a kilobyte, so the million pieces of a 10 MB text encoded at once held gigabytes
        only to be concatenated or counted."""
        chunks: list[np.ndarray] = []  # one array per chunk, not one per piece
        lengths = np.empty(len(pieces), dtype=np.int64)
        for lo in range(0, len(pieces), chunk):
            encs = self._tok.encode_batch(list(pieces[lo : lo + chunk]), add_special_tokens=False)
            lengths[lo : lo + len(encs)] = [len(e.ids) for e in encs]
            chunks.append(np.fromiter((i for e in encs for i in e.ids), dtype=np.int32))
        return (np.concatenate(chunks) if chunks else np.zeros(0, np.int32)), lengths

    def piece_lengths(self, pieces: Sequence[str]) -> np.ndarray:
        """The number of tokens of each piece on its own (`encode_flat`'s lengths)."""
        return self.encode_flat(pieces)[1]

    def decode(self, ids: Iterable[int]) -> str:
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=False)

    def id_to_token(self, i: int) -> str | None:
        return self._tok.id_to_token(int(i))

    def token_strings(self, ids: Iterable[int]) -> list[str]:
        """What each id reads as in the middle of a text: decoded after a plain token and cut
        after it, so a leading space survives (a decoder strips it at a text's start)."""
        ids = [int(i) for i in ids]
        lead = self._tok.encode("a", add_special_tokens=False).ids[:1]
        head = self.decode(lead)
        out = []
        for i, s in zip(ids, self._tok.decode_batch([[*lead, i] for i in ids], False), strict=True):
            out.append(s[len(head) :] if lead and s.startswith(head) else self.decode([i]))
        return out


def train_bpe(texts: Iterable[str], vocab_size: int, *, min_frequency: int = 2) -> TextTokenizer:
    """A byte-level BPE of at most `vocab_size` tokens (`<pad>` 0, `<eod>` 1, the 256 byte
    symbols, then merges) trained on `texts` (each a document; a leading space is added, as
    every word of a document is written in the stream). Deterministic for the same texts."""
    if not MIN_VOCAB <= vocab_size <= MAX_VOCAB:
        raise TokenizerError(
            f"--vocab-size {vocab_size}: use {MIN_VOCAB:,} to {MAX_VOCAB:,} (the 256 byte symbols "
            "and two special tokens come first)"
        )
    tk = _tokenizers()
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = tk.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=int(vocab_size),
        min_frequency=int(min_frequency),
        special_tokens=[PAD, EOD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator((" " + t for t in texts), trainer)
    return TextTokenizer(json.loads(tok.to_str()))


def _special(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def separator_from_dir(
    directory: str | os.PathLike, read_bytes: Callable[[Path], bytes] | None = None
) -> str | None:
    """The token that opens a document of a model directory: the bos token it names, else its
    eos token (`special_tokens_from_dir`)."""
    named = special_tokens_from_dir(directory, read_bytes)
    return named["bos"] or named["eos"]


def special_tokens_from_dir(
    directory: str | os.PathLike, read_bytes: Callable[[Path], bytes] | None = None
) -> dict[str, str | None]:
    """The bos and eos tokens a model directory names (None where it names none):
    tokenizer_config.json, special_tokens_map.json, then config.json's bos/eos_token_id read in
    tokenizer.json; each file read with `read_bytes` (module docstring), one it refuses taken as
    absent."""
    d = Path(directory)
    found: dict[str, str | None] = {"bos": None, "eos": None}

    def read(name: str) -> dict:
        if not (d / name).exists():
            return {}
        try:
            data = json.loads((read_bytes or Path.read_bytes)(d / name).decode("utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        data = read(name)
        for kind in found:
            found[kind] = found[kind] or _special(data.get(f"{kind}_token"))
    config, tok = read("config.json"), read("tokenizer.json")
    by_id = {
        t.get("id"): t.get("content") for t in tok.get("added_tokens", []) if isinstance(t, dict)
    }
    for kind in found:
        value = config.get(f"{kind}_token_id")
        value = value[0] if isinstance(value, list) and value else value
        if found[kind] is None and isinstance(value, int) and by_id.get(value):
            found[kind] = by_id[value]
    return found
