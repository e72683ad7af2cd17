"""Edits: pure functions `(base, rng, lang, **params) -> Pair`, one file each, registered there
by name (`registry.register`; `EDITS` holds them once their files are imported here).

Every edit returns a variant with its alignment (variant position → base position or −1) and meta
(the edit's name and what it did, JSON-friendly). Length-preserving by default (docs/design.md, *Pairs,
deltas and exact zeros*): aligned tokens keep their index; `same_length=False` is the explicit
length-changing mode where an edit offers one.
"""

from __future__ import annotations

import difflib
from typing import Any

import numpy as np

from synth.edits.delete import delete
from synth.edits.distract import distract
from synth.edits.identity import identity
from synth.edits.insert import insert
from synth.edits.prior_doc_conflict import prior_doc_conflict
from synth.edits.rebind import rebind
from synth.edits.registry import EDITS, Edit, NotOnRealText, register
from synth.edits.replace import replace
from synth.edits.topic_shift import topic_shift
from synth.edits.update import update
from synth.example import Example, Pair
from synth.language import Language


def resolve(name: str) -> str:
    """`name` when it is a registered edit; ValueError (one line, with the closest name) if not."""
    if name not in EDITS:
        close = difflib.get_close_matches(name, list(EDITS), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown edit {name!r}{hint} (edits: {', '.join(sorted(EDITS))})")
    return name


def apply_edit(
    name: str, base: Example, rng: np.random.Generator, lang: Language, **params: Any
) -> Pair:
    return EDITS[resolve(name)](base, rng, lang, **params)


__all__ = [
    "EDITS",
    "Edit",
    "NotOnRealText",
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
