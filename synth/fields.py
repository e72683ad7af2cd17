"""Configs from plain dicts (JSON, TOML): a frozen dataclass built from its fields, an unknown
field refused in one line that names it and the known ones."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def from_fields(cls: type[T], d: dict[str, Any]) -> T:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(d) - names)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} field(s) {unknown}; known: {sorted(names)}")
    return cls(**d)
