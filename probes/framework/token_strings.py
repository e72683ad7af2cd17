"""The strings of the tokens a run scored, written into its texts.npz so that `probe show` can
print its texts without the model or its tokenizer.

Only the ids the run used are stored, each with what it reads as in the middle of a text:

    vocab_ids      int32 (V,)     the ids, ascending
    vocab_utf8     uint8 (B,)     their strings' UTF-8 bytes, one after the other
    vocab_offsets  int64 (V + 1,) string i is vocab_utf8[vocab_offsets[i]:vocab_offsets[i + 1]]

A synth id reads as its word after a space (synth text is its words joined by spaces); a
tokenizer's id as the tokenizer decodes it after another token (`TextTokenizer.token_strings`),
leading space and all. probes/report/show_run.py reads them back.

A run written before runs recorded them gets them later (`probe show RUN_DIR --tokenizer PATH
--save-strings`): `add_to_npz` rewrites its texts.npz atomically with the three arrays added and
every array it held copied as it was, byte for byte.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from txl import files
from txl.io import atomic_write_with

# texts.npz arrays of token ids: paired rows, their contrast answers, long-nll's and
# context-ablation's texts
ID_ARRAYS = ("base_tokens", "variant_tokens", "alt_tokens", "tokens")


def used_ids(texts: dict[str, np.ndarray]) -> np.ndarray:
    """Every id in a run's texts.npz arrays, ascending."""
    found = [np.unique(np.asarray(texts[k])) for k in ID_ARRAYS if k in texts]
    return np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)


def pack(ids: np.ndarray, strings: list[str]) -> dict[str, np.ndarray]:
    """The three arrays of the module docstring."""
    encoded = [s.encode("utf-8") for s in strings]
    return {
        "vocab_ids": np.asarray(ids, dtype=np.int32),
        "vocab_utf8": np.frombuffer(b"".join(encoded), dtype=np.uint8).copy(),
        "vocab_offsets": np.r_[0, np.cumsum([len(b) for b in encoded])].astype(np.int64),
    }


def synth_strings(vocab: Any, ids: np.ndarray) -> list[str]:
    """A synth vocabulary's words, each after its space."""
    return [" " + w for w in vocab.words(ids)]


def arrays(texts: dict[str, np.ndarray], setup: Any) -> dict[str, np.ndarray]:
    """The strings of the ids in `texts` under a run's texts (probes.texts.choose.TextSetup):
    its tokenizer's when the model reads one (real text, the bridge, a model's own tokenizer),
    else the synth language's; {} for a run with no texts of its own (None)."""
    if setup is None:
        return {}
    ids = used_ids(texts)
    tokenizer = setup.vocabulary.tokenizer
    if tokenizer is not None:
        return pack(ids, tokenizer.token_strings(ids))
    lang = setup.texts.lang
    return pack(ids, synth_strings(lang.vocab, ids)) if lang is not None else {}


def add_to_npz(path: Path, new: dict[str, np.ndarray], limit: int) -> None:
    """Rewrite the .npz at `path` (a regular file within `limit` bytes, packed and unpacked)
    atomically with `new`'s arrays added as np.savez_compressed writes them; every member it
    holds is copied with its name, date and bytes. ValueError (one line) for a name it already
    holds; txl.files.FileRefused or OSError when it cannot be read or written."""
    raw = files.read_bytes(path, "json", "run arrays", limit=limit)
    try:
        zin = zipfile.ZipFile(io.BytesIO(raw))
    except zipfile.BadZipFile as e:
        raise ValueError(f"{str(path)!r} is not an .npz file ({e})") from None
    with zin:
        members = zin.infolist()
        if sum(i.file_size for i in members) > limit:
            raise ValueError(f"{str(path)!r} unpacks to more than {limit:,} bytes")
        held = [k for k in new if f"{k}.npy" in zin.namelist()]
        if held:
            raise ValueError(f"{str(path)!r} already holds {', '.join(held)}")

        def write(tmp: Path) -> None:
            with open(tmp, "xb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as zout:
                for info in members:
                    zout.writestr(info, zin.read(info))
                for key, arr in new.items():
                    with zout.open(f"{key}.npy", "w", force_zip64=True) as m:
                        np.lib.format.write_array(m, np.asanyarray(arr), allow_pickle=False)

        atomic_write_with(path, write)
