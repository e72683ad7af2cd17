"""Checkpoints: one directory, a fixed set of files, written atomically, validated on load.

    config.json        {"schema_version": 1, "model": TXLConfig.to_dict(), "training": {...}}
    model.safetensors  the weights (safetensors: no pickle); a tied matrix is stored once
    tokenizer.json     the tokenizer as an opaque JSON object (txl never interprets it)
    train_state.pt     optional: optimizer, scheduler, carried training memory... (plain tensors,
                       dicts, lists, numbers; loaded with torch.load(weights_only=True))
    rng.json           optional: RNG states as JSON
    metrics.jsonl      optional: training log (text)
    COMMAND            optional: the command line that produced the checkpoint (text)

Nothing else may be in the directory: a missing required file or an unknown one is refused with a
`CheckpointError` whose message is one line saying what is wrong and what would be right. A model
is never pickled: loading rebuilds `TransformerXL(config)` and fills its tensors by name, after
checking every name and shape against that config.

Saving writes everything into a temporary directory beside the target, fsyncs it, and renames it
into place; an existing checkpoint at the target is renamed aside first and removed only after the
new one is in place. A crash leaves either the old checkpoint or the new one at the target (plus,
at worst, a hidden `.NAME.tmp-*` / `.NAME.old-*` sibling to delete by hand), never a mixture.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors
from safetensors.torch import save_file

from txl import files
from txl.config import TXLConfig
from txl.io import atomic_write, file_sha256, follow_umask, replace_dir
from txl.model import TransformerXL

SCHEMA_VERSION = 1

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
TRAIN_STATE_FILE = "train_state.pt"
RNG_FILE = "rng.json"
TEXT_FILES = ("metrics.jsonl", "COMMAND")  # the files `extra_files` may name

REQUIRED_FILES = (CONFIG_FILE, WEIGHTS_FILE, TOKENIZER_FILE)
OPTIONAL_FILES = (TRAIN_STATE_FILE, RNG_FILE, *TEXT_FILES)
ALLOWED_FILES = REQUIRED_FILES + OPTIONAL_FILES


class CheckpointError(ValueError):
    """A checkpoint directory that cannot be saved or loaded; the message is one line."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


@dataclass
class Checkpoint:
    model: TransformerXL  # in eval mode, on the requested device
    config: TXLConfig
    tokenizer: dict[str, Any]
    training: dict[str, Any]
    train_state: dict[str, Any] | None
    rng: dict[str, Any] | None
    path: Path
    sha256: str  # of model.safetensors
    extra_files: dict[str, str] = field(default_factory=dict)  # metrics.jsonl, COMMAND if present


# ---------------------------------------------------------------------------------------------
# Tied weights. safetensors refuses two names for one storage, so each group of names that share
# a tensor in the model is stored once, under the group's first name in state_dict order; loading
# builds the model (which ties the group again) and copies the stored tensor into it.
# ---------------------------------------------------------------------------------------------


def _alias_groups(state: dict[str, torch.Tensor]) -> list[list[str]]:
    """Names in state_dict order, grouped by the tensor they share (one name per group if untied)."""
    groups: dict[tuple, list[str]] = {}
    for name, t in state.items():
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride())
        groups.setdefault(key, []).append(name)
    return list(groups.values())


def _stored_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    state = model.state_dict()
    return {g[0]: state[g[0]].detach().cpu().contiguous() for g in _alias_groups(state)}


# ---------------------------------------------------------------------------------------------
# Save
# ---------------------------------------------------------------------------------------------


def _json_text(obj: Any, what: str) -> str:
    try:
        return json.dumps(obj, sort_keys=True, indent=2, allow_nan=False) + "\n"
    except (TypeError, ValueError) as e:
        raise CheckpointError(
            f"{what} is not JSON-serialisable ({e}); pass plain dicts, lists, str, finite numbers"
        ) from e


def _write_checkpoint_files(
    tmp: Path,
    model: TransformerXL,
    tokenizer: dict,
    training: dict,
    train_state: dict | None,
    rng: dict | None,
    extra_files: dict[str, str],
) -> None:
    config = {
        "schema_version": SCHEMA_VERSION,
        "model": model.config.to_dict(),
        "training": training,
    }
    atomic_write(tmp / CONFIG_FILE, _json_text(config, "config.json (model config + training)"))
    atomic_write(tmp / TOKENIZER_FILE, _json_text(tokenizer, "tokenizer"))
    save_file(_stored_tensors(model), str(tmp / WEIGHTS_FILE), metadata={"format": "pt"})
    follow_umask(tmp / WEIGHTS_FILE)
    if train_state is not None:
        torch.save(train_state, tmp / TRAIN_STATE_FILE)
    if rng is not None:
        atomic_write(tmp / RNG_FILE, _json_text(rng, "rng"))
    for name, text in extra_files.items():
        atomic_write(tmp / name, text)


def _looks_like_checkpoint(path: Path) -> bool:
    names = {p.name for p in path.iterdir()}
    return names <= set(ALLOWED_FILES) and (CONFIG_FILE in names or not names)


def save_checkpoint(
    path: str | os.PathLike,
    model: TransformerXL,
    *,
    tokenizer: dict,
    training: dict | None = None,
    train_state: dict | None = None,
    rng: dict | None = None,
    extra_files: dict[str, str] | None = None,
) -> str:
    """Write `model` (and what a resumed run needs) as a checkpoint directory at `path`, atomically.

    An existing checkpoint at `path` is replaced; any other existing file or directory is refused.
    `train_state` holds plain tensors / dicts / lists / numbers only (never a module or optimizer
    object: pass `optimizer.state_dict()`). `extra_files` maps "metrics.jsonl" / "COMMAND" to text.
    Returns the sha256 of model.safetensors.
    """
    target = Path(path)
    training = {} if training is None else training
    extra_files = {} if extra_files is None else dict(extra_files)
    if not isinstance(tokenizer, dict):
        raise CheckpointError(
            f"tokenizer must be a JSON object (dict), got {type(tokenizer).__name__}"
        )
    if not isinstance(training, dict):
        raise CheckpointError(f"training must be a dict, got {type(training).__name__}")
    bad = sorted(set(extra_files) - set(TEXT_FILES))
    if bad:
        raise CheckpointError(
            f"unknown extra file(s) {', '.join(bad)}; allowed: {', '.join(TEXT_FILES)}"
        )
    if target.exists() and not (target.is_dir() and _looks_like_checkpoint(target)):
        raise CheckpointError(
            f"refusing to replace {target}: it exists and is not a checkpoint directory; "
            "choose a new path or remove it"
        )

    shas: list[str] = []

    def write(tmp: Path) -> None:
        _write_checkpoint_files(tmp, model, tokenizer, training, train_state, rng, extra_files)
        shas.append(file_sha256(tmp / WEIGHTS_FILE))

    replace_dir(target, write)
    return shas[0]


# ---------------------------------------------------------------------------------------------
# Load
# ---------------------------------------------------------------------------------------------


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _first_line(e: BaseException) -> str:
    """The most telling line of an exception message (torch.load's run to a dozen lines)."""
    lines = [_ANSI.sub("", ln).strip() for ln in str(e).splitlines()]
    lines = [ln for ln in lines if ln]
    telling = [ln for ln in lines if ln.startswith("WeightsUnpickler error:")]
    text = (telling or lines or [type(e).__name__])[0]
    if text.startswith("WeightsUnpickler error:"):
        text = text.removeprefix("WeightsUnpickler error:").split(" was not an allowed")[0].strip()
    return text if len(text) <= 200 else text[:197] + "..."


def _listing(names: Iterable[str], limit: int = 4) -> str:
    names = list(names)
    shown = ", ".join(names[:limit])
    return shown + (f" (+{len(names) - limit} more)" if len(names) > limit else "")


def _read_json_object(path: Path, what: str, kind: str = "json") -> dict:
    try:
        data = files.read_json(path, kind)  # a regular file within its size, then parsed
    except files.FileRefused as e:
        raise CheckpointError(f"{_first_line(e)}; expected {what}") from None
    if not isinstance(data, dict):
        raise CheckpointError(
            f"{path} holds a JSON {type(data).__name__}; expected {what} (a JSON object)"
        )
    return data


def _read_text(path: Path) -> str:
    try:
        return files.read_text(path, "metrics")
    except files.FileRefused as e:
        raise CheckpointError(f"{_first_line(e)}; expected a text file") from None


def _check_file_set(root: Path) -> None:
    if not root.is_dir():
        raise CheckpointError(
            f"no checkpoint directory at {root}; expected a directory with {', '.join(REQUIRED_FILES)}"
        )
    names = sorted(p.name for p in root.iterdir())
    missing = [n for n in REQUIRED_FILES if n not in names]
    if missing:
        raise CheckpointError(
            f"checkpoint {root} is missing {', '.join(missing)}; a checkpoint holds "
            f"{', '.join(REQUIRED_FILES)} (optional: {', '.join(OPTIONAL_FILES)})"
        )
    unknown = [n for n in names if n not in ALLOWED_FILES]
    if unknown:
        raise CheckpointError(
            f"checkpoint {root} holds unknown file(s) {_listing(unknown)}; allowed: "
            f"{', '.join(ALLOWED_FILES)}"
        )
    for n in names:
        if not (root / n).is_file():
            raise CheckpointError(f"{root / n} is not a regular file; expected the file {n}")


def _read_config(root: Path) -> tuple[TXLConfig, dict]:
    path = root / CONFIG_FILE
    data = _read_json_object(path, '{"schema_version", "model", "training"}')
    version = data.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        raise CheckpointError(
            f"{path}: unknown schema_version {version!r}; this txl reads schema_version {SCHEMA_VERSION}"
        )
    keys = sorted(data)
    expected = ["model", "schema_version", "training"]
    if keys != expected:
        raise CheckpointError(f"{path} has keys {keys}; expected exactly {expected}")
    if not isinstance(data["model"], dict) or not isinstance(data["training"], dict):
        raise CheckpointError(f"{path}: 'model' and 'training' must be JSON objects")
    try:
        config = TXLConfig.from_dict(data["model"])
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: bad model config: {_first_line(e)}") from e
    return config, data["training"]


def parameter_lower_bound(config: TXLConfig) -> int:
    """Parameters no TransformerXL(config) has fewer of, from config.json's numbers alone: the
    embedding, and per layer the query/key/value/output projections and the feed-forward's two
    matrices (position encodings, norms and biases only add to it)."""
    per_layer = (
        4 * config.d_model * config.n_head * config.d_head + 2 * config.d_model * config.d_inner
    )
    return config.vocab_size * config.d_model + config.n_layer * per_layer


def _check_shapes_before_building(root: Path, config: TXLConfig) -> None:
    """Compare the weights file's header (names and shapes, read without its data) with the
    shapes config.json implies, so a config that claims a model far larger than its weights is
    refused before anything is allocated: first by arithmetic on config.json (a config claiming
    more than twice the values the file holds — 1e5 layers — is refused before any module is
    built), then tensor by tensor on a model built on the meta device."""
    from safetensors import safe_open

    path = root / WEIGHTS_FILE
    try:
        with safe_open(str(path), framework="pt") as f:
            got = {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}
    except (SafetensorError, OSError, ValueError, RuntimeError) as e:
        raise CheckpointError(
            f"{path} is not a readable safetensors file ({_first_line(e)}); re-save the checkpoint"
        ) from e
    stored = sum(math.prod(shape) for shape in got.values())
    claimed = parameter_lower_bound(config)
    if claimed > 2 * stored:  # a near miss gets the tensor-by-tensor message below
        raise CheckpointError(
            f"{root / CONFIG_FILE} implies a model of at least {claimed:,} parameters "
            f"({config.n_layer:,} layers, d_model {config.d_model:,}, vocab "
            f"{config.vocab_size:,}), but {WEIGHTS_FILE} holds {stored:,} values; give the "
            "config.json saved with these weights"
        )
    try:
        with torch.device("meta"):
            meta = TransformerXL(config, shapes_only=True)
    except Exception as e:
        raise CheckpointError(
            f"{root / CONFIG_FILE}: cannot build the model ({_first_line(e)})"
        ) from e
    state = meta.state_dict(keep_vars=True)
    first: dict[int, str] = {}  # tied tensors are one object: the file stores the first name
    for name, t in state.items():
        first.setdefault(id(t), name)
    want = {name: tuple(state[name].shape) for name in first.values()}
    for name, shape in want.items():
        if name in got and got[name] != shape:
            raise CheckpointError(
                f"{path}: tensor {name} has shape {list(got[name])}, but config.json implies "
                f"{list(shape)}"
            )
    # names missing or unexpected are reported by _read_weights with the full listing


def _read_weights(root: Path, model: TransformerXL) -> tuple[dict[str, torch.Tensor], str]:
    """The state_dict to load into `model`, checked name by name and shape by shape, and the
    sha256 of the very bytes it was read from."""
    path = root / WEIGHTS_FILE
    try:
        raw = files.read_bytes(path, "weights")
    except files.FileRefused as e:
        raise CheckpointError(str(e)) from None
    try:
        stored = load_safetensors(raw)
    except (SafetensorError, ValueError, RuntimeError) as e:
        raise CheckpointError(
            f"{path} is not a readable safetensors file ({_first_line(e)}); re-save the checkpoint"
        ) from e
    state = model.state_dict()
    groups = _alias_groups(state)
    expected = {g[0]: g for g in groups}
    missing = [n for n in expected if n not in stored]
    unexpected = sorted(n for n in stored if n not in expected)
    if missing or unexpected:
        what = []
        if missing:
            what.append(f"missing tensor(s) {_listing(missing)}")
        if unexpected:
            what.append(f"unexpected tensor(s) {_listing(unexpected)}")
        raise CheckpointError(
            f"{path} does not match its config.json: {'; '.join(what)}; expected the "
            f"{len(expected)} tensors of TransformerXL(config)"
        )
    dtypes = {t.dtype for t in stored.values() if t.is_floating_point()}
    for name in expected:
        want, got = state[name], stored[name]
        if tuple(got.shape) != tuple(want.shape):
            raise CheckpointError(
                f"{path}: tensor {name} has shape {list(got.shape)}, but config.json implies "
                f"{list(want.shape)}"
            )
        if got.is_floating_point() != want.is_floating_point() or (
            not got.is_floating_point() and got.dtype != want.dtype
        ):
            raise CheckpointError(
                f"{path}: tensor {name} has dtype {got.dtype}; expected {want.dtype}"
            )
    if len(dtypes) > 1:
        raise CheckpointError(
            f"{path} mixes floating dtypes {sorted(map(str, dtypes))}; expected one dtype for all weights"
        )
    return {n: stored[group[0]] for group in groups for n in group}, hashlib.sha256(raw).hexdigest()


def _read_train_state(root: Path, device: str | torch.device) -> dict | None:
    path = root / TRAIN_STATE_FILE
    if not path.exists():
        return None
    try:
        files.check_file(path, "weights")  # zipfile and torch.load open it themselves
    except files.FileRefused as e:
        raise CheckpointError(str(e)) from None
    if not zipfile.is_zipfile(path):
        raise CheckpointError(
            f"{path} is not a torch.save archive (truncated or another format); re-save it with "
            "torch.save(dict_of_plain_tensors)"
        )
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except (
        Exception
    ) as e:  # torch.load raises many kinds (UnpicklingError, RuntimeError, EOFError...)
        raise CheckpointError(
            f"{path} cannot be loaded with weights_only=True ({_first_line(e)}); it must hold only "
            "plain tensors, dicts, lists and numbers"
        ) from e
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} holds a {type(state).__name__}; expected a dict")
    return state


def load_checkpoint(path: str | os.PathLike, *, device: str | torch.device = "cpu") -> Checkpoint:
    """Validate and load a checkpoint directory; the model comes back in eval mode on `device`."""
    root = Path(path)
    _check_file_set(root)
    config, training = _read_config(root)
    tokenizer = _read_json_object(
        root / TOKENIZER_FILE, "the tokenizer (a JSON object)", "tokenizer"
    )
    rng = _read_json_object(root / RNG_FILE, "RNG states") if (root / RNG_FILE).exists() else None

    _check_shapes_before_building(root, config)
    try:
        model = TransformerXL(config)
    except Exception as e:
        raise CheckpointError(
            f"{root / CONFIG_FILE}: cannot build the model ({_first_line(e)})"
        ) from e
    state, sha = _read_weights(root, model)
    dtype = next((t.dtype for t in state.values() if t.is_floating_point()), None)
    if dtype is not None:
        model.to(dtype=dtype)
    model.load_state_dict(state, strict=True)
    model.to(device)
    model.eval()

    extra = {n: _read_text(root / n) for n in TEXT_FILES if (root / n).exists()}
    return Checkpoint(
        model=model,
        config=config,
        tokenizer=tokenizer,
        training=training,
        train_state=_read_train_state(root, device),
        rng=rng,
        path=root,
        sha256=sha,
        extra_files=extra,
    )


__all__ = [
    "SCHEMA_VERSION",
    "Checkpoint",
    "CheckpointError",
    "load_checkpoint",
    "save_checkpoint",
]
