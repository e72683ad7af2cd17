"""A training run's directory: its layout, the checkpoint to resume from, and its run.json.

    run.json            resolved config, command and one entry per (re)start
    metrics.jsonl       {"kind": "train", "step", "loss", "lr", ...} per step,
                        {"kind": "eval", "step", ...} per evaluation; step = updates done
    checkpoints/step_NNNNNNNN/   resumable (train_state.pt + rng.json), the newest kept
    model/              the final model (no train state), with metrics.jsonl and COMMAND
    .lock               held (flock) by the process that trains in the directory

`DirLock` is the project's one lock on a directory that a process writes (a training run here, a
probe run in `probes.framework.results`): an exclusive `flock` on its `.lock`, held for the
writer's life and released by the kernel however the process ends, so a reader can tell a live
writer from a dead one (`is_locked`) and a second writer is refused.

Plain files: no torch or numpy import, so that `RunDirError` can be raised and caught by code that
must start fast.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from txl import files

RUN_FILE = "run.json"
CHECKPOINTS_DIR = "checkpoints"
MODEL_DIR = "model"
LOCK_FILE = ".lock"
_CKPT_RE = re.compile(r"^step_(\d{8,})$")
_CHECKPOINT_FILES = ("config.json", "model.safetensors", "train_state.pt", "rng.json")
# what a checkpoint write killed half-way leaves beside its target (txl.checkpoint.save_checkpoint)
_TMP_RE = re.compile(r"^\.(?P<name>.+)\.(?P<kind>tmp|old)-[0-9a-f]{8}$")


class RunDirError(ValueError):
    """A directory that cannot be used as asked (a file, another run, nothing to resume, not
    writable...); the message is one line."""


class DirInUse(RunDirError):
    """Another process holds the directory's lock."""


class NotATrainingRun(RunDirError):
    """The directory holds a probe run (`probe run`), not a training run."""


# --- the lock ------------------------------------------------------------------------------------


class DirLock:
    """An exclusive, non-blocking `flock` on `DIR/.lock`, held until `release` (or the process
    ends). `acquire` creates the directory if needed and raises `DirInUse` (one line, naming the
    directory and `holder`) if another process holds it. The lock file is removed on release; a
    process killed keeps it, unlocked, and the next holder reuses it."""

    def __init__(self, directory: str | Path, holder: str = "another process") -> None:
        self.directory, self.holder = Path(directory), holder
        self._file: Any = None

    @property
    def path(self) -> Path:
        return self.directory / LOCK_FILE

    def acquire(self) -> DirLock:
        import fcntl

        self.directory.mkdir(parents=True, exist_ok=True)
        while True:
            f = open(self.path, "a")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                raise DirInUse(
                    f"{self.directory} is in use: {self.holder} holds it ({self.path}); wait for "
                    "it to end or choose another directory"
                ) from None
            try:  # the file may have been removed by a holder releasing it as we opened it
                same = os.path.samestat(os.fstat(f.fileno()), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                self._file = f
                return self
            f.close()

    def release(self) -> None:
        if self._file is not None:
            self.path.unlink(missing_ok=True)  # while still held: nobody locks the removed file
            self._file.close()
            self._file = None

    def __enter__(self) -> DirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def is_locked(directory: str | Path) -> bool:
    """Whether a process holds `directory`'s lock (it still runs there)."""
    import fcntl

    try:
        with open(Path(directory) / LOCK_FILE) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            return False
    except (FileNotFoundError, NotADirectoryError):
        return False


def check_not_in_use(directory: str | Path, holder: str) -> None:
    """Refuse (`DirInUse`) a directory whose lock another process holds."""
    if is_locked(directory):
        d = Path(directory)
        raise DirInUse(
            f"{d} is in use: {holder} holds it ({d / LOCK_FILE}); wait for it to end or choose "
            "another directory"
        )


def check_writable(out: str | Path, what: str = "--out") -> None:
    """Refuse a directory that cannot be created or written, without creating anything."""
    out = Path(out)
    probe_path = out
    while not probe_path.exists():
        if probe_path.parent == probe_path:
            break
        probe_path = probe_path.parent
    if probe_path.exists() and not probe_path.is_dir():
        raise RunDirError(f"{what} {str(out)!r}: {str(probe_path)!r} is a file; give a directory")
    if not os.access(probe_path, os.W_OK | os.X_OK):
        raise RunDirError(
            f"{what} {str(out)!r} is not writable ({str(probe_path)!r} denies writing); "
            "give a directory you can write to"
        )


# --- checkpoints ---------------------------------------------------------------------------------


def checkpoint_path(run_dir: str | Path, step: int) -> Path:
    """Where the resumable checkpoint of `step` (updates done) lives."""
    return Path(run_dir) / CHECKPOINTS_DIR / f"step_{step:08d}"


def _checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """(step, path) of every step_NNNNNNNN entry under checkpoints/, oldest first."""
    root = run_dir / CHECKPOINTS_DIR
    if not root.is_dir():
        return []
    return sorted((int(m.group(1)), p) for p in root.iterdir() if (m := _CKPT_RE.match(p.name)))


def complete_checkpoints(run_dir: str | Path) -> list[Path]:
    """The run's complete resumable checkpoints (every file present), newest first."""
    return [
        path
        for _, path in reversed(_checkpoints(Path(run_dir)))
        if path.is_dir() and all((path / n).is_file() for n in _CHECKPOINT_FILES)
    ]


def incomplete_checkpoints(run_dir: str | Path) -> list[str]:
    """Each step_NNNNNNNN entry under checkpoints/ that is not a complete checkpoint, with what
    it lacks ("step_00000002 (rng.json missing)"), oldest first. A write killed half-way leaves
    only hidden `.step_*.tmp-*` directories (`clean_partial_writes`), so an incomplete entry of
    this name was damaged after it was written."""
    out = []
    for _, path in _checkpoints(Path(run_dir)):
        if not path.is_dir():
            out.append(f"{path.name} (not a directory)")
            continue
        wrong = [
            f"{n} {'missing' if not (path / n).exists() else 'not a regular file'}"
            for n in _CHECKPOINT_FILES
            if not (path / n).is_file()
        ]
        if wrong:
            out.append(f"{path.name} ({', '.join(wrong)})")
    return out


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete resumable checkpoint of a run (None if there is none)."""
    found = complete_checkpoints(run_dir)
    return found[0] if found else None


def checkpoint_bytes(path: str | Path) -> int:
    """The bytes a checkpoint directory's files take."""
    return sum(p.stat().st_size for p in Path(path).iterdir() if p.is_file())


def clean_partial_writes(run_dir: str | Path) -> list[Path]:
    """Remove what a checkpoint write killed half-way left (hidden `.NAME.tmp-*` directories under
    checkpoints/ and beside model/); a `.NAME.old-*` whose NAME is missing is the only copy of a
    checkpoint that was being replaced and is moved back. Call it holding the run's lock.
    Returns what was removed."""
    out = Path(run_dir)
    removed = []
    for parent in (out / CHECKPOINTS_DIR, out):
        if not parent.is_dir():
            continue
        for p in sorted(parent.iterdir()):
            m = _TMP_RE.match(p.name)
            if m is None or not p.is_dir():
                continue
            target = parent / m.group("name")
            if m.group("kind") == "old" and not target.exists():
                os.rename(p, target)
                continue
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p)
    return removed


def prune_checkpoints(run_dir: str | Path, keep: int) -> None:
    """Delete all but the newest `keep` checkpoints."""
    for _, path in _checkpoints(Path(run_dir))[:-keep]:
        shutil.rmtree(path, ignore_errors=True)


def drop_checkpoints_after(run_dir: str | Path, step: int) -> None:
    """Delete the checkpoints of steps after `step`: a resumed run replays those steps."""
    for s, path in _checkpoints(Path(run_dir)):
        if s > step:
            shutil.rmtree(path, ignore_errors=True)


TRAINER = "another trainer"  # who holds a training run's lock


def _read_run_json(run_dir: Path) -> dict[str, Any]:
    """A training run's run.json (RunDirError, one line, if it is missing, damaged, or a probe
    run's)."""

    path = run_dir / RUN_FILE
    if not (path.exists() or path.is_symlink()):
        raise RunDirError(f"nothing to resume in {run_dir}: it holds no training run")
    try:
        info = files.read_json(path)
    except files.FileRefused as e:
        raise RunDirError(f"{e}; start a new run in another directory") from None
    if isinstance(info, dict) and info.get("kind") != "train" and "probe" in info:
        raise NotATrainingRun(
            f"{run_dir} is a probe run directory (`probe run`), not a training run; give "
            "`probe train` a new or empty --out"
        )
    if not (
        isinstance(info, dict)
        and isinstance(info.get("config"), dict)
        and isinstance(info.get("starts"), list)
    ):
        raise RunDirError(
            f"{path} is damaged (expected an object with 'config' and 'starts'); start a new "
            "run in another directory"
        )
    return info


def load_run_config(run_dir: str | Path) -> dict[str, Any]:
    """The resolved config a run was started with (RunDirError if the directory holds no run)."""
    return _read_run_json(Path(run_dir))["config"]


def _is_empty(out: Path) -> bool:
    return not any(p.name != LOCK_FILE for p in out.iterdir())


def check_run_dir(
    out_dir: str | Path, resume: bool, held: bool = False
) -> tuple[Path | None, bool]:
    """Refuse a directory that cannot hold this run (`held`: this job holds its lock); return
    (the checkpoint to resume from, whether a resume starts over: the run has no complete
    checkpoint yet)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise RunDirError(f"--out {out} is a file; give a directory")
    if not held:
        check_not_in_use(out, TRAINER)
    check_writable(out)
    if not resume:
        if out.is_dir() and not _is_empty(out):
            if (out / RUN_FILE).exists():
                try:
                    _read_run_json(out)
                except NotATrainingRun:
                    raise
                except RunDirError:  # a damaged run.json: still another run's
                    pass
                if latest_checkpoint(out) is None:
                    raise RunDirError(
                        f"{out} holds another run with no complete checkpoint yet; start it "
                        "over with --resume or choose another --out"
                    )
                raise RunDirError(
                    f"{out} holds another run; continue it with --resume or choose another --out"
                )
            raise RunDirError(f"{out} is not empty; choose a new or empty --out directory")
        return None, False
    _read_run_json(out)
    latest = latest_checkpoint(out)
    damaged = incomplete_checkpoints(out)
    if latest is None and damaged:  # a damaged run is not one that never checkpointed
        raise RunDirError(
            f"--resume: no checkpoint of {out} is complete ({'; '.join(damaged)}): the run "
            "cannot continue and was left as it is; restore the missing files, or start a new "
            "run in another --out"
        )
    return latest, latest is None


def record_start(
    run_dir: str | Path, config: dict[str, Any], start: dict[str, Any], resume: bool
) -> None:
    """Add one (re)start entry to run.json, creating the directory and the file on a new run."""
    from txl.io import atomic_write, json_safe  # lazy: numpy: only once a run is written

    out = Path(run_dir)
    out.mkdir(parents=True, exist_ok=True)

    info = (
        files.read_json(out / RUN_FILE)  # checked by _read_run_json already
        if resume
        else {"schema_version": 1, "kind": "train", "config": config, "starts": []}
    )
    info["starts"].append(start)
    text = json.dumps(json_safe(info), indent=2, sort_keys=True, allow_nan=False)
    atomic_write(out / RUN_FILE, text + "\n")
