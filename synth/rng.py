"""Seeds and random draws that stay identical across numpy versions.

numpy promises a stable stream of raw bits from `PCG64` and a stable `Generator.random()` (53-bit
uniform doubles), but not stable results from its distribution methods (`integers`, `choice`,
`permutation`, ...) across releases. Everything in `synth` therefore draws only uniforms and turns
them into integers, choices and permutations with the helpers below, so a seed gives the same text on
any machine.

Seed namespaces keep probe examples and training streams apart: `seed_sequence(7, "probe")` and
`seed_sequence(7, "train")` are unrelated streams.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np


def key(part: int | str) -> int:
    """A stable integer for a seed path component: an int as it is, a string by its sha256
    (Python's hash() is salted per process)."""
    if isinstance(part, int):
        return part
    return int.from_bytes(hashlib.sha256(part.encode()).digest()[:8], "little")


def seed_sequence(seed: int, namespace: str = "train") -> np.random.SeedSequence:
    """The root seed sequence of `seed` in `namespace` ("train", "probe", ...).

    Shard with `.spawn(n)[i]` (ranks, batch rows); the same (seed, namespace) always gives the same
    sequence, different namespaces give unrelated ones."""
    if not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return np.random.SeedSequence([int(seed), key(namespace)])


def make_rng(seed: int | np.random.SeedSequence, namespace: str = "probe") -> np.random.Generator:
    """A PCG64 generator for `seed` in `namespace` (or for a seed sequence as given)."""
    ss = seed if isinstance(seed, np.random.SeedSequence) else seed_sequence(seed, namespace)
    return np.random.Generator(np.random.PCG64(ss))


def randint(rng: np.random.Generator, n: int, size: int | tuple[int, ...] | None = None) -> Any:
    """Uniform integers in [0, n) from raw uniforms (an int, or an int64 array of shape `size`)."""
    if size is None:
        return min(int(rng.random() * n), n - 1)
    return np.minimum((rng.random(size) * n).astype(np.int64), n - 1)


def randrange(rng: np.random.Generator, lo: int, hi: int) -> int:
    """A uniform integer in [lo, hi] (both ends included)."""
    return lo + randint(rng, hi - lo + 1)


def permutation(rng: np.random.Generator, n: int) -> np.ndarray:
    """A uniform random permutation of range(n) (argsort of uniforms; ties have probability ~0)."""
    return np.argsort(rng.random(n), kind="stable").astype(np.int64)


def sample(rng: np.random.Generator, items: Sequence[Any] | np.ndarray, k: int) -> list[Any]:
    """k distinct items, uniformly, in random order (a partial Fisher–Yates shuffle: k uniforms)."""
    n = len(items)
    if k > n:
        raise ValueError(f"cannot draw {k} distinct items from {n}")
    idx = list(range(n))
    for i, u in enumerate(rng.random(k).tolist()):
        j = i + min(int(u * (n - i)), n - i - 1)
        idx[i], idx[j] = idx[j], idx[i]
    return [items[i] for i in idx[:k]]


def choice(rng: np.random.Generator, items: Sequence[Any] | np.ndarray) -> Any:
    """One item, uniformly."""
    return items[randint(rng, len(items))]


def cumulative(weights: Sequence[float]) -> list[float]:
    """Running sums of `weights`, for `categorical`."""
    out, total = [], 0.0
    for w in weights:
        total += float(w)
        out.append(total)
    return out


def categorical(rng: np.random.Generator, cum: Sequence[float]) -> int:
    """An index drawn with probability proportional to the weights whose running sums are `cum`
    (see `cumulative`)."""
    return min(bisect.bisect_right(cum, rng.random() * cum[-1]), len(cum) - 1)


def state_to_json(rng: np.random.Generator) -> dict[str, Any]:
    """The generator's exact state as JSON-safe data (128-bit integers as decimal strings)."""
    st = rng.bit_generator.state
    if st["bit_generator"] != "PCG64":
        raise ValueError(f"only PCG64 generators are serialised, got {st['bit_generator']}")
    return {
        "bit_generator": "PCG64",
        "state": str(st["state"]["state"]),
        "inc": str(st["state"]["inc"]),
        "has_uint32": int(st["has_uint32"]),
        "uinteger": int(st["uinteger"]),
    }


def rng_from_json(d: dict[str, Any]) -> np.random.Generator:
    """A generator restored from `state_to_json` output."""
    bg = np.random.PCG64()
    bg.state = {
        "bit_generator": "PCG64",
        "state": {"state": int(d["state"]), "inc": int(d["inc"])},
        "has_uint32": int(d["has_uint32"]),
        "uinteger": int(d["uinteger"]),
    }
    return np.random.Generator(bg)
