"""The one reader of every file a user hands the toolkit: a config, a checkpoint's JSON files, a
run directory's run.json, summary.json and metrics.jsonl, a language, a tokenizer, a haystack or
training text. Stdlib only (no torch, no numpy): `probes` uses it at its boundary, and `synth`
takes its bytes from callers that read with it.

Each read is, in this order:

1. **kind**: the path is opened without blocking (a FIFO does not hang the open) and the open
   file must be a regular file — a FIFO, a device (`/dev/zero`), a socket or a directory is
   refused for what it is, never read and never reported as missing;
2. **size**: its size must be within the limit of its kind (`LIMITS`), checked on the open file
   before a byte is read, and the read stops one byte past the limit whatever the size claims;
3. **parse**: UTF-8, then JSON (no NaN or Infinity), TOML, or JSON lines.

Every refusal is a `FileRefused` (a ValueError) of one form: `<what> '<path>' <what is wrong>;
<what would be right>`.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from typing import Any

MIB = 1 << 20
# The largest file of each kind (bytes). A sparse or endless file past its limit is refused
# before it is read, so nothing allocates more than the limit.
LIMITS = {
    "json": 64 * MIB,  # config.json, run.json, summary.json, rng.json, a language
    "tokenizer": 256 * MIB,  # a tokenizer.json (a large real vocabulary is ~20 MB)
    "config": 1 * MIB,  # a training config (TOML or JSON)
    "metrics": 512 * MIB,  # metrics.jsonl of a training run
    "text": 512 * MIB,  # one text file of a haystack or a training corpus
    "source": 16 * MIB,  # a probe file named path/to/file.py:Class
    "weights": 64 * 1024 * MIB,  # model.safetensors, train_state.pt: checked against memory later
}


class FileRefused(ValueError):
    """A file that is not a regular file, is above its size limit, or does not parse (one
    line: what, which file, what is wrong, what would be right)."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _label(path: str | os.PathLike, what: str) -> str:
    return f"{what} {str(path)!r}" if what else repr(str(path))


def _limit(kind: str, limit: int | None) -> int:
    return LIMITS[kind] if limit is None else limit


def check_file(path: str | os.PathLike, kind: str, what: str = "", limit: int | None = None) -> int:
    """Refuse (`FileRefused`) a path that is not a regular file within the limit of `kind`,
    without opening it; returns its size. For files another reader opens later."""
    cap = _limit(kind, limit)
    try:
        st = os.stat(path)
    except OSError as e:
        raise _os_error(path, what, e) from None
    if not stat.S_ISREG(st.st_mode):
        raise FileRefused(f"{_label(path, what)} is {_kind(st.st_mode)}; give a regular file")
    _check_size(path, what, st.st_size, cap, kind)
    return st.st_size


def _check_size(path, what: str, size: int, cap: int, kind: str) -> None:
    if size > cap:
        raise FileRefused(
            f"{_label(path, what)} holds {size:,} bytes, above the limit of {cap:,} for a "
            f"{kind} file; give a smaller file"
        )


def _os_error(path, what: str, e: OSError) -> FileRefused:
    if e.errno == errno.ENOENT:
        return FileRefused(f"{_label(path, what)} does not exist; give an existing file")
    if e.errno == errno.ELOOP:
        return FileRefused(f"{_label(path, what)} is a symlink loop; give a regular file")
    return FileRefused(f"{_label(path, what)} cannot be read ({e.strerror}); check it")


def read_bytes(
    path: str | os.PathLike, kind: str, what: str = "", limit: int | None = None
) -> bytes:
    """The bytes of a regular file within the limit of `kind` (module docstring)."""
    cap = _limit(kind, limit)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise _os_error(path, what, e) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(f"{_label(path, what)} is {_kind(st.st_mode)}; give a regular file")
        _check_size(path, what, st.st_size, cap, kind)
        chunks, got = [], 0
        while got <= cap:
            chunk = os.read(fd, min(MIB, cap + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        _check_size(path, what, got, cap, kind)  # it grew, or its size was not the truth
        return b"".join(chunks)
    except OSError as e:
        raise _os_error(path, what, e) from None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike, kind: str, what: str = "", limit: int | None = None) -> str:
    """A regular file's UTF-8 text (a leading byte-order mark dropped)."""
    data = read_bytes(path, kind, what, limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise FileRefused(
            f"{_label(path, what)} is not UTF-8 text (byte {e.start:,}: {e.reason}); give a "
            "UTF-8 file"
        ) from None


def _reject_constant(name: str) -> float:
    raise ValueError(f"non-finite number {name} (JSON has no {name})")


def read_json(
    path: str | os.PathLike, kind: str = "json", what: str = "", limit: int | None = None
) -> Any:
    """A regular file's JSON document (NaN and Infinity refused: the project never writes them)."""
    data = read_bytes(path, kind, what, limit)
    try:
        return json.loads(data.decode("utf-8-sig"), parse_constant=_reject_constant)
    except UnicodeDecodeError as e:
        raise FileRefused(
            f"{_label(path, what)} is not valid JSON (not UTF-8: byte {e.start:,}, {e.reason}); "
            "give a JSON file"
        ) from None
    except ValueError as e:
        raise FileRefused(
            f"{_label(path, what)} is not valid JSON ({e}); give a JSON file"
        ) from None


def read_jsonl(
    path: str | os.PathLike, kind: str = "metrics", what: str = "", limit: int | None = None
) -> list[Any]:
    """The records of a JSON-lines file; a line that does not parse (cut by a kill) is skipped."""
    out = []
    for line in read_text(path, kind, what, limit).splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out
