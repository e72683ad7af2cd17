"""The edits by name: each edit's file registers its function once, with what it offers.

    @register("replace", length_changing=True)
    def replace(base, rng, lang, *, query=0, same_length=True, ...) -> Pair: ...

An edit's file imports `register` from here, never from the `synth.edits` package, whose
`__init__` imports the edits' files (so registering runs no import cycle). `EDITS` is filled as
they are imported; another package registers its own edits the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from synth.example import Pair


@dataclass(frozen=True)
class Edit:
    """A registered edit: `(base, rng, lang, **params) -> Pair`, and what it offers."""

    name: str
    fn: Callable[..., Pair]
    # it has the explicit length-changing mode (`same_length=False`); the others keep the length
    length_changing: bool = False

    def __call__(self, base: Any, rng: Any, lang: Any, **params: Any) -> Pair:
        return self.fn(base, rng, lang, **params)


EDITS: dict[str, Edit] = {}


def register(
    name: str, *, length_changing: bool = False
) -> Callable[[Callable[..., Pair]], Callable[..., Pair]]:
    """Register the decorated `(base, rng, lang, **params) -> Pair` as edit `name` (a new name),
    `length_changing` when it takes `same_length=False`. The function is returned as it is."""

    def add(fn: Callable[..., Pair]) -> Callable[..., Pair]:
        if name in EDITS:
            raise ValueError(f"edit {name!r} is registered already")
        EDITS[name] = Edit(name, fn, length_changing)
        return fn

    return add
