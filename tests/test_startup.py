"""What a probe run imports: the costs the start-up measurements removed stay removed. Loading a
checkpoint builds a model on the meta device for its shapes without random init (which would
import torch._dynamo, seconds), and the statistics read their quantiles from scipy.special (not
scipy.stats, about a second)."""

import subprocess
import sys

from probes.testing import tiny_checkpoint

CHILD = """
import sys
import probes
probes.run("fact-swap", model=sys.argv[1], quick=True, out=sys.argv[2], progress=False, threads=1)
heavy = [m for m in ("torch._dynamo", "scipy.stats") if m in sys.modules]
assert not heavy, heavy
"""


def test_a_probe_run_imports_neither_torch_dynamo_nor_scipy_stats(tmp_path):
    model = tiny_checkpoint(tmp_path / "m")
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(model), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
