"""What every torch adapter shares: the evaluation dtypes, the device a run asks for, and the
forking plan of rows that share a prefix (`score_shared`: computed once up to a segment boundary
inside the shared prefix, then forked)."""

from __future__ import annotations

import numpy as np
import torch

from probes.api.errors import AdapterError
from txl.device import DeviceError
from txl.device import resolve_device as resolve_torch_device

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}


def resolve_device(device: str) -> str:
    """auto | cpu | cuda → "cpu" or "cuda" (`txl.device.resolve_device`); AdapterError (one line)
    for a device that cannot be used here."""
    try:
        return resolve_torch_device(device).type
    except DeviceError as e:
        raise AdapterError(str(e)) from None


def fork_plan(positions, parent, shared, T: int, N: int):
    """When each row starts (`birth`, a multiple of T: the inputs already processed when it forks
    off its parent), how far it must run (`end`, inputs processed) and which live row it forks
    from (`eff_parent`, −1 for roots). A row forks at the last segment boundary b with
    b + 1 <= shared (its first b inputs and the target b equal the parent's)."""
    R = positions.shape[0]
    if ((parent < -1) | (parent >= R)).any():
        raise ValueError(f"a row's parent must be -1 (none) or a row index below {R}")
    last = np.array([np.flatnonzero(p).max() if p.any() else 0 for p in positions])
    # inputs needed to score target `last`: last; round up to a segment boundary, cap at N − 1
    end = np.minimum(((last + T - 1) // T) * T, N - 1)
    birth = np.zeros(R, dtype=np.int64)
    eff = np.full(R, -1, dtype=np.int64)
    for r in range(R):
        p = int(parent[r])
        if p < 0:
            continue
        if p == r:
            raise ValueError(f"row {r} is its own parent")
        b = _fork_point(shared[r], T, end[r])
        # fork from the nearest ancestor already running at b (one born at b shares the same
        # tokens up to b with its own parent, so its parent's state serves as well)
        seen = {r}
        while p >= 0 and b > 0:
            if p in seen:
                raise ValueError("row parents form a cycle")
            seen.add(p)
            if parent[p] < 0 or _fork_point(shared[p], T, end[p]) < b:
                break  # p is a root (runs from 0) or forks before b: it is running at b
            p = int(parent[p])
        if b == 0 or p < 0:
            continue  # computed from the start: no sharing possible
        birth[r] = b
        eff[r] = p
    # a parent runs at least until its children have forked
    for r in sorted(range(R), key=lambda i: -birth[i]):
        if eff[r] >= 0:
            end[eff[r]] = max(end[eff[r]], birth[r])
    return birth, end, eff


def _fork_point(shared: int, T: int, end: int) -> int:
    """The last segment boundary b with b + 1 <= shared, capped at `end` (0: no sharing)."""
    b = ((int(shared) - 1) // T) * T if shared > 0 else 0
    return max(0, min(b, int(end)))
