"""`probe` restarting itself with the float kernels a run asks for (`--kernels`, or a rerun's
recorded ones). Each library reads its kernel setting when it loads, glibc's when the process
starts (probes/framework/kernels.py), so a new process is the only way to change them: the
same command line, exec'd in place with the settings in its environment (the process id, its
open files and its exit code stay the command's).

Only the `probe` process restarts (`main()` allows it, once): a command invoked inside another
Python process (a test's CliRunner, a notebook) keeps that process's kernels, and the runner
refuses an explicit mode it does not have."""

from __future__ import annotations

import os
import sys

from probes.framework import kernels

MARK = "PROBE_RESTARTED_FOR_KERNELS"  # in the restarted process's environment, then removed

_allowed: list[bool] = []


def allow() -> None:
    """Let this process restart for its kernels (the `probe` command's `main()`), unless it is
    itself a restart: a second one would mean the settings did not take."""
    restarted = os.environ.pop(MARK, None) is not None
    _allowed[:] = [not restarted]


def kernels_for(requested: str | None) -> str | None:
    """Make `requested` (None: `kernels.default_mode()`) this process's kernels: return it when
    they already are; else restart the process with them where allowed (no return); else return
    `requested` unchanged, for the runner to check (`kernels.check`)."""
    want = requested or kernels.default_mode()
    if kernels.in_effect() == want:
        return want
    if not (_allowed and _allowed[0]) or (want == "portable" and not kernels.is_x86_64()):
        return requested  # None: whichever this process has
    env = kernels.portable_environment() if want == "portable" else kernels.native_environment()
    env[MARK] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    # the interpreter's own command line, its flags (-u under torchrun, -X, -W) included: the
    # `probe` script or `-m probes.cli` starts again, and run.json's argv still reads `probe …`
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
    raise AssertionError("unreachable")  # pragma: no cover
