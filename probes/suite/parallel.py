"""Running the probe runs of a diagnose side by side (`probe diagnose --jobs N`): each in a process
of its own that runs one probe into the diagnose's directory (the command the caller names:
`probe diagnose --resume DIR --only PROBE`), at most N at once, in suite order; the finished
runs are then read back as a resumed diagnose reads them.

A probe run's numbers depend on its inputs, its thread count and its kernels, never on what runs
beside it, and every worker computes at the count and with the kernels the diagnose recorded:
the rows are those of one process running the probes one after the other, bit for bit. A real
model on a CPU gains most (a diagnose of hours, each probe at one thread, one per core).

The workers start in sessions of their own, so that Ctrl-C reaches the diagnose alone, which
then stops each worker once (SIGTERM: each records its run as interrupted, keeping what it
scored) and records itself as interrupted; `--resume` takes it all back. A worker asks the
kernel for SIGTERM when the diagnose dies (`follow_parent`), so a diagnose killed outright
leaves no worker computing alone, and each worker's run still reads as interrupted."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from probes.api.model import row_bytes
from probes.api.probe_base import ProbeInputError
from probes.limits import LimitError, require_memory, resident_bytes
from probes.suite.plan import SuiteRun
from probes.suite.store import finished

# a worker's exit codes (probes.cli.errors): finished (its check passed or failed), bad input,
# interrupted by SIGINT / SIGTERM
FINISHED_CODES = (0, 1)
BAD_INPUT = 2
INTERRUPTED_CODES = (130, 143, -signal.SIGINT, -signal.SIGTERM)

POLL_S = 0.5
# how long a stopped worker may take to record its run: a forward pass in progress finishes
# first (minutes for a long row of a real model on a CPU at one thread), then SIGKILL (its run
# then reads "dead", and its scored chunks still resume)
STOP_GRACE_S = 600.0

Worker = Callable[[Path, str, bool], list[str]]  # (diagnose dir, probe, quiet) → command line

# in a worker's environment: the process id of the diagnose that started it
PARENT = "PROBES_DIAGNOSE_PID"
PR_SET_PDEATHSIG = 1  # linux/prctl.h


class Relay(threading.Thread):
    """A worker's stderr, line by line, to the diagnose's progress (prefixed with its probe),
    keeping its last line: a worker that failed says why there."""

    def __init__(self, name: str, stream, progress: Any) -> None:
        super().__init__(daemon=True)
        self.probe, self.stream, self.progress = name, stream, progress
        self.last = ""

    def run(self) -> None:
        for raw in self.stream:
            line = raw.rstrip("\n")
            if line.strip():
                self.last = line
                named = line.startswith(f"{self.probe}: ")  # its progress lines name it
                self.progress.relay(line if named else f"{self.probe}: {line}")


class Started:
    """A running worker: its process, the suite run it computes and its relay."""

    def __init__(self, run: SuiteRun, command: list[str], progress: Any) -> None:
        self.run = run
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            errors="backslashreplace",
            start_new_session=True,
            env={**os.environ, PARENT: str(os.getpid())},
        )
        self.relay = Relay(run.name, self.process.stderr, progress)
        self.relay.start()

    def ended(self) -> int | None:
        code = self.process.poll()
        if code is not None:
            self.relay.join()
        return code


def left_to_run(runs: list[SuiteRun], resume: Path | None) -> list[SuiteRun]:
    """The runs a diagnose still has to compute: all of a new one, those a resumed one did not
    finish."""
    if resume is None:
        return list(runs)
    return [r for r in runs if finished(r, Path(resume) / "runs") is None]


def check_memory(workers: int, model: Any, geometry: Any) -> None:
    """Refuse `workers` processes that would not fit in memory, before any is started: each
    holds about what this process holds now (the model loaded, texts planned) and one forward
    row. ProbeInputError (one line)."""
    if workers < 2:
        return
    each = resident_bytes() + (row_bytes(model, geometry) or 0)
    try:
        require_memory(
            f"--jobs {workers} ({workers} processes, each with its own copy of {model.info.id})",
            workers * each,
            "lower --jobs",
        )
    except LimitError as e:
        raise ProbeInputError(str(e)) from None


def follow_parent() -> None:
    """In a worker the diagnose started: have the kernel send this process SIGTERM when the
    diagnose dies (Linux; elsewhere nothing), and stop at once if it already has. A worker
    started by hand (`--only`) is left alone."""
    parent = os.environ.get(PARENT)
    if parent is None or not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl in this libc: the worker outlives a killed parent
        return
    if str(os.getppid()) != parent:  # it died before the request: the signal will not come
        signal.raise_signal(signal.SIGTERM)


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM wait while a worker starts and is listed, then arrive: a worker
    started but not yet listed would never be stopped. (Python runs signal handlers in the
    main thread only; elsewhere there is nothing to hold.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.signal(s, lambda signum, frame: caught.append(signum)) for s in held}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if caught:
            signal.raise_signal(caught[0])


def run_parallel(
    runs: list[SuiteRun], run_dir: Any, progress: Any, jobs: int, worker: Worker, keep: bool
) -> None:
    """Run the suite into `run_dir/runs`, up to `jobs` probe runs at once, each in a `worker`
    process; `keep` (a resumed run): a run an earlier attempt finished is read back. After a
    worker fails no other starts, and once the live ones have ended the diagnose raises
    ProbeInputError (the worker's bad input, one line), KeyboardInterrupt (a worker interrupted
    from outside) or RuntimeError (a worker's internal error, or one killed)."""
    runs_dir = run_dir.path / "runs"
    pending: list[SuiteRun] = []
    for r in runs:
        done = finished(r, runs_dir) if keep else None
        if done is not None:
            where = os.path.relpath(done["run_dir"], run_dir.path)
            progress.log(f"diagnose: {r.name} kept from {where}")
            r.summary = done
        else:
            pending.append(r)
    quiet = not progress.enabled
    live: list[Started] = []
    failures: list[tuple[SuiteRun, int, str]] = []
    try:
        while pending or live:
            while pending and len(live) < jobs and not failures:
                r = pending.pop(0)
                progress.log(f"diagnose: {r.name} starts in a process of its own")
                with signals_held():
                    live.append(Started(r, worker(run_dir.path, r.name, quiet), progress))
            if failures and not live:
                break
            time.sleep(POLL_S)
            for w in [w for w in live if w.ended() is not None]:
                live.remove(w)
                code = w.process.returncode
                done = finished(w.run, runs_dir) if code in FINISHED_CODES else None
                if done is None:
                    failures.append((w.run, code, w.relay.last))
                else:
                    w.run.summary = done
    except BaseException:
        stop(live)
        raise
    if failures:
        raise_failure(*failures[0])


def raise_failure(run: SuiteRun, code: int, last: str) -> None:
    """The first worker that did not finish its run, as the diagnose's own failure: its
    one-line error where it wrote one (a last line that is a progress line says nothing)."""
    said = last if last.startswith(("error: ", "internal error: ")) else ""
    if code == BAD_INPUT:
        raise ProbeInputError(f"{run.name}: {said.removeprefix('error: ') or 'bad input'}")
    if code in INTERRUPTED_CODES:
        raise KeyboardInterrupt(f"{run.name}'s process was interrupted")
    if code < 0:
        try:
            by = signal.Signals(-code).name
        except ValueError:  # a signal Python has no name for
            by = f"signal {-code}"
        raise RuntimeError(f"{run.name}'s process was killed by {by}")
    raise RuntimeError(
        f"{run.name}'s process ended with exit code {code}: {said or 'no error line'}"
    )


def stop(live: list[Started]) -> None:
    """SIGTERM each live worker once and wait for it to record its run; SIGKILL what is left
    after STOP_GRACE_S (or at a second interruption of the diagnose itself)."""
    try:
        for w in live:
            if w.process.poll() is None:
                w.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for w in live:
            w.process.wait(timeout=max(0.0, deadline - time.monotonic()))
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        pass
    finally:
        for w in live:
            if w.process.poll() is None:
                w.process.kill()
                w.process.wait()
            w.relay.join(timeout=5)
