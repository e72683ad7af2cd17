"""Progress on stderr: lines when stderr is not a terminal, the time left estimated from work.
The clock is a stand-in the tests set, so nothing here depends on how fast the machine is."""

import io
import sys

import pytest

from probes.framework import progress as progress_module
from probes.framework.progress import Progress


def captured(monkeypatch) -> io.StringIO:
    """stderr as a string, set in the test's own phase (pytest's capture resets sys.stderr
    between setup and call)."""
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    return err


@pytest.fixture
def clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: now[0])
    return now


def test_without_a_terminal_progress_is_lines_and_the_time_left_follows_the_work(
    monkeypatch, clock
):
    stderr = captured(monkeypatch)
    p = Progress(enabled=True, live=False)
    p.start(4, "fact-swap: scoring pairs", work=[1, 1, 1, 5])  # short texts first
    clock[0] = 40.0
    p.advance(2)  # 40 s for 2 of 8 units of work: 120 s left, not the 40 s steps would say
    clock[0] = 50.0
    p.advance(1)  # within 30 s of the last line: no line
    p.stop()
    lines = stderr.getvalue().splitlines()
    assert lines[0].startswith("fact-swap: scoring pairs: 2/4 (25% of the work), 0:40 elapsed")
    assert "about 2:00 left" in lines[0]
    assert len(lines) == 2 and lines[1].startswith("fact-swap: scoring pairs: 3/4")


def test_after_a_resume_the_time_left_is_paced_by_the_work_computed_not_the_work_taken_back(
    monkeypatch, clock
):
    stderr = captured(monkeypatch)
    p = Progress(enabled=True, live=False)
    p.start(4, "fact-rebind: scoring pairs", work=[1, 1, 1, 5])
    p.advance(2, kept=True)  # taken back from the interrupted run at once: no pace from it
    clock[0] = 40.0
    p.advance(1)  # 40 s for 1 unit computed: 5 units left take 200 s (by all 3 done: 67 s)
    p.stop()
    (line,) = stderr.getvalue().splitlines()
    assert line.startswith("fact-rebind: scoring pairs: 3/4 (38% of the work), 0:40 elapsed")
    assert line.endswith("about 3:20 left"), line


def test_only_taken_back_work_gives_no_time_left(monkeypatch, clock):
    stderr = captured(monkeypatch)
    p = Progress(enabled=True, live=False)
    p.start(3, "x")
    clock[0] = 40.0
    p.advance(1, kept=True)
    p.stop()
    (line,) = stderr.getvalue().splitlines()
    assert line.endswith("0:40 elapsed"), line


def test_quiet_progress_writes_nothing(monkeypatch):
    stderr = captured(monkeypatch)
    p = Progress.auto(quiet=True)
    p.start(3, "x")
    p.advance(3)
    p.stop()
    assert stderr.getvalue() == ""


def test_the_last_line_is_not_repeated_when_the_run_ends_on_it(monkeypatch, clock):
    stderr = captured(monkeypatch)
    p = Progress(enabled=True, live=False)
    p.start(2, "x")
    clock[0] = 40.0
    p.advance(2)
    p.stop()
    assert len(stderr.getvalue().splitlines()) == 1


def test_a_long_progress_line_stays_one_line_in_a_log(monkeypatch, clock):
    stderr = captured(monkeypatch)
    p = Progress(enabled=True, live=False)
    p.start(96, "fact-swap: scoring pairs of a long description " * 3)
    clock[0] = 6000.0
    p.advance(1)
    p.stop()
    lines = stderr.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].endswith("left"), lines
