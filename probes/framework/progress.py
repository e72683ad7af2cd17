"""Progress bars and log lines on stderr (rich), silent when disabled: not a terminal, --quiet or
--json. The one place a command builds its progress display."""

from __future__ import annotations

import sys


class Progress:
    """Progress bar and log lines on stderr; silent when disabled (not a TTY, --quiet, --json)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._bar = None
        self._task = None
        self._console = None
        if enabled:
            from rich.console import Console

            self._console = Console(file=sys.stderr)

    @classmethod
    def auto(cls, quiet: bool = False) -> Progress:
        return cls(enabled=not quiet and sys.stderr.isatty())

    def log(self, message: str) -> None:
        if self._console is not None:
            self._console.print(f"[dim]{message}[/dim]", highlight=False)

    def start(self, total: int, description: str) -> None:
        if not self.enabled:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import (
            Progress as RichProgress,
        )

        self.stop()
        self._bar = RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self._console,
            transient=True,
        )
        self._bar.start()
        self._task = self._bar.add_task(description, total=total)

    def advance(self, k: int = 1) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, k)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
