"""SIGINT and SIGTERM during training: finish the step in flight, save a checkpoint, stop."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any


class TrainingInterrupted(Exception):
    """SIGINT or SIGTERM: the run saved a checkpoint after the step in flight and stopped."""

    def __init__(self, signum: int, step: int, checkpoint: Path | None) -> None:
        name = signal.Signals(signum).name
        where = f"checkpoint {checkpoint}" if checkpoint else "no checkpoint (no step was done)"
        super().__init__(f"{name} at step {step}: saved {where}; continue with --resume")
        self.signum, self.step, self.checkpoint = signum, step, checkpoint


class StopSignals:
    """Inside the block SIGINT/SIGTERM set `signum` (the loop checks it after each step); a second
    SIGINT stops at once. Outside the main thread signals cannot be caught: nothing is changed."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signum = signum

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
