"""Scored chunks: what a run keeps of each scoring call while it goes, so that a resumed run
takes them back instead of scoring them again.

A probe that scores through `probes.api.rows.score_batches` scores its items in fixed chunks
(the same items, in the same order, for the same plan), each chunk one call whose results do not
depend on any other call. After each call the run writes `chunks/<call>-<chunk>.npz` in its
directory: the chunk's items, its records and each item's per-token extras. A run that finishes
removes the folder (tokens.npz and samples.jsonl hold what it had). A resumed run (`probe
diagnose --resume`, `probe rerun --resume`) hands the interrupted run's folder to the new run
(`Kept`), which takes a chunk back only when the file names exactly the items the new plan puts
in it, so a kept chunk gives the numbers its scoring would have: the records (NaN included) and arrays (dtype included) come back bit for bit.

The file is a plain .npz read with allow_pickle=False: `records` (JSON text, NaN kept), `items`,
`extras` (JSON: each extra's shape — null, an array's key, or an object of them) and the arrays.
A file that is not that (damaged, another version's, too large) is not taken: its chunk is scored
again.
"""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from txl import files
from txl.io import atomic_write_with

FOLDER = "chunks"
LIMIT = 256 * files.MIB  # one chunk's file, packed and unpacked (a call is CHUNK_WORK tokens)


def _exact(obj: Any) -> Any:
    """A record value JSON can hold: numpy scalars as Python numbers (NaN stays NaN)."""
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"a scored record holds {type(obj).__name__}, which JSON cannot keep")


def _flatten(extra: Any, key: str, arrays: dict[str, np.ndarray]) -> Any:
    """`extra`'s shape for the `extras` JSON; its arrays go into `arrays` under keys from `key`."""
    if extra is None:
        return None
    if isinstance(extra, dict):
        return {str(k): _flatten(v, f"{key}/{k}", arrays) for k, v in extra.items()}
    arr = np.asarray(extra)
    if arr.dtype == object:
        raise TypeError(f"extra {key!r} has dtype object; a scored chunk keeps numeric arrays")
    arrays[key] = arr
    return {"array": key}


def _unflatten(shape: Any, arrays: dict[str, np.ndarray]) -> Any:
    if shape is None:
        return None
    if set(shape) == {"array"} and isinstance(shape["array"], str):
        return arrays[shape["array"]]
    return {k: _unflatten(v, arrays) for k, v in shape.items()}


def encode(items: list[int], results: list[tuple[dict, Any]]) -> dict[str, np.ndarray]:
    """The arrays of one chunk's file: its items and their (record, extra) results."""
    arrays: dict[str, np.ndarray] = {}
    shapes = [_flatten(extra, f"x{n}", arrays) for n, (_, extra) in enumerate(results)]
    records = [record for record, _ in results]
    arrays["items"] = np.asarray(items, dtype=np.int64)
    arrays["records"] = np.array(json.dumps(records, default=_exact, allow_nan=True))
    arrays["extras"] = np.array(json.dumps(shapes))
    return arrays


def write(run_path: Path, name: str, items: list[int], results: list[tuple[dict, Any]]) -> None:
    """Write one chunk's file into `run_path`/chunks (atomically: a killed write leaves none)."""
    folder = Path(run_path) / FOLDER
    folder.mkdir(exist_ok=True)
    arrays = encode(items, results)

    def save(tmp: Path) -> None:
        with open(tmp, "xb") as f:
            np.savez(f, **arrays)

    atomic_write_with(folder / name, save, durable=False)  # a damaged chunk is scored again


def decode(arrays: dict[str, np.ndarray]) -> tuple[list[int], list[tuple[dict, Any]]]:
    items = [int(i) for i in arrays["items"]]
    records = json.loads(str(arrays["records"]))
    shapes = json.loads(str(arrays["extras"]))
    if not (isinstance(records, list) and isinstance(shapes, list)):
        raise ValueError("records and extras must be lists")
    if not len(records) == len(shapes) == len(items):
        raise ValueError("one record and one extra per item")
    return items, [(r, _unflatten(s, arrays)) for r, s in zip(records, shapes, strict=True)]


def read(path: Path) -> tuple[list[int], list[tuple[dict, Any]]] | None:
    """One chunk's items and results, or None when the file is absent or not one `write` wrote."""
    try:
        raw = files.read_bytes(path, "json", "scored chunk", limit=LIMIT)
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            if sum(i.file_size for i in z.infolist()) > LIMIT:
                return None
        with np.load(io.BytesIO(raw), allow_pickle=False) as z:
            return decode({k: z[k] for k in z.files})
    except (files.FileRefused, ValueError, KeyError, TypeError, OSError, zipfile.BadZipFile,
            EOFError):  # fmt: skip
        return None


class Kept:
    """The scored chunks an interrupted run of this very measurement left (`path`: its run
    directory), taken back one chunk at a time."""

    def __init__(self, path: Path):
        self.folder = Path(path) / FOLDER
        self.taken = 0

    def results(self, name: str, items: list[int]) -> list[tuple[dict, Any]] | None:
        """The chunk's results when the interrupted run scored exactly these items; else None."""
        got = read(self.folder / name)
        if got is None or got[0] != list(items):
            return None
        self.taken += 1
        return got[1]


def remove(run_path: Path) -> None:
    """A finished run's chunks: tokens.npz and samples.jsonl hold what they held."""
    shutil.rmtree(Path(run_path) / FOLDER, ignore_errors=True)
