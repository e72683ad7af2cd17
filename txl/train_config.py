"""Training configuration: one frozen dataclass, resolved from layers.

Layers, lowest first: a preset (a named table of the caller's: `resolve_dict(presets=...)`), a
config file (TOML or JSON), then overrides (`key=value`, dotted for nested keys: `lr=3e-4`,
`model.d_model=256`, `data.NAME=VALUE`).
A file may name its own base with `preset = "NAME"`. Unknown keys and ill-typed values are refused
with a one-line `ConfigError` that names the key, the value and what would be right.

`data`, `eval` and `arch` are opaque to txl: free-form tables handed to whoever builds the stream,
the evaluation callback and the model (`arch` empty: txl's Transformer-XL; otherwise the caller's
`txl.architecture`, with `model` giving its sizes). Plain data, no torch import.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import math
import tomllib
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txl import files
from txl.config import TXLConfig

DEVICES = ("auto", "cpu", "cuda")
MAX_THREADS = 256  # CPU threads of one process (torch's intra-op pool); more only fails to start
PRECISIONS = ("auto", "fp32", "bf16")
OPAQUE = ("data", "eval", "arch")  # free-form tables, validated by their consumers

# Keys that may differ when a run is resumed: they change how a run is watched, saved or placed,
# not the sequence of updates it computes.
RUNTIME_KEYS = frozenset(
    {
        "eval_every",
        "checkpoint_every",
        "keep_checkpoints",
        "device",
        "compile",
        "threads",
        "peak_tflops",
        "eval",
    }
)


class ConfigError(ValueError):
    """A bad configuration: one line saying what is wrong and what would be right."""


@dataclass(frozen=True)
class TrainConfig:
    model: TXLConfig  # architecture and training geometry (tgt_len, mem_len)
    steps: int = 4000  # optimizer updates
    batch_size: int = 32  # stream rows per update on each process
    grad_accum: int = 1  # the rows are split into this many chunks, their gradients summed
    lr: float = 1e-3  # peak learning rate (AdamW)
    min_lr_ratio: float = 0.1  # cosine decays to lr * min_lr_ratio at the last step
    warmup_steps: int = 100  # linear warmup from lr / warmup_steps (may exceed steps)
    weight_decay: float = 0.0  # decoupled; on matrices only (not biases, norms, u/v)
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    grad_clip: float = 0.25  # max global gradient norm (the paper's 0.25); 0 disables
    seed: int = 0
    eval_every: int = 500  # held-out evaluation every N steps and at the end; 0: only at the end
    checkpoint_every: int = 500  # resumable checkpoint every N steps and at the end
    keep_checkpoints: int = 2  # resumable checkpoints kept (the newest)
    device: str = "auto"  # auto | cpu | cuda
    precision: str = "auto"  # auto (bf16 autocast on CUDA, fp32 on CPU) | fp32 | bf16
    compile: bool = False  # torch.compile the model
    threads: int = 0  # torch intra-op threads on CPU; 0: torch's default
    peak_tflops: float | None = None  # for MFU; None: known CUDA devices only
    data: dict[str, Any] = field(default_factory=dict)  # the stream's configuration (opaque)
    eval: dict[str, Any] = field(default_factory=dict)  # the eval callback's configuration
    arch: dict[str, Any] = field(default_factory=dict)  # another architecture's (opaque)

    def __post_init__(self) -> None:
        checks = [
            ("steps", self.steps > 0, "a positive integer"),
            ("batch_size", self.batch_size > 0, "a positive integer"),
            ("grad_accum", self.grad_accum > 0, "a positive integer"),
            (
                "grad_accum",
                self.batch_size % max(self.grad_accum, 1) == 0,
                f"a divisor of batch_size={self.batch_size}",
            ),
            ("lr", 0 < self.lr < math.inf, "a finite positive number"),
            ("min_lr_ratio", 0.0 <= self.min_lr_ratio <= 1.0, "in [0, 1]"),
            ("warmup_steps", self.warmup_steps >= 0, "an integer >= 0"),
            ("weight_decay", 0 <= self.weight_decay < math.inf, "finite and >= 0"),
            ("beta1", 0.0 <= self.beta1 < 1.0, "in [0, 1)"),
            ("beta2", 0.0 <= self.beta2 < 1.0, "in [0, 1)"),
            ("eps", 0 < self.eps < math.inf, "a finite positive number"),
            ("grad_clip", 0 <= self.grad_clip < math.inf, "finite and >= 0 (0 disables clipping)"),
            ("seed", self.seed >= 0, "an integer >= 0"),
            ("eval_every", self.eval_every >= 0, "an integer >= 0"),
            ("checkpoint_every", self.checkpoint_every >= 0, "an integer >= 0"),
            ("keep_checkpoints", self.keep_checkpoints >= 1, "an integer >= 1"),
            ("device", self.device in DEVICES, " | ".join(DEVICES)),
            ("precision", self.precision in PRECISIONS, " | ".join(PRECISIONS)),
            (
                "threads",
                0 <= self.threads <= MAX_THREADS,
                f"an integer in [0, {MAX_THREADS}] (0: torch's default)",
            ),
            (
                "peak_tflops",
                self.peak_tflops is None or self.peak_tflops > 0,
                "a positive number or none",
            ),
        ]
        for key, ok, right in checks:
            if not ok:
                raise ConfigError(f"bad value for {key}: {getattr(self, key)!r}; expected {right}")

    def to_dict(self) -> dict[str, Any]:
        """Nested plain dict (JSON-serialisable); `from_dict(to_dict())` round-trips."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["model"] = self.model.to_dict()
        out["data"] = json.loads(json.dumps(self.data))
        out["eval"] = json.loads(json.dumps(self.eval))
        out["arch"] = json.loads(json.dumps(self.arch))
        if not self.arch:  # omitted when empty (Transformer-XL): older saved configs compare equal
            del out["arch"]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainConfig:
        """From a nested dict with every key checked; `model.vocab_size` is required."""
        data = dict(data)
        data.pop("preset", None)
        check_keys(data)
        values = {k: coerce(k, v) for k, v in data.items() if k not in ("model", *OPAQUE)}
        model = dict(data.get("model", {}))
        if "vocab_size" not in model:
            raise ConfigError("model.vocab_size is missing; set it from the tokenizer")
        model = {k: coerce(f"model.{k}", v) for k, v in model.items()}
        try:
            values["model"] = TXLConfig(**model)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        for k in OPAQUE:
            if k in data:
                values[k] = dict(data[k])
        return cls(**values)


# ---------------------------------------------------------------------------------------------
# keys and values


def _fields(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


TRAIN_FIELDS = _fields(TrainConfig)
MODEL_FIELDS = _fields(TXLConfig)


def _unknown(key: str, known: Iterable[str]) -> ConfigError:
    known = sorted(known)
    close = difflib.get_close_matches(key.rsplit(".", 1)[-1], known, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known)}"
    return ConfigError(f"unknown config key {key!r}; {hint}")


def check_keys(data: Mapping[str, Any], prefix: str = "") -> None:
    """Refuse unknown keys of a (partial) nested config dict."""
    for k, v in data.items():
        if k == "preset" and not prefix:
            continue
        if k not in TRAIN_FIELDS:
            raise _unknown(k, [*TRAIN_FIELDS, "preset"])
        if k == "model":
            if not isinstance(v, Mapping):
                raise ConfigError(f"bad value for model: {v!r}; expected a table of model keys")
            for mk in v:
                if mk not in MODEL_FIELDS:
                    raise _unknown(f"model.{mk}", MODEL_FIELDS)
        elif k in OPAQUE and not isinstance(v, Mapping):
            raise ConfigError(f"bad value for {k}: {v!r}; expected a table")


def _type_for(key: str) -> Any:
    parts = key.split(".")
    if parts[0] == "model" and len(parts) == 2:
        return MODEL_FIELDS[parts[1]]
    return TRAIN_FIELDS[parts[0]]


def coerce(key: str, value: Any) -> Any:
    """Check (and where lossless, convert) a value against the declared type of `key`."""
    tp = _type_for(key)
    args = typing.get_args(tp)
    optional = type(None) in args and (
        typing.get_origin(tp) is typing.Union or isinstance(tp, types.UnionType)
    )
    if optional:
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            return None
        tp = next(a for a in args if a is not type(None))
    if typing.get_origin(tp) is typing.Literal:
        if value in typing.get_args(tp):
            return value
        right = " | ".join(map(str, typing.get_args(tp)))
        raise ConfigError(f"bad value for {key}: {value!r}; expected {right}")
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"bad value for {key}: {value!r}; expected true or false")
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise ConfigError(f"bad value for {key}: {value!r}; expected an integer")
    if tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        raise ConfigError(f"bad value for {key}: {value!r}; expected a number")
    if tp is str:
        if isinstance(value, str):
            return value
        raise ConfigError(f"bad value for {key}: {value!r}; expected a string")
    return value


def parse_value(text: str) -> Any:
    """A command-line value: a TOML literal (3, 1e-3, true, [1, 2], "s") or else a bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def parse_override(item: str) -> tuple[str, Any]:
    """`key=value` → (key, parsed value)."""
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"bad override {item!r}; expected KEY=VALUE, e.g. lr=3e-4")
    return key, parse_value(text.strip())


# ---------------------------------------------------------------------------------------------
# layering


def load_file(path: str | Path) -> dict[str, Any]:
    """A TOML (.toml) or JSON (.json) config file as a nested dict (keys checked)."""
    path = Path(path)
    if path.suffix not in (".toml", ".json"):
        raise ConfigError(f"config file {str(path)!r} must end in .toml or .json")

    try:
        text = files.read_text(path, "config", "config file")
    except files.FileRefused as e:
        raise ConfigError(str(e)) from None
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"config file {str(path)!r} does not parse: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a table of keys")
    check_keys(data)
    return data


def merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """Deep merge: tables merge key by key, anything else replaces."""
    out = dict(base)
    for k, v in top.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = merge(dict(out[k]), v)
        else:
            out[k] = v
    return out


def set_key(data: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """`data` with the dotted `key` set (the key checked; model/top-level values type-checked)."""
    parts = key.split(".")
    if any(not p for p in parts):
        raise ConfigError(f"bad config key {key!r}")
    head = parts[0]
    if head not in TRAIN_FIELDS:
        raise _unknown(key, TRAIN_FIELDS)
    if head == "model":
        if len(parts) != 2:
            raise ConfigError(f"bad config key {key!r}; expected model.NAME")
        if parts[1] not in MODEL_FIELDS:
            raise _unknown(key, MODEL_FIELDS)
        value = coerce(key, value)
    elif head in OPAQUE:
        if len(parts) < 2:
            raise ConfigError(f"bad config key {key!r}; expected {head}.NAME")
    else:
        if len(parts) != 1:
            raise ConfigError(f"bad config key {key!r}; {head} has no sub-keys")
        value = coerce(key, value)
    nested: Any = value
    for p in reversed(parts[1:]):
        nested = {p: nested}
    return merge(data, {head: nested})


def resolve_dict(
    preset: str | None = None,
    config_file: str | Path | None = None,
    overrides: Iterable[str | tuple[str, Any]] = (),
    *,
    presets: Mapping[str, Mapping[str, Any]],
    default_preset: str,
) -> dict[str, Any]:
    """The layered nested dict: preset < config file < overrides (left to right).

    `presets` are named partial configs (txl knows none: whoever trains supplies them). The preset
    is the one given, else the file's `preset`, else `default_preset`. The result records it
    under "preset" and is ready for `TrainConfig.from_dict` once `model.vocab_size` is set."""
    file_data = load_file(config_file) if config_file is not None else {}
    name = preset or file_data.get("preset") or default_preset
    if not isinstance(name, str) or name not in presets:
        close = difflib.get_close_matches(str(name), list(presets), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(presets)}"
        raise ConfigError(f"unknown preset {name!r}; {hint}")
    data = merge({"preset": name}, copy.deepcopy(presets[name]))  # never alias the table
    data = merge(data, {k: v for k, v in file_data.items() if k != "preset"})
    for item in overrides:
        key, value = parse_override(item) if isinstance(item, str) else item
        data = set_key(data, key, value)
    return data


def differences(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two nested dicts."""
    out = []
    for k in sorted(set(a) | set(b)):
        va, vb = a.get(k), b.get(k)
        if isinstance(va, Mapping) and isinstance(vb, Mapping):
            out += differences(va, vb, f"{prefix}{k}.")
        elif va != vb:
            out.append(f"{prefix}{k}")
    return out
