"""A training run's directory: its layout, the checkpoint to resume from, and its run.json.

    run.json            resolved config, command and one entry per (re)start
    metrics.jsonl       {"kind": "train", "step", "loss", "lr", ...} per step,
                        {"kind": "eval", "step", ...} per evaluation; step = updates done
    checkpoints/step_NNNNNNNN/   resumable (train_state.pt + rng.json), the newest kept
    model/              the final model (no train state), with metrics.jsonl and COMMAND

Plain files: no torch or numpy import, so that `RunDirError` can be raised and caught by code that
must start fast.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

RUN_FILE = "run.json"
CHECKPOINTS_DIR = "checkpoints"
MODEL_DIR = "model"
_CKPT_RE = re.compile(r"^step_(\d{8,})$")
_CHECKPOINT_FILES = ("config.json", "model.safetensors", "train_state.pt", "rng.json")


class RunDirError(ValueError):
    """A directory that cannot be used as asked (a file, another run, nothing to resume, not
    writable...); the message is one line."""


def checkpoint_path(run_dir: str | Path, step: int) -> Path:
    """Where the resumable checkpoint of `step` (updates done) lives."""
    return Path(run_dir) / CHECKPOINTS_DIR / f"step_{step:08d}"


def _checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """(step, path) of every step_NNNNNNNN entry under checkpoints/, oldest first."""
    root = run_dir / CHECKPOINTS_DIR
    if not root.is_dir():
        return []
    return sorted((int(m.group(1)), p) for p in root.iterdir() if (m := _CKPT_RE.match(p.name)))


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete resumable checkpoint of a run (None if there is none)."""
    for _, path in reversed(_checkpoints(Path(run_dir))):
        if path.is_dir() and all((path / n).is_file() for n in _CHECKPOINT_FILES):
            return path
    return None


def prune_checkpoints(run_dir: str | Path, keep: int) -> None:
    """Delete all but the newest `keep` checkpoints."""
    for _, path in _checkpoints(Path(run_dir))[:-keep]:
        shutil.rmtree(path, ignore_errors=True)


def drop_checkpoints_after(run_dir: str | Path, step: int) -> None:
    """Delete the checkpoints of steps after `step`: a resumed run replays those steps."""
    for s, path in _checkpoints(Path(run_dir)):
        if s > step:
            shutil.rmtree(path, ignore_errors=True)


def load_run_config(run_dir: str | Path) -> dict[str, Any]:
    """The resolved config a run was started with (RunDirError if the directory holds no run)."""
    path = Path(run_dir) / RUN_FILE
    try:
        return json.loads(path.read_text())["config"]
    except FileNotFoundError:
        raise RunDirError(f"nothing to resume in {run_dir}: it holds no training run") from None
    except (json.JSONDecodeError, KeyError, TypeError):
        raise RunDirError(f"{path} is damaged; start a new run in another directory") from None


def check_run_dir(out_dir: str | Path, resume: bool) -> Path | None:
    """Refuse a directory that cannot hold this run; return the checkpoint to resume from."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise RunDirError(f"--out {out} is a file; give a directory")
    if not resume:
        if out.is_dir() and any(out.iterdir()):
            if (out / RUN_FILE).exists():
                raise RunDirError(
                    f"{out} holds another run; continue it with --resume or choose another --out"
                )
            raise RunDirError(f"{out} is not empty; choose a new or empty --out directory")
        return None
    load_run_config(out)
    ckpt = latest_checkpoint(out)
    if ckpt is None:
        raise RunDirError(f"nothing to resume in {out}: the run has no complete checkpoint yet")
    return ckpt


def record_start(
    run_dir: str | Path, config: dict[str, Any], start: dict[str, Any], resume: bool
) -> None:
    """Add one (re)start entry to run.json, creating the directory and the file on a new run."""
    from txl.io import atomic_write, json_safe  # numpy: only once a run is written

    out = Path(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    info = (
        json.loads((out / RUN_FILE).read_text())
        if resume
        else {"schema_version": 1, "kind": "train", "config": config, "starts": []}
    )
    info["starts"].append(start)
    text = json.dumps(json_safe(info), indent=2, sort_keys=True, allow_nan=False)
    atomic_write(out / RUN_FILE, text + "\n")
