"""`probe` leaves without the interpreter's teardown (probes.cli.main.leave), yet as a normal exit
would: its exit code, atexit handlers run, other threads finished, buffered output written."""

import subprocess
import sys

LEAVES = """
import atexit, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
from probes.cli.main import leave

atexit.register(lambda: print("atexit ran"))
def late():
    time.sleep(0.3)
    print("thread finished")
threading.Thread(target=late).start()
pool = ThreadPoolExecutor(1)  # its worker waits for work until threading's exit hook stops it
pool.submit(time.sleep, 0).result()
sys.stdout.write("buffered, no newline")
leave(3)
"""


def test_leave_keeps_the_code_runs_atexit_joins_threads_and_stops_pools_and_flushes():
    p = subprocess.run([sys.executable, "-c", LEAVES], capture_output=True, text=True, timeout=60)
    assert p.returncode == 3, p.stderr
    assert p.stdout.splitlines() == ["buffered, no newlinethread finished", "atexit ran"]


def test_the_command_exits_with_its_own_code():
    ok = subprocess.run([sys.executable, "-m", "probes.cli", "list"], capture_output=True)
    bad = subprocess.run(
        [sys.executable, "-m", "probes.cli", "run", "no-such-probe"], capture_output=True, text=True
    )
    assert ok.returncode == 0 and b"fact-swap" in ok.stdout
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
