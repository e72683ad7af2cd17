"""The edits by name: each edit's file registers its function once, with what it offers and
its realisation on real text.

    @register("replace", length_changing=True, real="synth.text.facts:swap_value")
    def replace(base, rng, lang, *, query=0, same_length=True, ...) -> Pair: ...

The real-text realisation, `(world, rng, base, **params) -> Pair` on a `synth.text` fact text
with the edit's own parameters, is named as `module:function` and imported when first used, so
registering an edit imports no real-text machinery. An edit without one is not written on real
text.

An edit's file imports `register` from here, never from the `synth.edits` package, whose
`__init__` imports the edits' files (so registering runs no import cycle). `EDITS` is filled as
they are imported; another package registers its own edits the same way.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from synth.example import Pair


class NotOnRealText(ValueError):
    """An edit, or one of its parameters, that real text does not realise (one line: what)."""


@dataclass(frozen=True)
class Edit:
    """A registered edit: `(base, rng, lang, **params) -> Pair`, and what it offers."""

    name: str
    fn: Callable[..., Pair]
    # it has the explicit length-changing mode (`same_length=False`); the others keep the length
    length_changing: bool = False
    real: str | None = None  # its real-text realisation, "module:function" (None: none)

    def __call__(self, base: Any, rng: Any, lang: Any, **params: Any) -> Pair:
        return self.fn(base, rng, lang, **params)

    def on_real_text(self, world: Any, rng: Any, base: Any, **params: Any) -> Pair:
        """The edit of `base`, a fact text of `world` (`synth.text.facts.fact_text`), on real
        text. Real text keeps every token outside the edit in place, so `same_length=False` is
        refused there, as is a parameter the realisation does not take: NotOnRealText, naming
        it, as when the edit has no realisation at all."""
        if self.real is None:
            raise NotOnRealText(f"edit {self.name!r} is not written on real text")
        if not params.pop("same_length", True):
            raise NotOnRealText(
                f"on real text edit {self.name!r} keeps the token length of what it edits "
                "(same_length=False is for synth texts)"
            )
        module, _, attr = self.real.partition(":")
        fn = getattr(importlib.import_module(module), attr)
        taken = inspect.signature(fn).parameters
        if not any(p.kind is p.VAR_KEYWORD for p in taken.values()):
            if unknown := sorted(set(params) - set(taken)):
                raise NotOnRealText(
                    f"on real text edit {self.name!r} takes no {', '.join(unknown)} "
                    f"(it takes {', '.join(list(taken)[3:]) or 'no parameter'})"
                )
        return fn(world, rng, base, **params)


EDITS: dict[str, Edit] = {}


def register(
    name: str, *, length_changing: bool = False, real: str | None = None
) -> Callable[[Callable[..., Pair]], Callable[..., Pair]]:
    """Register the decorated `(base, rng, lang, **params) -> Pair` as edit `name` (a new name),
    `length_changing` when it takes `same_length=False`, `real` its realisation on real text
    ("module:function", module docstring). The function is returned as it is."""
    if real is not None and (not isinstance(real, str) or ":" not in real):
        raise ValueError(f"edit {name!r}: real must name 'module:function', got {real!r}")

    def add(fn: Callable[..., Pair]) -> Callable[..., Pair]:
        if name in EDITS:
            raise ValueError(f"edit {name!r} is registered already")
        EDITS[name] = Edit(name, fn, length_changing, real)
        return fn

    return add
