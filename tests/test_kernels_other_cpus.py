"""Portable kernels give the same bits on other x86-64 CPUs: the same probe runs at 2 threads,
natively and under qemu-user emulating an Intel Nehalem (SSE4.2: no AVX, no FMA), an Intel Haswell (AVX2,
FMA) and an AMD EPYC Rome, write identical numbers — every per-token NLL, every statistic, on a
Transformer-XL and on a transformers Llama. Native kernels on the emulated Nehalem must differ
from this machine's whenever this machine has vector kernels beyond it: the check can fail.

Slow (each emulated process runs ~30x slower): `nox -s cpus` runs it, installing Debian's
qemu-user when missing, and requires it (TXL_REQUIRE_QEMU=1); elsewhere it is skipped without
qemu-x86_64 on PATH."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from probes.framework import kernels
from probes.testing import tiny_checkpoint

QEMU = shutil.which("qemu-x86_64")
if QEMU is None and os.environ.get("TXL_REQUIRE_QEMU"):  # `nox -s cpus`: no skipping
    raise RuntimeError("TXL_REQUIRE_QEMU is set but qemu-x86_64 is not on PATH")
pytestmark = [
    pytest.mark.skipif(QEMU is None, reason="no qemu-x86_64 (`nox -s cpus` installs qemu-user)"),
    pytest.mark.skipif(not kernels.is_x86_64(), reason="emulates x86-64 CPUs on an x86-64 host"),
]
WORKER = Path(__file__).with_name("kernels_worker.py")
EMULATED = ("Nehalem", "Haswell-v4", "EPYC-Rome")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    if not os.environ.get("TXL_REQUIRE_QEMU"):  # `nox -s cpus` installs it: no skipping there
        pytest.importorskip("transformers")
    from probes.testing import tiny_transformers  # lazy: transformers, only where installed

    root = tmp_path_factory.mktemp("models")
    txl = tiny_checkpoint(root / "txl", mem_len=16, tgt_len=16)
    llama = tiny_transformers(root / "llama", "llama")
    return [str(txl), f"hf:{llama}"]


def worker(models, out: Path, env: dict, cpu: str | None) -> dict:
    """The worker's digests, natively (`cpu` None) or under qemu emulating `cpu`. The
    environment is the process's from its start: `probe` would restart itself for its kernels,
    and an exec'd process leaves qemu-user, so the worker is given them."""
    env = {**env, "OMP_NUM_THREADS": "1"}
    argv = [sys.executable, str(WORKER), str(out), "2", *models]
    if cpu is not None:
        argv = [QEMU, "-cpu", cpu, *argv]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_portable_kernels_write_the_same_numbers_on_other_x86_64_cpus(models, tmp_path):
    portable = kernels.portable_environment()
    native = kernels.native_environment()
    jobs = [(None, portable), *((cpu, portable) for cpu in EMULATED), ("Nehalem", native)]
    jobs.append((None, native))
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        futures = [
            pool.submit(worker, models, tmp_path / f"{cpu}-{i}", env, cpu)
            for i, (cpu, env) in enumerate(jobs)
        ]
        here, *emulated, nehalem_native, here_native = [f.result() for f in futures]

    assert here["kernels"] == "portable" and here["cpu_kernels"] == "DEFAULT"
    for cpu, there in zip(EMULATED, emulated, strict=True):
        assert there["kernels"] == "portable", cpu
        for model in models:
            assert there[model] == here[model], f"{model} on {cpu}: other numbers"

    assert here_native["kernels"] == "native" and nehalem_native["kernels"] == "native"
    if here_native["cpu_kernels"] != "DEFAULT":  # this CPU has vector kernels Nehalem lacks
        assert nehalem_native["cpu_kernels"] == "DEFAULT"
        assert any(here_native[m] != nehalem_native[m] for m in models), (
            "native kernels gave the same bits on Nehalem as here: the check has no teeth"
        )
