"""Files a crash never leaves half-written, and JSON that a strict parser accepts.

`atomic_write_text` writes a hidden temporary file beside the target, fsyncs it and renames it
over the target: a reader sees the old file or the new one, never a mixture. `json_safe` turns
what a training run records into plain JSON types, with non-finite floats as null (a diverged
loss is recorded, not written as the invalid token NaN); dump its result with `allow_nan=False`.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Replace `path` with `text` (UTF-8) atomically; nothing is left behind if writing fails."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def json_safe(obj: Any) -> Any:
    """Non-finite floats become None (JSON has no NaN); numpy scalars and arrays become Python
    numbers and lists; tuples become lists; mapping keys become strings."""
    if isinstance(obj, Mapping):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, np.ndarray):
        return json_safe(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
