"""What a transformers model directory is, read without torch or transformers (`--model` is
resolved by `probes.framework.models` before anything heavy is imported)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json")
RECURRENT = ("mamba", "mamba2", "falcon_mamba", "rwkv")


class ModelDirError(ValueError):
    """A directory that is not a usable transformers model; the message is one line."""


def is_transformers_dir(path: str | os.PathLike) -> bool:
    """A directory whose config.json has a top-level `model_type` (a Transformer-XL checkpoint's
    config.json has `schema_version` and `model` instead)."""
    cfg = Path(path) / "config.json"
    if not cfg.is_file():
        return False
    try:
        config = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(config, dict)
        and bool(config.get("model_type"))
        and "schema_version" not in config
    )


def read_config(path: str | os.PathLike) -> dict[str, Any]:
    """config.json of a transformers model directory, checked: ModelDirError (one line, naming
    the path) when it or the weights are missing or it has no `model_type`."""
    p = Path(path)
    where = str(path)
    if not p.is_dir():
        raise ModelDirError(f"--model {where!r} is not a directory; give a transformers model dir")
    cfg = p / "config.json"
    if not cfg.is_file():
        raise ModelDirError(f"--model {where!r} has no config.json; give a transformers model dir")
    try:
        config = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ModelDirError(f"--model {where!r}: config.json is not readable JSON ({e})") from None
    if not isinstance(config, dict) or not config.get("model_type"):
        raise ModelDirError(f"--model {where!r}: config.json has no model_type")
    if not any((p / f).is_file() for f in WEIGHT_FILES):
        raise ModelDirError(
            f"--model {where!r} holds no safetensors weights (model.safetensors); "
            "save the model with save_pretrained(..., safe_serialization=True)"
        )
    return config
