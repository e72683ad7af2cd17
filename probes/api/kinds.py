"""Model kinds: what a `--model` spec is, and how a model of that kind is loaded.

A kind is registered once with `register_model_kind`, by name, with

- `prefix`: specs starting with it are of this kind (`planted:`), or are read as a path of one of
  the kinds sharing the prefix (`hf:` for a transformers directory or a GGUF file);
- `detect`: whether a path is of this kind, read without torch; kinds are tried in registration
  order, and the `fallback` kind (a Transformer-XL checkpoint) takes a path no other kind claims.
  A detector may raise ModelDirError for a path that is no model at all;
- `check`: what is wrong with a path of this kind, told (ModelDirError) before anything is loaded;
- `load`: the loader, `fn(path, *, evaluator, device, dtype, **options)` → a LossModel. A kind
  reached only by its prefix and detecting nothing (`planted:`) is built from the spec instead,
  `fn(spec)`, as a LossModel object;
- `recurrent`: whether a path of this kind is a recurrent model scored by its state;
- `refuses`: the per-kind options (`KIND_OPTIONS`) it does not take, each with the one-line
  message that refuses it (`{path}` and `{kind}` are filled in); every other option is accepted
  and handed to `load` by name.

Functions are named as `module:attribute` strings and imported only when called, so registering
a kind imports no torch. A module that registers kinds when imported is named with
`add_kind_module` and imported on the first lookup (`probes/__init__.py` names the built-in
kinds' module, so this contract names nothing above it, as the registry's probe packages).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The options of a run that only some kinds take (`probe run --cache/--sinks/--cache-positions`);
# a kind refuses the others by name in `refuses`.
KIND_OPTIONS = ("cache", "sinks", "cache_positions")


def resolve(target: str) -> Callable[..., Any]:
    """The function named `module:attribute` (the attribute may be dotted: `Class.method`)."""
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class ModelKind:
    name: str
    load: str
    detect: str | None = None
    prefix: str | None = None
    check: str | None = None
    recurrent: str | None = None
    fallback: bool = False
    refuses: Mapping[str, str] = field(default_factory=dict)

    @property
    def builds_from_spec(self) -> bool:
        """A kind made from its spec (`planted:…`), not loaded from a path."""
        return self.prefix is not None and self.detect is None and not self.fallback

    def accepts(self, option: str) -> bool:
        return option not in self.refuses

    def detects(self, path: Path) -> bool:
        return self.detect is not None and bool(resolve(self.detect)(path))

    def check_path(self, path: Path) -> None:
        if self.check is not None:
            resolve(self.check)(path)

    def is_recurrent(self, path: Path) -> bool:
        return self.recurrent is not None and bool(resolve(self.recurrent)(path))

    def refusal(self, options: Mapping[str, Any], path: Path) -> str | None:
        """The message refusing the first option given (not None, not False) that this kind
        does not take, in the order of `refuses`; None when it takes them all."""
        for option, message in self.refuses.items():
            value = options.get(option)
            if value is not None and value is not False:
                return message.format(path=str(path), kind=self.name)
        return None

    def build(self, spec: str) -> Any:
        """The LossModel object of a spec of a kind made from its spec."""
        return resolve(self.load)(spec)

    def load_model(self, path: Path, *, evaluator, device, dtype, **options: Any) -> Any:
        """The LossModel of `path`; `options`: the per-kind options this kind accepts. An
        evaluator of None is left to the loader's default."""
        given = {k: v for k, v in options.items() if self.accepts(k)}
        if evaluator is not None:
            given["evaluator"] = evaluator
        return resolve(self.load)(path, device=device, dtype=dtype, **given)


_KINDS: dict[str, ModelKind] = {}
# modules that register kinds when imported, and whether each has been
_KIND_MODULES: dict[str, bool] = {}


def add_kind_module(module: str) -> None:
    """Name a module whose import registers model kinds; it is imported on the first lookup."""
    _KIND_MODULES.setdefault(module, False)


def register_model_kind(
    name: str,
    *,
    load: str,
    detect: str | None = None,
    prefix: str | None = None,
    check: str | None = None,
    recurrent: str | None = None,
    fallback: bool = False,
    refuses: Mapping[str, str] | None = None,
) -> ModelKind:
    """Register a model kind (see the module docstring); a name registers once."""
    if name in _KINDS:
        raise ValueError(f"model kind {name!r} is registered twice")
    unknown = sorted(set(refuses or {}) - set(KIND_OPTIONS))
    if unknown:
        raise ValueError(f"model kind {name!r} refuses unknown options {unknown}")
    if fallback and any(k.fallback for k in _KINDS.values()):
        raise ValueError(f"model kind {name!r}: a fallback kind is registered already")
    kind = ModelKind(name, load, detect, prefix, check, recurrent, fallback, dict(refuses or {}))
    _KINDS[name] = kind
    return kind


def kinds() -> list[ModelKind]:
    """Every registered kind, in registration order (the order detection tries them)."""
    for module, imported in list(_KIND_MODULES.items()):
        if not imported:
            _KIND_MODULES[module] = True
            importlib.import_module(module)
    return list(_KINDS.values())


def get(name: str) -> ModelKind:
    found = {k.name: k for k in kinds()}
    if name not in found:
        raise KeyError(f"no model kind {name!r}; registered: {', '.join(found)}")
    return found[name]


def by_prefix(spec: str) -> tuple[str, list[ModelKind]] | None:
    """The prefix a spec starts with and the kinds registered under it; None for no prefix."""
    for kind in kinds():
        if kind.prefix and spec.startswith(kind.prefix):
            return kind.prefix, [k for k in kinds() if k.prefix == kind.prefix]
    return None


def detect(path: Path, among: list[ModelKind] | None = None) -> ModelKind:
    """The kind of a model path: the first of `among` (default: every kind a path can be, the
    fallback last) whose detector claims it, else the last of them, which is not asked.
    ModelDirError from a detector for a path that is no model."""
    if among is None:
        paths = [k for k in kinds() if not k.builds_from_spec]
        among = [k for k in paths if not k.fallback] + [k for k in paths if k.fallback]
    for kind in among[:-1]:
        if kind.detects(path):
            return kind
    return among[-1]
