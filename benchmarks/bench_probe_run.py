"""`probe run fact-swap --mem 640` — the main job — as a researcher runs it: wall time including
start-up (a fresh process each time) and peak RSS, beside a floor measured in the same run
(`python -c "import torch"`), with the KV memory (the default) and with `--cache hidden` (the
memory every run used before); plus `--quick` and the start-up of `probe list`. Each job runs
ROUNDS times, interleaved, and its best wall time counts (other processes only add time).

Targets (printed, never asserted): the main job ≤ 4× the import-torch floor and ≤ 600 MB peak
RSS; `probe list` ≤ 0.3 s. `probe` skips the interpreter's teardown at exit, so the floor is
also printed without it (`os._exit` after `import torch`), for the ratio on equal terms.

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
ROUNDS = 3
FLOOR_RATIO_TARGET = 4.0
RSS_TARGET_MB = 600

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


def best_of(jobs: dict[str, list[str]], rounds: int = ROUNDS) -> dict[str, tuple]:
    """Each job `rounds` times, interleaved: (best wall, its peak RSS MiB, exit code, stdout)."""
    best: dict[str, tuple] = {}
    for _ in range(rounds):
        for name, argv in jobs.items():
            got = measure(argv)
            if name not in best or got[0] < best[name][0]:
                best[name] = got
    return best


def _pairs(stdout: str) -> str:
    try:
        return str(json.loads(stdout)["n_pairs"])
    except (json.JSONDecodeError, KeyError, TypeError):
        return "—"


def run(console) -> None:
    from rich.table import Table

    from probes.framework.provenance import cpu_count

    model = Path(os.environ.get("PROBES_BENCH_MODEL", DEFAULT_MODEL))
    probe = [sys.executable, "-m", "probes.cli"]
    floor = [sys.executable, "-c", "import torch"]
    table = Table(title=f"probe run on {cpu_count()} cores · model {model} · best of {ROUNDS}")
    for h in (
        "command",
        "wall s",
        "× floor",
        "× floor w/o teardown",
        "target",
        "peak RSS MB",
        "target MB",
        "pairs",
        "exit",
    ):
        table.add_column(h, justify="right" if h != "command" else "left", no_wrap=True)
    if not (model / "config.json").is_file():
        got = best_of({"list": [*probe, "list"]})
        table.add_row("probe list", f"{got['list'][0]:.2f}", "", "0.3 s", "", "", "—", "")
        console.print(table)
        console.print(
            f"[yellow]skipped probe run: no model at {model} (set PROBES_BENCH_MODEL=DIR to "
            "measure another checkpoint)[/yellow]"
        )
        return
    with tempfile.TemporaryDirectory() as out:
        main = [*probe, "run", "fact-swap", "--mem", "640", "--model", str(model)]
        main += ["--out", out, "--json"]
        jobs = {
            'python -c "import torch" (the floor)': floor,
            "  … without the interpreter's teardown": [
                sys.executable,
                "-c",
                "import os, torch; os._exit(0)",
            ],
            "probe list": [*probe, "list"],
            "probe run fact-swap --mem 640": main,
            "  … --cache hidden": [*main, "--cache", "hidden"],
            "  … --quick": [*main, "--quick"],
        }
        got = best_of(jobs)
    base = got['python -c "import torch" (the floor)'][0]
    bare = got["  … without the interpreter's teardown"][0]
    for name, (wall, rss, code, stdout) in got.items():
        is_main = name.startswith("probe run") or name.startswith("  … --cache")
        table.add_row(
            name,
            f"{wall:.2f}",
            f"{wall / base:.1f}×",
            f"{wall / bare:.1f}×",
            f"≤ {FLOOR_RATIO_TARGET:.0f}×"
            if is_main
            else ("0.3 s" if name == "probe list" else ""),
            f"{rss:.0f}",
            f"{RSS_TARGET_MB}" if is_main else "",
            _pairs(stdout) if name.startswith(("probe run", "  …")) else "—",
            str(code),
        )
    console.print(table)
    console.print(
        '× floor: wall time over `python -c "import torch"` measured in the same run; '
        "--cache hidden is the hidden-state memory every run used before the KV memory "
        "(the start-up changes apply to both). `probe` itself exits without the interpreter's "
        "teardown (probes.cli.main.leave): the second line is the floor on those terms, and "
        "the column beside × floor divides by it"
    )
