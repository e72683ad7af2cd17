"""Where the main job's time goes (`probe run fact-swap --mem 640`): the imports that cost the
most (`python -X importtime`) and a wall-time breakdown by phase (the job under cProfile: each
phase's cumulative time, so the profiler's own overhead is in every row). Measures and prints;
never asserts. The shipped default model, or PROBES_BENCH_MODEL=DIR.
"""

from __future__ import annotations

import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bench_probe_run import DEFAULT_MODEL, ROOT

TOP_IMPORTS = 10
# (phase, a path ending, a function name): cumulative seconds of that function in the profile
PHASES = (
    ("whole command (the probe CLI)", "probes/cli/main.py", "main"),
    ("prepare: check, load, plan", "probes/framework/runner.py", "prepare"),
    ("  import torch", "torch/__init__.py", "<module>"),
    ("  load the checkpoint", "probes/adapters/txl.py", "load"),
    ("  plan the pairs", "probes/library/fact_swap.py", "plan"),
    ("score the pairs", "probes/api/rows.py", "score_batches"),
    ("statistics", "probes/engine/paired.py", "summarize"),
    ("plots", "probes/report/plots.py", "draw"),
)


def _job(model: Path, out: str) -> list[str]:
    job = ["-m", "probes.cli", "run", "fact-swap", "--mem", "640"]
    return [*job, "--model", str(model), "--out", out, "--json"]


def import_times(model: Path) -> tuple[float, list[tuple[str, float]]]:
    """(wall seconds, [(top-level module, cumulative import seconds)] by cost)."""
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        r = subprocess.run(
            [sys.executable, "-X", "importtime", *_job(model, out)],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        wall = time.perf_counter() - t0
    tops = []
    for line in r.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|", 2)
        if name.startswith(" ") and not name.startswith("  "):  # " name": a top-level import
            try:
                tops.append((name.strip(), int(cumulative) / 1e6))
            except ValueError:
                continue  # the header line
    return wall, sorted(tops, key=lambda x: -x[1])


# The job through the CLI group itself: `probe` (probes.cli.main.main) leaves with os._exit,
# before cProfile could write its file.
_PROFILED = "import sys; from probes.cli.main import cli; sys.exit(cli.main(sys.argv[1:]))"


def phases(model: Path) -> dict[str, float]:
    """Cumulative seconds of each PHASES function in one profiled run of the job."""
    with tempfile.TemporaryDirectory() as out:
        prof = Path(out) / "job.prof"
        args = _job(model, out)[2:]  # without "-m probes.cli"
        script = Path(out) / "job.py"
        script.write_text(_PROFILED + "\n")
        subprocess.run(
            [sys.executable, "-m", "cProfile", "-o", str(prof), str(script), *args],
            capture_output=True,
            cwd=ROOT,
            check=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
                str(ROOT), os.environ.get("PYTHONPATH")]))},  # the script lies outside ROOT
        )  # fmt: skip
        stats = pstats.Stats(str(prof)).stats  # (file, line, function) → (…, cumulative, …)
    got = {}
    for label, ending, func in PHASES:
        times = [v[3] for (f, _, fn), v in stats.items() if fn == func and f.endswith(ending)]
        got[label] = max(times, default=float("nan"))
    return got


def run(console) -> None:
    from rich.table import Table

    model = Path(os.environ.get("PROBES_BENCH_MODEL", DEFAULT_MODEL))
    if not (model / "config.json").is_file():
        console.print(f"[yellow]skipped: no model at {model}[/yellow]")
        return
    wall, tops = import_times(model)
    table = Table(title=f"python -X importtime · probe run fact-swap --mem 640 · {wall:.2f} s wall")
    for col in ("top-level import", "s", "% of wall"):
        table.add_column(col, justify="left" if col == "top-level import" else "right")
    for name, seconds in tops[:TOP_IMPORTS]:
        table.add_row(name, f"{seconds:.2f}", f"{100 * seconds / wall:.0f} %")
    console.print(table)
    got = phases(model)
    whole = got[PHASES[0][0]]
    table = Table(title="Wall time by phase (under cProfile, cumulative)")
    for col in ("phase", "s", "% of the command"):
        table.add_column(col, justify="left" if col == "phase" else "right")
    for label, seconds in got.items():
        table.add_row(label, f"{seconds:.2f}", f"{100 * seconds / whole:.0f} %")
    console.print(table)
