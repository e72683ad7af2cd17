"""identity: the control pair (variant = base). Every delta on it must be exactly zero."""

from __future__ import annotations

import numpy as np

from synth.edits.registry import register
from synth.example import Example, Pair
from synth.language import Language


@register("identity")
def identity(
    base: Example, rng: np.random.Generator, lang: Language, *, same_length: bool = True
) -> Pair:
    """The base itself as variant (`same_length` is accepted for uniformity: nothing changes)."""
    return Pair(base, base, np.arange(len(base), dtype=np.int64), {"edit": "identity"})
