"""Transformer-XL's exact guarantees (identical rows score the same bits, a token beyond the
layered reach is unchanged, reset makes B independent of A) at 1, 2 and 4 threads, with the
compared rows at different batch indices: each product runs once per row in evaluation
(`txl.rowwise`), since a batched product may round a row by where it sits."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_transformer_xl_exact_zeros_hold_at_any_thread_count(threads):
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, str(HERE / "txl_exact_worker.py")], env=env, capture_output=True,
        text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]
    assert f"threads {threads}: 0 failures" in out.stdout
