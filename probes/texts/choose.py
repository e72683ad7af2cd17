"""Which vocabulary a model reads (`--tokenizer`), and the real text a probe writes in
(`--haystack`). Bad input raises ProbeInputError (one line) before anything is written.

A model reads the synth language's ids directly, or its own tokenizer's:

- `auto` (the default) decides by the content of the tokenizer JSON the model states (a
  Transformer-XL checkpoint's tokenizer.json; a transformers directory's tokenizer.json, the same
  file name): a synth language (`{"format": "txl-probes/synth-language"}`: every checkpoint this
  project trains on the synthetic language, Transformer-XL or transformers) → synth ids; a
  tokenizers-format JSON (a checkpoint trained with `probe train --text`, or a model with a
  tokenizer of its own; a GGUF file's, converted by transformers) → that tokenizer; none → synth
  ids only for a transformers model whose vocabulary is exactly the synth language's (run.json's
  `vocabulary.note` says it was assumed), refused for any other (`stateless_vocabulary`);
- `synth` says the model reads synth ids whatever its directory holds (a model trained on synth
  ids beside a tokenizer.json of another kind);
- a path (a tokenizer.json, or a directory holding one) says the model reads that tokenizer's ids.

With a tokenizer, synthetic probes go through the tokenizer bridge (`probes.texts.bridged`), and
`--haystack` writes real text with it (`synth.text.world`). The token that opens every document
(the separator) is the model's own: `--opening-token` when given, else the bos token the model
names (its directory's files, a GGUF file's metadata), else its eos token — each only when the
vocabulary has it — else `<eod>` (every BPE trained here has it and names neither); run.json's
`vocabulary` records it (`opening_token`, `opening_token_id`, `opening_from`). No torch.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probes.api.probe_base import ProbeInputError, ProbeNotApplicable
from probes.limits import LimitError, require_memory
from probes.texts.base import Texts
from probes.texts.bridged import Bridge, BridgedTexts
from probes.texts.haystack import HaystackTexts
from probes.texts.synth_ids import SynthTexts
from synth.language import Language
from synth.text.corpus import CorpusError, corpus_files, read_corpus
from synth.text.default_corpus import default_corpus, provenance
from synth.text.haystack import Haystack, HaystackError
from synth.text.tokenizer import (
    TextTokenizer,
    TokenizerError,
    json_sha256,
    special_tokens_from_dir,
    tokenizer_kind,
)
from synth.text.world import TextWorld
from txl import files

# memory per byte of haystack text (its words, their token counts): 28–30 measured on 10.5 MB
# of prose with a 512-token BPE (the pieces encoded a chunk at a time), with a margin
HAYSTACK_BYTES_FACTOR = 48


@dataclass(frozen=True)
class Vocabulary:
    reads: str  # "synth" | "tokenizer"
    tokenizer: Any = None  # synth.text.tokenizer.TextTokenizer when reads == "tokenizer"
    origin: str = ""  # where the tokenizer came from
    opening_from: str = ""  # "bos" | "eos" | "<eod>" | "--opening-token"
    note: str = ""  # what was assumed about a model that states no tokenizer

    def record(self) -> dict[str, Any]:
        if self.tokenizer is None:
            return {"reads": self.reads, **({"note": self.note} if self.note else {})}
        t = self.tokenizer
        return {
            "reads": self.reads,
            "origin": self.origin,
            "tokenizer_sha256": t.sha256,
            "tokenizer_size": t.vocab.size,
            "separator": t.separator,
            "separator_id": int(t.vocab.eod_id),
            "opening_token": t.separator,
            "opening_token_id": int(t.vocab.eod_id),
            "opening_from": self.opening_from,
        }


def special_tokens(lm: Any, tokenizer_dir: Path | None) -> dict[str, str | None]:
    """The bos and eos tokens a model names: a GGUF model's from its file (the adapter's
    `special_tokens`), a directory's from its files (`--tokenizer PATH`: that tokenizer's)."""

    if tokenizer_dir is None:
        named = getattr(lm, "special_tokens", None)
        if isinstance(named, dict):
            return {"bos": named.get("bos"), "eos": named.get("eos")}
        path = Path(lm.info.path)
        tokenizer_dir = path if path.is_dir() else None
    if tokenizer_dir is None:
        return {"bos": None, "eos": None}
    return special_tokens_from_dir(tokenizer_dir, read_json_file)


def model_vocabulary(
    lm: Any, choice: str | None, where: str, opening: str | None = None
) -> Vocabulary:
    """What `lm` reads under `--tokenizer choice` (module docstring), every document opened by
    `opening` (--opening-token) or else the model's bos, else its eos, else `<eod>`."""

    choice = (choice or "auto").strip()
    if choice == "synth":
        return Vocabulary("synth")
    try:
        if choice == "auto":
            data = getattr(lm, "tokenizer", None)
            if tokenizer_kind(data) != "tokenizers":
                return Vocabulary("synth")
            named = special_tokens(lm, None)
            origin = getattr(lm, "tokenizer_origin", None) or f"{where}/tokenizer.json"
        else:
            path = Path(choice).expanduser()
            named = special_tokens(lm, path if path.is_dir() else path.parent)
            origin = str(path.resolve())
        wanted = [opening, named["bos"], named["eos"]]  # an opening not in it: refused below
        tok = (
            TextTokenizer(data, wanted)
            if choice == "auto"
            else TextTokenizer.from_path(path, read_tokenizer_file, separator=wanted)
        )
    except TokenizerError as e:
        opt = "--model" if choice == "auto" else "--tokenizer"
        raise ProbeInputError(f"{opt} {where if choice == 'auto' else choice!r}: {e}") from None
    if opening and tok.separator != opening:
        raise ProbeInputError(
            f"--opening-token {opening!r} is not a token of the tokenizer model {where!r} reads; "
            f"give one of its tokens (its bos {named['bos']!r}, its eos {named['eos']!r})"
        )
    opening_from = (
        "--opening-token"
        if opening
        else next((k for k in ("bos", "eos") if named[k] == tok.separator), tok.separator)
    )
    stated = getattr(lm, "tokenizer", None)
    derived = getattr(lm, "tokenizer_origin", None) is not None  # rebuilt from a GGUF file
    if choice != "auto" and tokenizer_kind(stated) == "synth":
        # its embedding rows are the synth language's ids: another tokenizer's ids index the
        # same rows with other meanings, and every probe would read noise as "no effect"
        raise ProbeInputError(
            f"--tokenizer {choice!r} ({tok.vocab.size} tokens) is not the vocabulary of model "
            f"{where!r}: its tokenizer.json is a synth language, the ids its embedding was "
            "trained on; drop --tokenizer (or give --tokenizer synth)"
        )
    if choice != "auto" and tokenizer_kind(stated) == "tokenizers" and not derived:
        if json_sha256(stated) != tok.sha256:  # validated as a synth language would be
            raise ProbeInputError(
                f"--tokenizer {choice!r} is tokenizer {tok.sha256[:12]}, but model {where!r} "
                f"states its own ({json_sha256(stated)[:12]}); drop --tokenizer"
            )
    size = lm.info.vocab_size
    if size is not None and tok.vocab.size > size:
        raise ProbeInputError(
            f"--tokenizer: the tokenizer has {tok.vocab.size} tokens but model {where!r} reads "
            f"{size}; give the model's own tokenizer"
        )
    return Vocabulary("tokenizer", tok, origin, opening_from)


def stateless_vocabulary(loaded: list, where: list[str], lang: Any, vocab: Vocabulary):
    """A transformers model that states no tokenizer (no tokenizer.json) is taken to read the
    synth language's ids only when its vocabulary is exactly the language's (what a model
    trained here on it has), and run.json says it was assumed; any other is refused, one line
    naming what to give. `--tokenizer synth` says so outright and skips this."""
    for m, w in zip(loaded, where, strict=True):
        if getattr(m, "tokenizer", None) is not None:
            continue
        if (getattr(m.info, "extra", None) or {}).get("library") != "transformers":
            continue
        size = m.info.vocab_size
        if size != lang.vocab.size:
            raise ProbeInputError(
                f"--model {w!r} states no tokenizer (no tokenizer.json) and its vocabulary of "
                f"{size:,} tokens is not the synth language's {lang.vocab.size:,}: it would be "
                "fed ids it does not read; give its tokenizer (--tokenizer PATH), or "
                "--tokenizer synth if it does read the synth language"
            )
        vocab = dataclasses.replace(
            vocab,
            note=f"model {w!r} states no tokenizer; its vocabulary is the synth language's "
            f"{size:,} tokens, so it is taken to read synth ids",
        )
    return vocab


def read_json_file(path: Path) -> bytes:
    """A model directory's small JSON file, bounded (txl.files)."""

    return files.read_bytes(path, "json")


def read_tokenizer_file(path: Path) -> bytes:
    """A tokenizer.json (or a file beside it), bounded (txl.files)."""

    return files.read_bytes(path, "tokenizer" if path.name == "tokenizer.json" else "json")


def read_text_file(path: Path) -> bytes:
    """One file of a haystack or a training text, bounded (txl.files)."""

    return files.read_bytes(path, "text")


# `--haystack` names of the default corpus (synth.text.default_corpus) → the part each one reads:
# the topics held out from `probe train --text default`, or all of them (about six times the
# text, for a model not trained here whose context outgrows the held-out part)
DEFAULT_HAYSTACKS = {"default": "haystack", "default-all": "all"}


def haystack_paths(value: Any) -> list[str] | None:
    """`--haystack` as a list of paths (one DEFAULT_HAYSTACKS name for the default corpus), or
    None."""
    if value is None:
        return None
    items = [value] if isinstance(value, str | os.PathLike) else list(value)
    items = [str(x) for x in items]
    if not items:
        return None
    if any(not x.strip() for x in items):
        raise ProbeInputError("--haystack '': give UTF-8 text files, directories or 'default'")
    named = [x for x in items if x in DEFAULT_HAYSTACKS]
    if named and len(items) > 1:
        raise ProbeInputError(f"--haystack {named[0]} stands alone; give it or paths, not both")
    return items


def load_world(tokenizer: Any, paths: list[str], per: str | None) -> tuple[Any, dict[str, Any]]:
    """The TextWorld of a haystack under a tokenizer, and what run.json records of it."""

    per = per or "file"
    try:
        if len(paths) == 1 and paths[0] in DEFAULT_HAYSTACKS:
            if per != "file":
                raise ProbeInputError(
                    f"--haystack-documents applies to haystack files, not {paths[0]}"
                )
            part = DEFAULT_HAYSTACKS[paths[0]]
            corpus = default_corpus(part)
            record = {"haystack": paths[0], **provenance(part)}
        else:
            files = corpus_files(paths)
            total = sum(size for _, size in files)
            require_memory(
                f"the haystack ({total:,} bytes of text)",
                HAYSTACK_BYTES_FACTOR * total,
                "give a smaller haystack",
            )
            corpus = read_corpus(paths, per=per, read=read_text_file)
            record = {
                "haystack": [str(Path(p).expanduser().resolve()) for p in paths],
                "documents_per": per,
                "documents": len(corpus.documents),
                "files": len(corpus.files),
                "sha256": corpus.sha256,
            }
        world = TextWorld(tokenizer, Haystack.build(corpus, tokenizer))
    except (CorpusError, HaystackError, LimitError) as e:
        raise ProbeInputError(f"--haystack: {e}") from None
    return world, {**record, **world.provenance()}


@dataclass(frozen=True)
class TextSetup:
    """What a run writes its texts in and how the model reads them."""

    texts: Texts  # what the probe writes its texts with (`ctx.texts`)
    vocabulary: Vocabulary
    record: dict[str, Any] | None  # run.json's "text": the haystack and world, on real text


def setup(cls: type, opts: Any, sources: list, loaded: list) -> TextSetup:
    """The texts of a run of probe `cls` (module docstring): the synth language, real text
    (--haystack), or the synth language through the tokenizer bridge."""
    where = [
        str(s) if isinstance(s, Path) else m.info.id for s, m in zip(sources, loaded, strict=True)
    ]
    opening = getattr(opts, "opening_token", None)
    vocabs = [
        model_vocabulary(m, opts.tokenizer, w, opening) for m, w in zip(loaded, where, strict=True)
    ]
    vocab = vocabs[0]
    if opening is not None and vocab.reads != "tokenizer":
        raise ProbeInputError(
            f"--opening-token applies to a model that reads its own tokenizer; model "
            f"{where[0]!r} reads the synth language's ids, whose documents open with <eod>: "
            "drop --opening-token"
        )
    if (
        len({v.reads for v in vocabs}) > 1
        or len({v.record().get("tokenizer_sha256") for v in vocabs}) > 1
    ):
        raise ProbeInputError(
            f"probe {cls.name}: the models of its group read different vocabularies; give "
            "models that read the same one"
        )
    paths = haystack_paths(opts.haystack)
    if paths is None:
        if opts.haystack_documents is not None:
            raise ProbeInputError(
                "--haystack-documents applies to --haystack files; give --haystack"
            )
        lang = load_language(opts.language)
        if vocab.reads == "synth":
            for m, w in zip(loaded, where, strict=True):
                check_language(m, lang, w, tokenizer=opts.tokenizer != "synth")
            if opts.tokenizer != "synth":
                vocab = stateless_vocabulary(loaded, where, lang, vocab)
            return TextSetup(SynthTexts(lang), vocab, None)
        if "bridged" not in cls.smoke:
            raise ProbeNotApplicable(
                f"probe {cls.name} cannot map its texts to the tokens of model {where[0]!r} (it "
                "reads its own tokenizer); give --haystack for real text, or --tokenizer synth "
                "if the model reads synth ids",
                "its texts are not mapped to a model's own tokenizer",
            )
        return TextSetup(BridgedTexts(Bridge(vocab.tokenizer, lang)), vocab, None)
    if "haystack" not in cls.smoke:
        raise ProbeNotApplicable(
            f"probe {cls.name} does not write real text; drop --haystack",
            "it does not write real text",
        )
    if opts.language is not None:
        raise ProbeInputError("--language names a synth language; with --haystack drop it")
    if vocab.reads != "tokenizer":
        raise ProbeInputError(
            f"--haystack needs a model that reads real text; model {where[0]!r} reads the synth "
            "language (train one with probe train --text, or give --tokenizer PATH)"
        )
    world, record = load_world(vocab.tokenizer, paths, opts.haystack_documents)
    return TextSetup(HaystackTexts(world), vocab, record)


def load_language(language: str | os.PathLike | None):
    """The synth language the probe writes its text in (default: Language.default())."""

    if language is None:
        return Language.default()
    p = Path(language)
    if p.is_dir():
        p = p / "tokenizer.json"
    try:
        data = files.read_json(p, "tokenizer")
    except files.FileRefused as e:
        raise ProbeInputError(
            f"--language: {e} (a language JSON, `Language.to_json()`, a checkpoint's "
            "tokenizer.json, or a checkpoint directory)"
        ) from None
    if not isinstance(data, dict):
        raise ProbeInputError(
            f"--language {str(language)!r} holds a JSON {type(data).__name__}, not a synth "
            "language (a JSON object, as a checkpoint's tokenizer.json)"
        )
    try:
        return Language.from_json(data)
    except (ValueError, KeyError, TypeError) as e:
        what = str(e).replace("tokenizer.json", p.name)  # name the file given
        raise ProbeInputError(f"--language {str(language)!r}: {what}") from None


def check_language(lm: Any, lang: Any, where: str, tokenizer: bool = True) -> None:
    """Refuse (one line) a model that does not read the probe's language: its tokenizer JSON
    (when it states one, and `tokenizer`: not overruled by --tokenizer synth) must be this
    language, and its vocabulary must hold every token."""
    stated = getattr(lm, "tokenizer", None) if tokenizer else None
    if stated is not None:
        try:
            lang.check_compatible(stated, what=f"model {where!r}")
        except ValueError as e:
            raise ProbeInputError(f"--model {where!r}: {e}") from None
    size = lm.info.vocab_size
    if size is not None and size < lang.vocab.size:
        raise ProbeInputError(
            f"--model {where!r}: vocab_size {size} is smaller than the language's "
            f"{lang.vocab.size} tokens"
        )
