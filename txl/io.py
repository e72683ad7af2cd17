"""Files a crash never leaves half-written, JSON that a strict parser accepts, and file hashes —
the one implementation of each for the whole project (torch-free: `probes` uses it too).

`atomic_write_with(path, write)` lets `write` fill a hidden temporary file beside the target,
fsyncs it and renames it over the target: a reader sees the old file or the new one, never a
mixture, and a failed write leaves no temporary behind. `atomic_write` writes text or bytes that
way. Files are created with the process's umask, like any other file the user writes.

`replace_dir(path, write)` does the same for a directory: `write(tmp)` fills a fresh hidden
directory beside the target, every file is fsynced, and it is renamed into place; an existing
target is renamed aside first and removed only after the new one is in place. A crash leaves the
old directory or the new one at the target (at worst plus a hidden `.NAME.tmp-*` / `.NAME.old-*`
sibling), never a mixture.

`json_safe` turns what a run records into plain JSON types. Its one NaN policy: non-finite floats
become null (JSON has no NaN; a diverged loss or an undefined statistic is recorded as "no
value", never as the invalid token NaN). Dump its result with `allow_nan=False`.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np


def atomic_write_with(
    path: str | os.PathLike, write: Callable[[Path], None], durable: bool = True
) -> None:
    """Replace `path` by what `write(tmp)` writes to a fresh temporary path beside it.
    `durable=False` skips the fsync: for a cache whose reader checks each file and recomputes a
    damaged one, which a crash of the machine (not of the process) may leave."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        write(tmp)
        if durable:
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def fsync_path(path: str | os.PathLike) -> None:
    """fsync a file or a directory (a directory: its entries, so a rename inside it is durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_dir(path: str | os.PathLike, write: Callable[[Path], None]) -> None:
    """Replace the directory `path` by what `write(tmp)` writes into a fresh directory beside it
    (module docstring). The caller decides beforehand whether an existing `path` may go."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    tmp = target.parent / f".{target.name}.tmp-{tag}"
    old = target.parent / f".{target.name}.old-{tag}"
    tmp.mkdir()
    try:
        write(tmp)
        for p in tmp.rglob("*"):
            if p.is_file():
                fsync_path(p)
        fsync_path(tmp)
        if target.exists():
            os.rename(target, old)
            try:
                os.rename(tmp, target)
            except BaseException:
                os.rename(old, target)
                raise
        else:
            os.rename(tmp, target)
        fsync_path(target.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)


def follow_umask(path: str | os.PathLike) -> None:
    """Give `path` the mode a plain open() gives a new file (0666 less the umask): some writers
    (safetensors' save_file) create their files 0600."""
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(path, 0o666 & ~mask)


def atomic_write(path: str | os.PathLike, data: str | bytes) -> None:
    """Replace `path` with `data` (text as UTF-8) atomically."""
    raw = data.encode("utf-8") if isinstance(data, str) else data

    def write(tmp: Path) -> None:
        with open(tmp, "xb") as f:
            f.write(raw)

    atomic_write_with(path, write)


def json_safe(obj: Any) -> Any:
    """Non-finite floats become None (JSON has no NaN); numpy scalars and arrays become Python
    numbers and lists; tuples become lists; paths become strings; mapping keys become strings."""
    if isinstance(obj, Mapping):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, np.ndarray):
        return json_safe(obj.tolist())
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes (hex), read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
