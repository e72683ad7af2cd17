"""Every RNG a training step may draw from (python, numpy's global, torch), as JSON data: saved
with each resumable checkpoint, and restored around evaluations so that they change nothing."""

from __future__ import annotations

import base64
import contextlib
import random
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch


def _b64(t: torch.Tensor) -> str:
    return base64.b64encode(t.cpu().numpy().tobytes()).decode("ascii")


def _unb64(s: str) -> torch.Tensor:
    return torch.from_numpy(np.frombuffer(base64.b64decode(s), dtype=np.uint8).copy())


def rng_state() -> dict[str, Any]:
    """python, numpy (global) and torch (CPU, CUDA) RNG states as JSON-serialisable data."""
    version, state, gauss = random.getstate()
    np_state = np.random.get_state(legacy=False)  # noqa: NPY002 (the global one, saved)
    out: dict[str, Any] = {
        "python": [version, list(state), gauss],
        "numpy": {
            "bit_generator": np_state["bit_generator"],
            "key": np_state["state"]["key"].tolist(),
            "pos": int(np_state["state"]["pos"]),
            "has_gauss": int(np_state["has_gauss"]),
            "gauss": float(np_state["gauss"]),
        },
        "torch": _b64(torch.get_rng_state()),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = [_b64(s) for s in torch.cuda.get_rng_state_all()]
    return out


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Restore what `rng_state` returned."""
    version, py_state, gauss = state["python"]
    random.setstate((version, tuple(py_state), gauss))
    n = state["numpy"]
    np.random.set_state(  # noqa: NPY002 (the global one, restored)
        {
            "bit_generator": n["bit_generator"],
            "state": {"key": np.array(n["key"], dtype=np.uint32), "pos": n["pos"]},
            "has_gauss": n["has_gauss"],
            "gauss": n["gauss"],
        }
    )
    torch.set_rng_state(_unb64(state["torch"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([_unb64(s) for s in state["cuda"]])


@contextlib.contextmanager
def isolated_rng() -> Iterator[None]:
    """Whatever runs inside leaves every RNG (python, numpy, torch) as it found it."""
    saved = rng_state()
    try:
        yield
    finally:
        set_rng_state(saved)
