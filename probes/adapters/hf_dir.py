"""What a `--model` path is, read without torch or transformers (`--model` is resolved by
`probes.framework.models` before anything heavy is imported): a Transformer-XL checkpoint, a
transformers model directory or a GGUF file (`model_kind`), and for a transformers directory its
config.json and weights checked against each other before anything is built (`read_config`)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

from probes.adapters.families import RECURRENT
from probes.api.errors import ModelDirError
from txl import files

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json")
GGUF_MAGIC = b"GGUF"
MAX_HEADER_BYTES = 100 << 20  # a safetensors header (the safetensors library's own limit)
# A config claiming more than this many times the parameters its weights hold is refused
# (packed quantized weights store several values per element: 8 for 4-bit values in int32).
CLAIM_SLACK = 8


def _where(path) -> str:
    return repr(str(path))


def read_json(file: Path, where: str) -> Any:
    """A model's JSON file (config.json, an index) through the one bounded reader (`txl.files`:
    a regular file within the size of its kind, then parsed). ModelDirError naming the model
    and what is wrong."""

    if file.is_symlink() and not file.exists():
        raise ModelDirError(
            f"--model {where}: {file.name} is a symlink that does not resolve (a loop or a "
            "missing target); make it a file"
        )
    try:
        return files.read_json(file, "json", what=file.name)
    except files.FileRefused as e:
        raise ModelDirError(f"--model {where}: {e}") from None


def is_gguf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def gguf_file(path: str | os.PathLike) -> Path | None:
    """The GGUF file a `--model` names: the file itself (a `.gguf` name or the GGUF magic), or
    the one `.gguf` file of a directory without config.json; None when it names none.
    ModelDirError for a `.gguf` name that is not GGUF, or a directory holding several."""
    p = Path(path)
    if p.is_file():
        if is_gguf(p):
            return p
        if p.suffix.lower() == ".gguf":
            raise ModelDirError(
                f"--model {_where(path)} is named .gguf but is not a GGUF file (it does not start "
                "with the GGUF magic); give a complete GGUF file"
            )
        return None
    if not p.is_dir() or os.path.lexists(p / "config.json"):
        return None
    try:
        found = sorted(x for x in p.iterdir() if x.suffix.lower() == ".gguf" and x.is_file())
    except OSError:
        return None
    if len(found) > 1:
        names = ", ".join(x.name for x in found[:4]) + (", …" if len(found) > 4 else "")
        raise ModelDirError(
            f"--model {_where(path)} holds {len(found)} .gguf files ({names}); name one of them"
        )
    return found[0] if found else None


def model_kind(path: str | os.PathLike) -> str:
    """`gguf`, `transformers` (config.json with a `model_type`) or `txl` (a Transformer-XL
    checkpoint: config.json with `schema_version`, or no config.json — its loader names the
    missing files). ModelDirError (one line) for a config.json that is neither, naming what is
    wrong with it; a file that is no model."""
    p = Path(path)
    if gguf_file(p) is not None:
        return "gguf"
    if p.is_file():
        raise ModelDirError(
            f"--model {_where(path)} is a file but not a GGUF model; give a .gguf file, a "
            "transformers model directory or a Transformer-XL checkpoint directory"
        )
    cfg = p / "config.json"
    if not p.is_dir() or not os.path.lexists(cfg):
        return "txl"
    config = read_json(cfg, _where(path))
    if not isinstance(config, dict):
        raise ModelDirError(
            f"--model {_where(path)}: config.json holds a JSON {type(config).__name__}, not an "
            "object; a model's config.json is one JSON object"
        )
    if "schema_version" in config:
        return "txl"
    if isinstance(config.get("model_type"), str) and config["model_type"]:
        return "transformers"
    raise ModelDirError(
        f"--model {_where(path)}: config.json has no model_type (what a transformers model's "
        "config.json names) and no schema_version (a Transformer-XL checkpoint's); give a "
        "transformers model directory (save_pretrained) or a checkpoint"
    )


def holds_gguf(path: str | os.PathLike) -> bool:
    """Whether `path` names a GGUF model (`gguf_file`): the `gguf` kind's detector."""
    return gguf_file(path) is not None


def is_transformers_model(path: str | os.PathLike) -> bool:
    """Whether `path` is a transformers model directory (`model_kind`; ModelDirError for a path
    that is no model): the `transformers` kind's detector."""
    return model_kind(path) == "transformers"


def is_recurrent(path: str | os.PathLike) -> bool:
    """Whether the transformers model directory `path` is of a recurrent family (scored by its
    state); txl.files.FileRefused for a config.json it refuses to read."""

    config = files.read_json(Path(path) / "config.json")
    return isinstance(config, dict) and config.get("model_type") in RECURRENT


# ---------------------------------------------------------------------- sizes before building


def _int(config: dict, *names: str) -> int | None:
    for name in names:
        v = config.get(name)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def config_size(config: dict) -> dict[str, int] | None:
    """What config.json says of a model's size: layers, hidden width, vocabulary, feed-forward
    width, and the parameters they imply (an estimate: embeddings, four hidden² attention
    matrices and three feed-forward ones a layer) and a lower bound no model of that shape stays
    under (one hidden² matrix a layer and the embedding). None when it does not say.
    A multimodal config's `text_config` is what the language model reads."""
    text = config.get("text_config")
    c = {**config, **text} if isinstance(text, dict) else config
    layers = _int(c, "num_hidden_layers", "n_layer", "num_layers", "n_layers")
    hidden = _int(c, "hidden_size", "n_embd", "d_model", "dim")
    vocab = _int(c, "vocab_size") or 0
    if layers is None or hidden is None:
        return None
    inner = _int(c, "intermediate_size", "n_inner", "ffn_dim", "d_ff") or 4 * hidden
    embed = vocab * hidden
    estimate = embed * (1 if c.get("tie_word_embeddings", True) else 2) + layers * (
        4 * hidden * hidden + 3 * hidden * inner
    )
    return {
        "layers": layers,
        "hidden": hidden,
        "vocab": vocab,
        "intermediate": inner,
        "parameters": estimate,
        "lower_bound": embed + layers * hidden * hidden,
    }


def _safetensors_elements(file: Path, where: str) -> int:
    """The number of values a safetensors file holds, from its header alone."""
    try:
        with open(file, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ValueError("shorter than a safetensors header")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES:
                raise ValueError(f"a header of {n:,} bytes")
            header = json.loads(f.read(n).decode("utf-8"))
        total = 0
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            count = 1
            for d in entry["shape"]:
                count *= int(d)
            total += count
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        msg = " ".join(str(e).split())[:120]
        raise ModelDirError(
            f"--model {where}: {file.name} is not a readable safetensors file ({msg}); re-save "
            "the model with save_pretrained"
        ) from None
    return total


def weight_files(p: Path, where: str) -> list[Path]:
    """The safetensors files of a model directory: model.safetensors, or the shards its index
    names (each a safetensors file inside the directory; a `.bin` or any other file is refused
    without being opened)."""
    single = p / "model.safetensors"
    if single.is_file():
        return [single]
    index = read_json(p / "model.safetensors.index.json", where)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ModelDirError(
            f"--model {where}: model.safetensors.index.json has no weight_map; re-save the "
            "model with save_pretrained"
        )
    shards = []
    for name in sorted({str(v) for v in weight_map.values()}):
        if not name.endswith(".safetensors"):
            raise ModelDirError(
                f"--model {where}: model.safetensors.index.json names {name!r}, not a "
                ".safetensors file (pickled weights are never read); re-save the model with "
                "save_pretrained(..., safe_serialization=True)"
            )
        shard = p / name
        if Path(name).is_absolute() or ".." in Path(name).parts or not shard.is_file():
            raise ModelDirError(
                f"--model {where}: model.safetensors.index.json names {name!r}, which is not "
                "a file in the model directory; give the directory with all its shards"
            )
        shards.append(shard)
    return shards


def stored_elements(p: Path, where: str | None = None) -> int:
    """The values a transformers directory's safetensors weights hold (headers only)."""
    where = where or _where(p)
    return sum(_safetensors_elements(f, where) for f in weight_files(p, where))


def read_config(path: str | os.PathLike) -> dict[str, Any]:
    """config.json of a transformers model directory, checked before anything is built:
    ModelDirError (one line, naming the path) when it or the weights are missing or unreadable,
    it has no `model_type`, or it claims a model far larger than its weights hold."""
    p = Path(path)
    where = _where(path)
    if not p.is_dir():
        raise ModelDirError(f"--model {where} is not a directory; give a transformers model dir")
    cfg = p / "config.json"
    if not os.path.lexists(cfg):
        raise ModelDirError(f"--model {where} has no config.json; give a transformers model dir")
    config = read_json(cfg, where)
    if not isinstance(config, dict):
        raise ModelDirError(
            f"--model {where}: config.json holds a JSON {type(config).__name__}, not an object"
        )
    if not isinstance(config.get("model_type"), str) or not config.get("model_type"):
        raise ModelDirError(f"--model {where}: config.json has no model_type")
    if not any((p / f).is_file() for f in WEIGHT_FILES):
        raise ModelDirError(
            f"--model {where} holds no safetensors weights (model.safetensors); "
            "save the model with save_pretrained(..., safe_serialization=True)"
        )
    size = config_size(config)
    stored = stored_elements(p, where)
    if size is not None and size["lower_bound"] > CLAIM_SLACK * stored:
        raise ModelDirError(
            f"--model {where}: config.json implies a model of at least "
            f"{size['lower_bound']:,} parameters ({size['layers']:,} layers, hidden "
            f"{size['hidden']:,}, vocab {size['vocab']:,}), but its weights hold {stored:,} "
            "values; give the config.json saved with these weights"
        )
    return config
