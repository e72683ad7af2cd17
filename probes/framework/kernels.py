"""Which float kernels a CPU run computes with: the same bits on every x86-64 CPU, or the
fastest this one has.

A float result's last bits are those of the code path each library takes, and each picks its
path by what the CPU offers: torch's own kernels by vector width (ATen's CPU capability), MKL's
matrix products by CPU model and vendor, oneDNN by instruction set, numpy's ufuncs by dispatch
target, and glibc's double-precision exp, log, pow, sin, … by FMA. A run recorded on one CPU and
repeated on another then differs by ~1e-6, and a statistic near a threshold (a p-value, a sign)
can move with it.

`portable` pins every one of them to a path every x86-64 CPU this runs on has (SSE2 for MKL,
SSE4.1 for oneDNN, numpy's own x86-64-v2 baseline, glibc's generic libm, ATen's build without
AVX): a run repeats bit for bit on any of these CPUs at the same thread count, which a run
records and its rerun takes (MKL's threaded products split some shapes by it). Checked by
emulating other CPUs at 2 threads (tests/test_kernels_other_cpus.py: Intel Nehalem without AVX
or FMA, Haswell with AVX2, AMD EPYC Rome, against the machine's own). The price is speed on a CPU with wider vectors
(docs/performance.md#portable-kernels); what runs on a GPU is not affected. `native` leaves each
library its fastest path: a rerun on another CPU then differs in the last bits and says so.

Each setting is read once, when its library loads (glibc's when the process starts), so the
choice belongs to the process, not to a call: `probe` restarts itself with the settings
(probes/cli/restart.py); Python started with `portable_environment()` in its environment has
them too. `in_effect()` says which this process has, and the runner records it.
"""

from __future__ import annotations

import os
import platform
import sys

MODES = ("portable", "native")

# glibc's double-precision libm picks FMA/AVX2 variants at start-up unless these are masked
GLIBC_HWCAPS = "glibc.cpu.hwcaps=-AVX2,-FMA,-FMA4,-AVX"

# each library's own switch to its baseline x86-64 path (read when the library loads)
FIXED = {
    "ATEN_CPU_CAPABILITY": "default",  # torch's kernels: the build without AVX
    # MKL: the one branch it pins on every vendor (on an AMD CPU it takes any other name, SSE4_2
    # or AVX2 included, for AUTO: its MKL_VERBOSE says so); its threaded products still split
    # some shapes by the thread count, hence the recorded count on a rerun
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "SSE41",  # oneDNN's (mkldnn) primitives
}


class KernelsError(ValueError):
    """A kernel mode this process cannot honour (one line: what, and what to do)."""


def is_x86_64() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def numpy_dispatch_targets() -> str:
    """Every instruction-set target this numpy build dispatches to above its baseline, as
    NPY_DISABLE_CPU_FEATURES takes them: disabling all leaves the baseline loops."""
    try:
        from numpy._core import (
            _multiarray_umath as umath,  # lazy: numpy loads only once a mode is checked or set
        )
    except ImportError:  # numpy 1.x keeps it here
        from numpy.core import (
            _multiarray_umath as umath,  # lazy: numpy loads only once a mode is checked or set
        )

    return " ".join(umath.__cpu_dispatch__)


def _with_hwcaps(tunables: str | None) -> str:
    """GLIBC_TUNABLES with the libm mask added to whatever tunables it already sets."""
    if not tunables:
        return GLIBC_HWCAPS
    if GLIBC_HWCAPS in tunables.split(":"):
        return tunables
    return f"{tunables}:{GLIBC_HWCAPS}"


def portable_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) with every portable setting added: start a process with
    it and its float kernels are the same on any x86-64 CPU."""
    out = dict(os.environ if env is None else env)
    out.update(FIXED)
    out["NPY_DISABLE_CPU_FEATURES"] = numpy_dispatch_targets()
    out["GLIBC_TUNABLES"] = _with_hwcaps(out.get("GLIBC_TUNABLES"))
    return out


def native_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) with every portable setting taken out."""
    out = dict(os.environ if env is None else env)
    for key in (*FIXED, "NPY_DISABLE_CPU_FEATURES"):
        out.pop(key, None)
    rest = [t for t in (out.pop("GLIBC_TUNABLES", "") or "").split(":") if t and t != GLIBC_HWCAPS]
    if rest:
        out["GLIBC_TUNABLES"] = ":".join(rest)
    return out


def start_environment() -> dict[str, str]:
    """The environment this process started with (Linux: /proc/self/environ), which is what
    glibc, numpy and torch read: settings put into os.environ later take no effect. Elsewhere
    os.environ."""
    try:
        with open("/proc/self/environ", "rb") as f:
            raw = f.read(1 << 22)  # bounded: the kernel caps an environment far below this
    except OSError:
        return dict(os.environ)
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def in_effect(env: dict[str, str] | None = None) -> str:
    """ "portable" when every portable setting was in this process's environment when it started
    (`probe` makes sure of it) — or is in `env` — and torch, where loaded, took its kernels;
    else "native"."""
    if env is None:
        env = start_environment()
        torch = sys.modules.get("torch")
        if torch is not None and str(torch.backends.cpu.get_cpu_capability()) != "DEFAULT":
            return "native"
    if not is_x86_64():
        return "native"
    if any(env.get(k) != v for k, v in FIXED.items()):
        return "native"
    if GLIBC_HWCAPS not in (env.get("GLIBC_TUNABLES") or "").split(":"):
        return "native"
    disabled = set((env.get("NPY_DISABLE_CPU_FEATURES") or "").replace(",", " ").split())
    return "portable" if set(numpy_dispatch_targets().split()) <= disabled else "native"


def default_mode() -> str:
    """What `probe` computes with unless told: portable where it is defined (x86-64)."""
    return "portable" if is_x86_64() else "native"


def check(requested: str | None) -> str:
    """The mode a run records: `requested` when this process has it (None: whichever it has),
    else KernelsError."""
    have = in_effect()
    if requested is None or requested == have:
        return have
    if requested == "portable" and not is_x86_64():
        raise KernelsError(
            f"--kernels portable pins x86-64 code paths; this CPU is {platform.machine()}: use "
            "--kernels native"
        )
    raise KernelsError(
        f"--kernels {requested}: this process started with {have} kernels, and each library "
        "reads its setting when it loads; run it through `probe`, which restarts itself with "
        "them, or start Python with probes.framework.kernels."
        f"{requested}_environment() as its environment"
    )
