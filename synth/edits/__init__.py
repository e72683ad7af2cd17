"""Edits: pure functions `(base, rng, lang, **params) -> Pair`, one file each.

Every edit returns a variant with its alignment (variant position → base position or −1) and meta
(the edit's name and what it did, JSON-friendly). Length-preserving by default (docs/design.md, *Pairs,
deltas and exact zeros*): aligned tokens keep their index; `same_length=False` is the explicit
length-changing mode where an edit offers one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from synth.edits.delete import delete
from synth.edits.distract import distract
from synth.edits.identity import identity
from synth.edits.insert import insert
from synth.edits.prior_doc_conflict import prior_doc_conflict
from synth.edits.rebind import rebind
from synth.edits.replace import replace
from synth.edits.topic_shift import topic_shift
from synth.edits.update import update
from synth.example import Example, Pair
from synth.language import Language

EDITS: dict[str, Callable[..., Pair]] = {
    "insert": insert,
    "replace": replace,
    "delete": delete,
    "distract": distract,
    "update": update,
    "topic-shift": topic_shift,
    "prior-doc-conflict": prior_doc_conflict,
    "identity": identity,
    "rebind": rebind,
}
# probe names → the edit they are built on
ALIASES = {
    "fact-insert": "insert",
    "fact-swap": "replace",
    "swap": "replace",
    "fact-delete": "delete",
    "distractor": "distract",
    "fact-update": "update",
    "topic_shift": "topic-shift",
    "cross-doc": "prior-doc-conflict",
    "fact-rebind": "rebind",
}


def register(name: str) -> Callable[[Callable[..., Pair]], Callable[..., Pair]]:
    """Register the decorated `(base, rng, lang, **params) -> Pair` as edit `name` (an edit of
    another package; its name must be new)."""

    def add(fn: Callable[..., Pair]) -> Callable[..., Pair]:
        if name in EDITS or name in ALIASES:
            raise ValueError(f"edit {name!r} is registered already")
        EDITS[name] = fn
        return fn

    return add


def resolve(name: str) -> str:
    """The edit's canonical name (accepting probe names such as "fact-swap")."""
    key = ALIASES.get(name, name)
    if key not in EDITS:
        import difflib

        close = difflib.get_close_matches(name, [*EDITS, *ALIASES], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown edit {name!r}{hint} (edits: {', '.join(EDITS)})")
    return key


def apply_edit(
    name: str, base: Example, rng: np.random.Generator, lang: Language, **params: Any
) -> Pair:
    return EDITS[resolve(name)](base, rng, lang, **params)


__all__ = [
    "ALIASES",
    "EDITS",
    "apply_edit",
    "delete",
    "distract",
    "identity",
    "insert",
    "prior_doc_conflict",
    "rebind",
    "register",
    "replace",
    "resolve",
    "topic_shift",
    "update",
]
