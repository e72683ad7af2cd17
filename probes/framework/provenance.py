"""Where a result came from: code version, library versions, machine.

Everything here is cheap and never fails a run: a value that cannot be found is recorded as None.
"""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from txl.process_rank import usable_cores

REPO_ROOT = Path(__file__).resolve().parents[2]  # the checkout, when running from one
PROJECT = "txl-probes"


def _is_project_checkout(top: Path) -> bool:
    """Whether `top` (a git work tree's top) is this project: its pyproject.toml names it."""
    import tomllib

    try:
        with open(top / "pyproject.toml", "rb") as f:
            return tomllib.load(f).get("project", {}).get("name") == PROJECT
    except (OSError, tomllib.TOMLDecodeError):
        return False


def git_state(root: Path = REPO_ROOT) -> dict:
    """{"commit": sha or None, "dirty": bool or None} of the checkout the code runs from.

    Only this project's own checkout counts: the package's parent directory must be the top of a
    git work tree whose pyproject.toml names txl-probes (how the project is laid out). A
    non-editable install records None — also one in a virtual environment inside another
    repository (or inside this one: the installed copy need not be the checked-out code)."""

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

    none = {"commit": None, "dirty": None}
    top = git("rev-parse", "--show-toplevel")
    if top is None:
        return none
    top_dir = Path(top.strip()).resolve()
    # this project keeps its packages at the top of its checkout: anything else is an install
    if top_dir != Path(root).resolve() or not _is_project_checkout(top_dir):
        return none
    commit = git("rev-parse", "HEAD")
    if commit is None:
        return none
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip(), "dirty": None if status is None else bool(status.strip())}


def portable_argv(argv: list[str] | None) -> list[str] | None:
    """The command line as typed, its program named without this machine's path
    (`/home/me/.venv/bin/probe` → `probe`): run.json travels to other machines."""
    if argv is None:
        return None
    words = [str(a) for a in argv]
    if words:
        words[0] = Path(words[0]).name
    return words


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


def cpu_model() -> str | None:
    """The CPU's model name (Linux's /proc/cpuinfo; None elsewhere). Float kernels take other
    paths on other CPUs, so a CPU run's last bits are this CPU's (`probe rerun` says so)."""
    try:
        with open("/proc/cpuinfo", "rb") as f:
            head = f.read(1 << 16).decode("utf-8", "replace")
    except OSError:
        return None
    for line in head.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and value.strip():
            return value.strip()
    return None


def cpu_kernels() -> str | None:
    """The vector instruction set torch's CPU kernels dispatch to here ("AVX512", "AVX2", …);
    None while torch is not loaded (a torch-free run computes no model's numbers)."""
    torch = sys.modules.get("torch")
    try:
        return None if torch is None else str(torch.backends.cpu.get_cpu_capability())
    except (AttributeError, RuntimeError):
        return None


def machine() -> dict:
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu": cpu_model(),
        "cpu_kernels": cpu_kernels(),
        "cpu_count": usable_cores(),
    }
