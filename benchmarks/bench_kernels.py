"""What portable kernels cost (probes/framework/kernels.py): the same `probe run` with
`--kernels portable` (the default: the same bits on any x86-64 CPU) and `--kernels native`
(each library's fastest path on this CPU), in fresh processes, wall time and the ratio; beside
them the two kernels' building blocks in this process's children — a float32 matrix product
(GFLOP/s) and an element-wise pass (SiLU and softmax over 1024×1536). Each job runs ROUNDS
times, interleaved, and its best wall time counts.

Jobs: the main job on the shipped default model (`probe run fact-swap --mem 640`), and where
the real-model packages and SmolLM2's wheel are installed (`nox -s bench_real`) fact-swap on
SmolLM2-135M with real text (BENCH_KERNELS_REAL_N pairs a bin, default 4; two bins). No
target: the figures say what the guarantee costs, on this CPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.bench_probe_run import DEFAULT_MODEL, best_of

ROUNDS = 2
BLOCKS = """
import time, torch
torch.set_num_threads(1)
a, w, x = torch.randn(1024, 576), torch.randn(1536, 576), torch.randn(1024, 1536)
with torch.no_grad():
    for _ in range(3):
        torch.nn.functional.linear(a, w)
    t = time.perf_counter()
    for _ in range(20):
        torch.nn.functional.linear(a, w)
    mm = 20 * 2 * 1024 * 576 * 1536 / (time.perf_counter() - t) / 1e9
    t = time.perf_counter()
    for _ in range(20):
        torch.softmax(torch.nn.functional.silu(x), -1)
    ew = (time.perf_counter() - t) / 20 * 1e3
print(f"{mm:.1f} {ew:.2f} {torch.backends.cpu.get_cpu_capability()}")
"""


def blocks(env: dict) -> tuple[float, float, str]:
    """(matrix product GFLOP/s, element-wise ms, torch's kernels) in a process started with
    `env`: the settings take effect only at a process's start."""
    done = subprocess.run(
        [sys.executable, "-c", BLOCKS], env=env, capture_output=True, text=True, check=True
    )
    mm, ew, cap = done.stdout.split()
    return float(mm), float(ew), cap


def run(console) -> None:
    from rich.table import Table

    from benchmarks.bench_real import (  # lazy: as every benchmark, loaded when it runs
        missing_requirement,
        model_files,
    )
    from probes.framework import kernels  # lazy: as every benchmark, loaded when it runs
    from probes.framework.provenance import cpu_model  # lazy: as every benchmark

    if not kernels.is_x86_64():
        console.print("[yellow]skipped kernels: portable kernels pin x86-64 paths[/yellow]")
        return
    table = Table(title=f"kernels on {cpu_model()} · one thread · best of {ROUNDS}")
    for h in ("job", "portable", "native", "portable / native"):
        table.add_column(h, justify="left" if h == "job" else "right", no_wrap=True)

    best: dict[str, list] = {"portable": [], "native": []}
    for _ in range(ROUNDS):
        for mode, env in (
            ("portable", kernels.portable_environment()),
            ("native", kernels.native_environment()),
        ):
            best[mode].append(blocks({**env, "OMP_NUM_THREADS": "1"}))
    (pm, pe, pc), (nm, ne, nc) = (
        (max(r[0] for r in best[m]), min(r[1] for r in best[m]), best[m][0][2]) for m in best
    )
    table.add_row(
        f"matrix product GFLOP/s ({pc} / {nc})", f"{pm:.1f}", f"{nm:.1f}", f"{pm / nm:.2f}"
    )
    table.add_row("SiLU + softmax, ms", f"{pe:.2f}", f"{ne:.2f}", f"{pe / ne:.2f}")

    probe = [sys.executable, "-m", "probes.cli", "run", "fact-swap", "--threads", "1", "--quiet"]
    jobs = {"probe run fact-swap --mem 640 (default model)": [
        "--model", str(DEFAULT_MODEL), "--mem", "640"]}  # fmt: skip
    files = {} if missing_requirement() else model_files()
    if "smollm2" in files:
        n = os.environ.get("BENCH_KERNELS_REAL_N", "4")
        jobs[f"fact-swap on SmolLM2-135M, real text, {n} pairs a bin"] = [
            "--model", str(files["smollm2"]), "--haystack", "default", "--evaluator", "full",
            "--distance", "100-300,600-900", "--n", n]  # fmt: skip
    with tempfile.TemporaryDirectory() as out:
        argv = {
            (name, mode): [*probe, *extra, "--kernels", mode, "--out", str(Path(out) / mode)]
            for name, extra in jobs.items()
            for mode in ("portable", "native")
        }
        got = best_of({f"{name}\0{mode}": a for (name, mode), a in argv.items()}, rounds=ROUNDS)
    for name in jobs:
        p, n = got[f"{name}\0portable"], got[f"{name}\0native"]
        failed = [m for m, g in (("portable", p), ("native", n)) if g[2] != 0]
        if failed:
            table.add_row(name, *("exit " + str(g[2]) for g in (p, n)), "—")
            continue
        table.add_row(name, f"{p[0]:.1f} s", f"{n[0]:.1f} s", f"{p[0] / n[0]:.2f}")
    console.print(table)
    if "smollm2" not in files:
        console.print("[yellow]the SmolLM2 row needs nox -s bench_real's packages[/yellow]")
