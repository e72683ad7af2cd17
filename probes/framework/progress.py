"""Progress on stderr: a live bar on a terminal (rich), a line every LINE_EVERY_S seconds
otherwise (a log file, a batch job), nothing with --quiet or --json. The one place a command
builds its progress display.

The time left is estimated from work, not steps, when the caller says what each step costs
(`start(work=…)`: e.g. the tokens a pair's texts hold): runs score short texts first, so an
estimate by steps would promise the long ones too soon. Steps a resumed run takes back from
the one it continues (`advance(k, kept=True)`) count as done but not toward the pace, which
only the work this process computed sets."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

LINE_EVERY_S = 30.0  # a progress line at most this often when stderr is not a terminal


def _clock(seconds: float) -> str:
    s = round(seconds)
    return (
        f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
    )


class Progress:
    """Progress bar (a terminal) or periodic lines (anything else) on stderr; silent when
    disabled (--quiet, --json)."""

    def __init__(self, enabled: bool, live: bool | None = None):
        self.enabled = enabled
        self.live = sys.stderr.isatty() if live is None else live
        self._bar = None
        self._task = None
        self._console = None
        self._plan: _Plan | None = None
        if enabled:
            from rich.console import Console

            self._console = Console(file=sys.stderr)

    @classmethod
    def auto(cls, quiet: bool = False) -> Progress:
        return cls(enabled=not quiet)

    def log(self, message: str) -> None:
        """A status line (loading …) on a terminal; without one only the periodic progress
        lines are written, so a refused run's stderr stays its one-line error."""
        if self.live:
            self._emit(message)

    def relay(self, message: str) -> None:
        """A line another process wrote (a worker of `probe diagnose --jobs`: its progress
        lines, or its one-line error), shown whenever progress is."""
        if self.enabled:
            self._emit(message)

    def _emit(self, message: str) -> None:
        if self._console is None:
            return
        if self.live:
            self._console.print(f"[dim]{message}[/dim]", highlight=False)
            return
        # a log file or a pipe gets each line whole and as written (no terminal folds it, no
        # markup is read in it); a reader gone (EPIPE: a worker's diagnose killed) ends the
        # lines, never the run, which still records how it ends
        try:
            self._console.file.write(message + "\n")
            self._console.file.flush()
        except (OSError, ValueError):
            self.enabled = False
            self._console = None

    def start(self, total: int, description: str, work: Sequence[float] | None = None) -> None:
        """Begin `total` steps; `work[i]` is what step i costs (None: every step the same)."""
        if not self.enabled:
            return
        self.stop()
        self._plan = _Plan(total, description, work)
        if not self.live:
            return
        from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        self._bar = RichProgress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[steps]}"),
            TimeElapsedColumn(),
            TextColumn("{task.fields[left]}"),
            console=self._console,
            transient=True,
        )
        self._bar.start()
        self._task = self._bar.add_task(description, total=1.0, steps=f"0/{total}", left="")

    def advance(self, k: int = 1, kept: bool = False) -> None:
        """`k` more steps done; `kept`: taken back from an interrupted run, not computed now."""
        plan = self._plan
        if plan is None:
            return
        plan.advance(k, kept)
        if self._bar is not None:
            self._bar.update(
                self._task, completed=plan.fraction, steps=f"{plan.done}/{plan.total}",
                left=plan.left_text(),
            )  # fmt: skip
        elif time.monotonic() - plan.last_line >= LINE_EVERY_S:
            plan.last_line = time.monotonic()
            self._emit(plan.line())

    def stop(self) -> None:
        plan = self._plan
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        elif plan is not None and plan.lines_written and plan.printed_at != plan.done:
            self._emit(plan.line())  # where it ended, after the lines before it
        self._plan = None


class _Plan:
    """Steps done, work done and the clock of one `start`."""

    def __init__(self, total: int, description: str, work: Sequence[float] | None):
        self.total, self.description = total, description
        self.work = [float(w) for w in work] if work is not None else [1.0] * total
        self.all_work = sum(self.work) or 1.0
        self.done = 0
        self.done_work = 0.0
        self.computed_work = 0.0  # done_work less what was taken back: what the clock paid for
        self.t0 = time.monotonic()
        self.last_line = self.t0
        self.lines_written = False
        self.printed_at = -1  # the steps done when the last line was written

    def advance(self, k: int, kept: bool) -> None:
        work = sum(self.work[self.done : self.done + k])
        self.done_work += work
        if not kept:
            self.computed_work += work
        self.done = min(self.total, self.done + k)

    @property
    def fraction(self) -> float:
        return min(1.0, self.done_work / self.all_work)

    def left_text(self) -> str:
        if self.computed_work <= 0 or self.fraction >= 1:
            return ""
        pace = (time.monotonic() - self.t0) / self.computed_work  # seconds per unit of work
        return f"about {_clock(pace * max(0.0, self.all_work - self.done_work))} left"

    def line(self) -> str:
        self.lines_written = True
        self.printed_at = self.done
        elapsed = _clock(time.monotonic() - self.t0)
        left = self.left_text()
        return (
            f"{self.description}: {self.done}/{self.total} ({100 * self.fraction:.0f}% of the "
            f"work), {elapsed} elapsed{', ' + left if left else ''}"
        )
