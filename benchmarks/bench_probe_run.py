"""`probe run fact-swap --mem 640` as a researcher runs it: wall time including start-up (the
process is started fresh) and peak RSS, at the default --n and with --quick; plus the start-up of
`probe list`. Targets (printed, never asserted): ≤ 30 s, --quick ≤ 10 s, ≤ 1 GB, list ≤ 0.3 s,
on 2 cores.

Runs on the shipped default model (probes/models/default); set PROBES_BENCH_MODEL=DIR to measure
another checkpoint. Skipped with a message while no model is there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODEL = ROOT / "probes" / "models" / "default"

# Runs one command and prints its peak RSS (KiB) as the last line: ru_maxrss of the only child.
_MEASURE = (
    "import resource, subprocess, sys\n"
    "r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)\n"
    "sys.stdout.write(r.stdout)\n"
    "sys.stderr.write(r.stderr)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(r.returncode)\n"
)


def measure(argv: list[str]) -> tuple[float, float, int, str]:
    """(wall seconds, peak RSS MiB, exit code, stdout without the RSS line) of a fresh process."""
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-c", _MEASURE, *argv], capture_output=True, text=True, cwd=ROOT
    )
    wall = time.perf_counter() - t0
    lines = r.stdout.rstrip("\n").splitlines()
    rss_kib = int(lines[-1]) if lines and lines[-1].isdigit() else 0
    return wall, rss_kib / 1024, r.returncode, "\n".join(lines[:-1]) or r.stderr.strip()


def run(console) -> None:
    from rich.table import Table

    from probes.framework.provenance import cpu_count

    model = Path(os.environ.get("PROBES_BENCH_MODEL", DEFAULT_MODEL))
    probe = [sys.executable, "-m", "probes.cli"]
    table = Table(title=f"probe run on {cpu_count()} cores · model {model}")
    for h in ("command", "wall s", "target s", "peak RSS MB", "target MB", "pairs", "exit"):
        table.add_column(h, justify="right" if h != "command" else "left", no_wrap=True)

    wall, rss, code, _ = measure([*probe, "list"])
    table.add_row("probe list", f"{wall:.2f}", "0.3", f"{rss:.0f}", "—", "—", str(code))
    if not (model / "config.json").is_file():
        console.print(table)
        console.print(
            f"[yellow]skipped probe run: no model at {model} (the default model is not shipped "
            "yet; set PROBES_BENCH_MODEL=DIR to measure another checkpoint)[/yellow]"
        )
        return
    with tempfile.TemporaryDirectory() as out:
        for extra, target in (([], 30.0), (["--quick"], 10.0)):
            argv = [*probe, "run", "fact-swap", "--mem", "640", "--model", str(model)]
            argv += ["--out", out, "--json", *extra]
            wall, rss, code, stdout = measure(argv)
            pairs = "—"
            try:
                pairs = str(json.loads(stdout)["n_pairs"])
            except (json.JSONDecodeError, KeyError):
                pass
            name = "probe run fact-swap --mem 640" + (" --quick" if extra else "")
            table.add_row(
                name, f"{wall:.1f}", f"{target:.0f}", f"{rss:.0f}", "1024", pairs, str(code)
            )
    console.print(table)
