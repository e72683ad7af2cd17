"""One process of tests/test_kernels_other_cpus.py and tests/test_kernels.py, run natively or
under an emulated CPU: the fact-swap probe on each model given at THREADS threads, and a digest
of every number it wrote (the per-token NLL arrays, every number and string of summary.json but
timings and paths, the samples).

    python tests/kernels_worker.py OUT THREADS MODEL... -> one JSON line: {model: digest, …}
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from probes.framework import kernels, provenance
from probes.framework.runner import run
from probes.rerun import IGNORED


def numbers(doc):
    """`doc` without what differs from run to run whatever the numbers (timings, paths)."""
    if isinstance(doc, dict):
        return {k: numbers(v) for k, v in sorted(doc.items()) if k not in IGNORED}
    if isinstance(doc, list):
        return [numbers(v) for v in doc]
    return doc


def digest(run_dir: Path) -> str:
    h = hashlib.sha256()
    with np.load(run_dir / "tokens.npz") as arrays:
        for name in sorted(arrays.files):
            h.update(name.encode() + arrays[name].tobytes())
    h.update(json.dumps(numbers(json.loads((run_dir / "summary.json").read_text()))).encode())
    for line in (run_dir / "samples.jsonl").read_text().splitlines():
        h.update(json.dumps(numbers(json.loads(line))).encode())
    return h.hexdigest()[:16]


def main() -> None:
    out, threads, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    result = {"kernels": kernels.in_effect(), "cpu_kernels": None}
    for i, model in enumerate(models):
        summary = run(
            "fact-swap", model=model, distance="8-14,30-40", n=3, threads=threads, out=f"{out}/{i}",
            progress=False,
        )  # fmt: skip
        result[model] = digest(Path(summary.run_dir))
    result["cpu_kernels"] = provenance.cpu_kernels()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
