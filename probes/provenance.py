"""Where a result came from: code version, library versions, machine.

Everything here is cheap and never fails a run: a value that cannot be found is recorded as None.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def git_state(root: Path = REPO_ROOT) -> dict:
    """{"commit": sha or None, "dirty": bool or None} of the checkout the code runs from."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", "-C", str(root), *args],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip(), "dirty": None if status is None else bool(status.strip())}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict:
    """Versions of python and the libraries a result depends on (imports only what is loaded)."""
    out = {
        "python": platform.python_version(),
        "txl-probes": _version("txl-probes"),
        "numpy": _version("numpy"),
        "scipy": _version("scipy"),
        "torch": None,
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        out["torch"] = torch.__version__
    else:
        out["torch"] = _version("torch")
    return out


def cpu_count() -> int:
    """Cores this process may use (the affinity mask, not the machine's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def machine() -> dict:
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": cpu_count(),
    }
