"""Run directories: where a probe run leaves everything another researcher needs.

    results/<probe>/<model-id>/<UTC-time>-<8 hex>/
        run.json        provenance: argv, probe + version, params, model path/sha256/config,
                        eval geometry, dtype, evaluator, threads, seeds, git commit + dirty flag,
                        package / synth / library versions, device, status; at its end
                        (or interruption) elapsed_s and peak_rss_mb
        summary.json    the summary `probe run --json` prints (metrics with CIs, bins, checks)
        samples.jsonl   one line per pair, appended (and flushed) as the run goes, so an
                        interrupted run keeps what it did
        tokens.npz      per-token NLL arrays (plain numeric arrays: np.load(allow_pickle=False))
        texts.npz       the token ids (and documents) each pair or text was scored on, and the
                        strings of the ids used (probes/framework/token_strings.py)
        *.png           plots
        chunks/         while it runs: each scoring call's results, so that a resumed run
                        does not score them again (probes/framework/scored_chunks.py); removed
                        when it finishes

JSON is written with sorted keys, non-finite floats as null (`txl.io.json_safe`, the project's one
NaN policy), atomically (`txl.io.atomic_write`). The directory is created only after every input
was validated, so bad input never leaves one behind.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
import secrets
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from probes.framework import scored_chunks
from txl import files
from txl.files import FileRefused
from txl.io import atomic_write, atomic_write_with, json_safe
from txl.run_dir import LOCK_FILE as LOCK_FILE  # the one lock and writability check: txl's
from txl.run_dir import DirLock, RunDirError, is_locked
from txl.run_dir import check_writable as check_writable

SCHEMA_VERSION = 1
HOLDER = "another probe run"  # who holds a run directory's lock (txl.run_dir.DirLock)
FINISHED = ("complete", "failed-check")  # the statuses of a run whose summary can be read


class RunWriteError(RunDirError):
    """A run's file could not be written (disk full, read-only, gone); the message names it."""


def is_live(path: Path) -> bool:
    """Whether a process still runs in this run directory (it holds the lock)."""
    return is_locked(path)


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
    """A run file (run.json, summary.json): a regular file within the JSON limit, then parsed
    (txl.files; FileRefused, one line, otherwise)."""

    return files.read_json(path)


def safe_id(text: str) -> str:
    """A path component from a model id or probe name (`+` kept: it joins the ids of a
    `probe diagnose --models` run)."""
    clean = re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-.")
    return clean or "model"


def utc_stamp(now: _dt.datetime | None = None) -> str:
    now = now or _dt.datetime.now(_dt.UTC)
    return now.strftime("%Y%m%dT%H%M%SZ")


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

    @contextmanager
    def writing(self, name: str):
        """Writes to the file `name` in the block: an OSError (disk full, read-only...) becomes a
        RunWriteError naming the file."""
        try:
            yield
        except OSError as e:
            raise RunWriteError(
                f"cannot write {self.path / name}: {e.strerror or e}; the run stopped (make "
                "room, or give another --out, and run it again)"
            ) from e

    def write_json(self, name: str, obj: Any) -> None:
        with self.writing(name):
            write_json(self.path / name, obj)

    def append_sample(self, record: dict) -> None:
        with self.writing("samples.jsonl"):
            if self._samples is None:
                self._samples = open(self.path / "samples.jsonl", "a", encoding="utf-8")
            self._samples.write(dumps(record, indent=None) + "\n")
            self._samples.flush()

    def write_chunk(self, name: str, items: list[int], results: list) -> None:
        """One scoring call's results, kept until the run finishes (probes.framework.scored_chunks)."""
        with self.writing(f"{scored_chunks.FOLDER}/{name}"):
            scored_chunks.write(self.path, name, items, results)

    def write_npz(self, name: str, arrays: dict[str, np.ndarray]) -> None:
        for key, arr in arrays.items():
            if np.asarray(arr).dtype == object:
                raise TypeError(f"{name}: array {key!r} has dtype object; use numeric arrays")

        def write(tmp: Path) -> None:
            with open(tmp, "xb") as f:
                np.savez_compressed(f, **arrays)

        with self.writing(name):
            atomic_write_with(self.path / name, write)

    @contextmanager
    def recording(self, record: dict, began: float | None = None):
        """Write run.json (status "running") and run the block, holding the directory's lock
        (`txl.run_dir.DirLock`) while it runs, so that a reader can tell a live run from a dead
        one (`is_live`). A block that ends by an interruption (SIGINT, SIGTERM) or an error
        leaves run.json saying so ("interrupted", "error" with the reason, when run.json can
        still be written) and no summary.json; the files are closed however it ends. If not even
        the first run.json can be written, the directory is removed. The block calls `finish`.
        `began`: the `time.perf_counter()` the run's time counts from (default: now), so that an
        interrupted run's elapsed_s counts what a finished one's would, its preparation too."""
        lock = DirLock(self.path, HOLDER).acquire()
        try:
            self.write_json("run.json", record)
        except BaseException:
            lock.release()
            _remove_if_empty(self.path)
            raise
        began = time.perf_counter() if began is None else began
        try:
            yield record
        except KeyboardInterrupt:
            record["status"] = "interrupted"
            self._record_end(record, time.perf_counter() - began)
            raise
        except BaseException as e:
            record["status"] = "error"
            record["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:500]
            self._record_end(record, time.perf_counter() - began)
            raise
        finally:
            self.close()
            lock.release()  # a killed run keeps its unlocked .lock: "dead"

    def _record_end(self, record: dict, seconds: float) -> None:
        """A run that did not finish: no summary.json (it must never read as complete), and
        run.json saying how it ended, how long it ran (`seconds` this sitting) and its peak
        memory, if the disk still takes it."""
        (self.path / "summary.json").unlink(missing_ok=True)
        record["elapsed_s"] = add_sitting(record, seconds)
        record["peak_rss_mb"] = larger_peak(record)
        try:
            self.write_json("run.json", record)
        except RunWriteError:  # a full disk has no room for the temporary copy: rewrite in place
            try:
                with open(self.path / "run.json", "w", encoding="utf-8") as f:
                    f.write(dumps(record))
            except OSError:
                pass  # run.json stays "running"; with the lock released the run reads as dead

    def finish(self, record: dict, *, passed: bool, elapsed_s: float) -> None:
        """The run ended: "complete", or "failed-check" when one of its own checks failed;
        `elapsed_s`: its whole time (a resumed run's: `add_sitting`)."""
        with self.writing("samples.jsonl"):  # its last bytes on disk before "complete"
            self._close_samples()
        scored_chunks.remove(self.path)
        record["status"] = "complete" if passed else "failed-check"
        record["elapsed_s"] = elapsed_s
        record["peak_rss_mb"] = larger_peak(record)
        self.write_json("run.json", record)

    def _close_samples(self) -> None:
        f, self._samples = self._samples, None
        if f is not None:
            f.close()

    def close(self) -> None:
        """Close what is open however the run ended (a failing close of a run that already
        ended in error changes nothing: finish() closes first when it succeeds)."""
        try:
            self._close_samples()
        except OSError:
            pass


def _remove_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


# What `probe report` and `probe rerun` need of a run's files (top-level JSON types), checked on
# load so that a malformed file is refused naming it, not met as a KeyError later.
RUN_SHAPE = {"schema_version": int, "status": str}
RUN_OPTIONAL = {"probe": dict, "options": dict, "params": dict, "synth": dict, "model": dict,
                "group": list, "models": list, "geometry": dict}  # fmt: skip
SUMMARY_SHAPE = {
    "probe": str,
    "version": int,
    "model": dict,
    "geometry": dict,
    "metrics": dict,
    "bins": list,
    "checks": dict,
    "verdict": str,
}
DIAGNOSE_SHAPE = {"geometry": dict, "checks": dict}
_JSON_TYPE = {int: "an integer", str: "a string", dict: "an object", list: "a list"}


def check_shape(file: Path, data: Any, shape: dict[str, type]) -> None:
    """RunDirError (one line, naming the file) unless `data` is a JSON object whose fields in
    `shape` have their JSON types."""
    if not isinstance(data, dict):
        raise RunDirError(
            f"{str(file)!r} holds {_JSON_TYPE.get(type(data), 'a ' + type(data).__name__)}; "
            "expected a JSON object as `probe run` writes it"
        )
    for key, kind in shape.items():
        value = data.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            got = "is missing" if key not in data else f"is {json.dumps(value)[:40]}"
            raise RunDirError(
                f"{str(file)!r}: field {key!r} {got}; expected {_JSON_TYPE[kind]} as `probe run` "
                "writes it"
            )


def check_optional(file: Path, data: dict, shape: dict[str, type]) -> None:
    """Like check_shape for fields that may be absent (or null)."""
    check_shape(file, data, {k: t for k, t in shape.items() if data.get(k) is not None})


def check_nested(file: Path, data: dict, key: str, kind: type) -> None:
    """Every value of the object `data[key]` (when present) has the JSON type `kind`."""
    inner = data.get(key)
    if isinstance(inner, dict):
        for name, value in inner.items():
            if not isinstance(value, kind):
                raise RunDirError(
                    f"{str(file)!r}: field {key}.{name} is {json.dumps(value)[:40]}; expected "
                    f"{_JSON_TYPE[kind]} as `probe run` writes it"
                )


def load_run(path: Path) -> tuple[dict, dict | None]:
    """(run.json, summary.json or None if the run did not finish) of a run directory; a file
    that is not what `probe run` / `probe diagnose` writes is refused (RunDirError, one line)."""

    path = Path(path)

    def there(name: str) -> bool:  # a FIFO or a device is there too: the read refuses it
        return (path / name).exists() or (path / name).is_symlink()

    if not there("run.json"):
        raise RunDirError(
            f"{str(path)!r} is not a run directory (no run.json); give results/<probe>/<model>/<run>"
        )

    def read(name: str):
        try:
            return read_json(path / name)
        except FileRefused as e:
            raise RunDirError(f"{e}; expected the file `probe run` writes") from None

    run = read("run.json")
    summary = read("summary.json") if there("summary.json") else None
    check_shape(path / "run.json", run, {"schema_version": int})
    if run.get("schema_version") != SCHEMA_VERSION:
        raise RunDirError(
            f"{str(path)!r}: run.json schema_version {run.get('schema_version')!r}; "
            f"this version reads {SCHEMA_VERSION}"
        )
    check_shape(path / "run.json", run, RUN_SHAPE)
    check_optional(path / "run.json", run, RUN_OPTIONAL)
    if isinstance(run.get("probe"), dict):
        check_optional(path / "run.json", run["probe"], {"name": str, "spec": str, "class": str})
    if summary is not None:  # its shape is the one of the run that run.json names
        diagnose = run.get("command") == "diagnose" or (
            isinstance(summary, dict) and summary.get("command") == "diagnose"
        )
        shape = DIAGNOSE_SHAPE if diagnose else SUMMARY_SHAPE if "probe" in run else {}
        check_shape(path / "summary.json", summary, shape)
        check_nested(path / "summary.json", summary, "checks", dict)
    return run, summary


def load_samples(path: Path) -> list[dict]:

    file = Path(path) / "samples.jsonl"
    if not file.is_file():
        return []
    out = []
    for line in files.read_text(file, "metrics").splitlines():
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut by an interruption
                break
    return out


def peak_rss_mb() -> int | None:
    """The peak resident memory so far of this process or of any process it started and waited
    for (a diagnose's `--jobs` workers), whichever is larger, in MB (None where the OS does not
    say): what a run needed, for the next one sized like it. A diagnose's probe runs in one
    process share it, so a later run's figure includes the runs before it."""
    try:
        import resource
    except ImportError:  # not on this OS
        return None
    peak = max(resource.getrusage(who).ru_maxrss
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))  # fmt: skip
    return round(peak / (1 << 20 if sys.platform == "darwin" else 1 << 10))  # bytes there, KiB here


def larger_peak(record: dict, *others: int | None) -> int | None:
    """The run's peak memory: the largest of this process's, the peak `record` carries from the
    earlier sittings of a resumed run, and `others` (what its sub-runs recorded)."""
    peaks = [recorded_peak(record.get("peak_rss_mb")), peak_rss_mb(), *others]
    return max((p for p in peaks if p is not None), default=None)


def recorded_number(value: Any) -> float | None:
    """A time or a peak a run.json holds, None unless it reads as one (finite, not negative)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def recorded_peak(value: Any) -> int | None:
    """A peak_rss_mb a run.json holds, in whole MB; None unless it reads as one."""
    number = recorded_number(value)
    return None if number is None else round(number)


def add_sitting(record: dict, seconds: float) -> float:
    """The run's elapsed seconds with this sitting's `seconds` counted. A resumed run's record
    carries `sittings_s` (each earlier sitting's seconds, null for one that ended without
    recording them: a killed process), which this sitting joins once, however often it ends
    (a failed last write, then the interruption); its total is their sum, a lower bound when
    one is null. A run that never resumed is one sitting."""
    seconds = round(seconds, 3)
    if "sittings_s" not in record:
        return seconds
    this = len(record.get("resumed_utc") or [])  # its place: one sitting per start and resume
    record["sittings_s"] = [*record["sittings_s"][:this], seconds]
    return round(sum(s for s in record["sittings_s"] if s is not None), 3)
