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


def probe(
    *args: str, cwd, timeout: float = 300, module: str = "probes.cli", env=None, **kw
) -> subprocess.CompletedProcess:
    """`python -m probes.cli ARGS` (or another `module`) in `cwd`, capped, stdin closed; `env`:
    variables set on top of this process's, `kw`: more of subprocess.run's arguments."""
    kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        errors="replace",
        cwd=cwd,
        preexec_fn=_cap,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        **kw,
    )
