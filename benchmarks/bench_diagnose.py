"""`probe diagnose --mem 640` with the KV memory (the default) and with `--cache hidden`, once each
(several minutes on 2 cores): wall time and peak RSS. Its recompute-heavy parts — RECL and the
context sweep, which score truncated windows afresh — do not use the cache, so the suite gains
less than the main job. Measures and prints; never asserts. The shipped default model, or
PROBES_BENCH_MODEL=DIR.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from benchmarks.bench_probe_run import DEFAULT_MODEL, measure


def run(console) -> None:
    from rich.table import Table

    model = Path(os.environ.get("PROBES_BENCH_MODEL", DEFAULT_MODEL))
    if not (model / "config.json").is_file():
        console.print(f"[yellow]skipped: no model at {model}[/yellow]")
        return
    table = Table(title=f"probe diagnose --mem 640 · model {model} · one run each")
    for col in ("memory", "wall s", "peak RSS MB", "exit"):
        table.add_column(col, justify="left" if col == "memory" else "right")
    walls = {}
    for cache in ("hidden", "kv"):
        with tempfile.TemporaryDirectory() as out:
            argv = [sys.executable, "-m", "probes.cli", "diagnose", "--mem", "640"]
            argv += ["--model", str(model), "--out", out, "--json", "--cache", cache]
            wall, rss, code, _ = measure(argv)
        walls[cache] = wall
        table.add_row(f"--cache {cache}", f"{wall:.1f}", f"{rss:.0f}", str(code))
    console.print(table)
    console.print(f"kv / hidden wall time: {walls['kv'] / walls['hidden']:.2f}")
