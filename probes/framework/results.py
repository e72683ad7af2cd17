"""Run directories: where a probe run leaves everything another researcher needs.

    results/<probe>/<model-id>/<UTC-time>-<8 hex>/
        run.json        provenance: argv, probe + version, params, model path/sha256/config,
                        eval geometry, dtype, evaluator, threads, seeds, git commit + dirty flag,
                        package / synth / library versions, device, status
        summary.json    the summary `probe run --json` prints (metrics with CIs, bins, checks)
        samples.jsonl   one line per pair, appended (and flushed) as the run goes, so an
                        interrupted run keeps what it did
        tokens.npz      per-token NLL arrays (plain numeric arrays: np.load(allow_pickle=False))
        *.png           plots

JSON is written with sorted keys, non-finite floats as null (`txl.io.json_safe`, the project's one
NaN policy), atomically (`txl.io.atomic_write`). The directory is created only after every input
was validated, so bad input never leaves one behind.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from txl.io import atomic_write, atomic_write_with, json_safe
from txl.run_dir import RunDirError

SCHEMA_VERSION = 1
LOCK_FILE = ".lock"  # held (flock) while a run lives


def is_live(path: Path) -> bool:
    """Whether a process still runs in this run directory (it holds the lock)."""
    import fcntl

    try:
        with open(Path(path) / LOCK_FILE) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False
    except FileNotFoundError:
        return False


def status(path: Path, run: dict) -> str:
    """run.json's status, with a "running" run whose process is gone called "dead"."""
    recorded = str(run.get("status"))
    return "dead" if recorded == "running" and not is_live(path) else recorded


def dumps(obj: Any, indent: int | None = 2) -> str:
    return json.dumps(json_safe(obj), sort_keys=True, allow_nan=False, indent=indent)


def print_json(obj: Any, file=None) -> None:
    """One JSON document on stdout (the `--json` output of every command)."""
    import sys

    (file or sys.stdout).write(dumps(obj) + "\n")


def write_json(path: Path, obj: Any) -> None:
    atomic_write(path, dumps(obj) + "\n")


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def safe_id(text: str) -> str:
    """A path component from a model id or probe name (`+` kept: it joins the ids of a
    `probe diagnose --models` run)."""
    clean = re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-.")
    return clean or "model"


def utc_stamp(now: _dt.datetime | None = None) -> str:
    now = now or _dt.datetime.now(_dt.UTC)
    return now.strftime("%Y%m%dT%H%M%SZ")


def check_writable(out: Path) -> None:
    """Refuse an --out that cannot hold run directories, without creating anything."""
    out = Path(out)
    probe_path = out
    while not probe_path.exists():
        if probe_path.parent == probe_path:
            break
        probe_path = probe_path.parent
    if probe_path.exists() and not probe_path.is_dir():
        raise RunDirError(f"--out {str(out)!r}: {str(probe_path)!r} is a file; give a directory")
    if not os.access(probe_path, os.W_OK | os.X_OK):
        raise RunDirError(
            f"--out {str(out)!r} is not writable ({str(probe_path)!r} denies writing); "
            "give a directory you can write to"
        )


class RunDir:
    """One run's directory; create() makes it, the writers fill it."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._samples = None

    @classmethod
    def create(cls, out: Path, probe: str, model_id: str, now: _dt.datetime | None = None):
        check_writable(out)
        parent = Path(out) / safe_id(probe) / safe_id(model_id)
        try:
            parent.mkdir(parents=True, exist_ok=True)
            for _ in range(16):
                path = parent / f"{utc_stamp(now)}-{secrets.token_hex(4)}"
                try:
                    path.mkdir()
                    return cls(path)
                except FileExistsError:
                    continue
        except OSError as e:
            raise RunDirError(
                f"--out {str(out)!r}: cannot create a run directory ({e.strerror}); "
                "give a directory you can write to"
            ) from None
        raise RunDirError(f"cannot find a fresh run directory name under {str(parent)!r}")

    def write_json(self, name: str, obj: Any) -> None:
        write_json(self.path / name, obj)

    def append_sample(self, record: dict) -> None:
        if self._samples is None:
            self._samples = open(self.path / "samples.jsonl", "a", encoding="utf-8")
        self._samples.write(dumps(record, indent=None) + "\n")
        self._samples.flush()

    def write_npz(self, name: str, arrays: dict[str, np.ndarray]) -> None:
        for key, arr in arrays.items():
            if np.asarray(arr).dtype == object:
                raise TypeError(f"{name}: array {key!r} has dtype object; use numeric arrays")

        def write(tmp: Path) -> None:
            with open(tmp, "xb") as f:
                np.savez_compressed(f, **arrays)

        atomic_write_with(self.path / name, write)

    @contextmanager
    def recording(self, record: dict):
        """Write run.json (status "running") and run the block, holding an exclusive lock on
        the directory's `.lock` (`flock`) while it runs, so that a reader can tell a live run
        from a dead one (`is_live`). A block that ends by an interruption (SIGINT, SIGTERM) or
        an error leaves run.json saying so ("interrupted", "error" with the reason), and the
        files are closed however it ends. The block calls `finish`."""
        import fcntl

        lock = open(self.path / LOCK_FILE, "w")
        fcntl.flock(lock, fcntl.LOCK_EX)
        self.write_json("run.json", record)
        try:
            yield record
        except KeyboardInterrupt:
            record["status"] = "interrupted"
            self.write_json("run.json", record)
            raise
        except BaseException as e:
            record["status"] = "error"
            record["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:500]
            self.write_json("run.json", record)
            raise
        finally:
            self.close()
            lock.close()  # releases the lock
            (self.path / LOCK_FILE).unlink(missing_ok=True)  # a killed run keeps it: "dead"

    def finish(self, record: dict, *, passed: bool, elapsed_s: float) -> None:
        """The run ended: "complete", or "failed-check" when one of its own checks failed."""
        record["status"] = "complete" if passed else "failed-check"
        record["elapsed_s"] = elapsed_s
        self.write_json("run.json", record)

    def close(self) -> None:
        if self._samples is not None:
            self._samples.close()
            self._samples = None


def load_run(path: Path) -> tuple[dict, dict | None]:
    """(run.json, summary.json or None if the run did not finish) of a run directory."""
    path = Path(path)
    if not (path / "run.json").is_file():
        raise RunDirError(
            f"{str(path)!r} is not a run directory (no run.json); give results/<probe>/<model>/<run>"
        )
    try:
        run = read_json(path / "run.json")
        summary = read_json(path / "summary.json") if (path / "summary.json").is_file() else None
    except (OSError, json.JSONDecodeError) as e:
        raise RunDirError(f"{str(path)!r}: unreadable run files ({e})") from None
    if run.get("schema_version") != SCHEMA_VERSION:
        raise RunDirError(
            f"{str(path)!r}: run.json schema_version {run.get('schema_version')!r}; "
            f"this version reads {SCHEMA_VERSION}"
        )
    return run, summary


def load_samples(path: Path) -> list[dict]:
    file = Path(path) / "samples.jsonl"
    if not file.is_file():
        return []
    out = []
    for line in file.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut by an interruption
                break
    return out
