"""Run the `probe` CLI in a child process under a memory cap (never in the pytest process, where
torch maps gigabytes of virtual memory): a regression that allocates without bound fails its
test instead of exhausting the machine."""

import os
import resource
import subprocess
import sys
from pathlib import Path

CAP = 4 * 2**30  # bytes of address space a child may map (torch maps ~1-2 GiB on import)
ROOT = Path(__file__).resolve().parents[1]


def _cap() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def probe(*args: str, cwd, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m probes.cli ARGS` in `cwd`, capped, stdin closed."""
    return subprocess.run(
        [sys.executable, "-m", "probes.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        preexec_fn=_cap,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
