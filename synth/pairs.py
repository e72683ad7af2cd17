"""One call from an edit's name to a pair: a suitable base example, then the edit.

    pair = make_pair("replace", lang, rng, distance=96)

Each edit gets the base it needs: `insert` a query without its fact, `prior-doc-conflict` a neutral previous
document, `topic-shift` enough distant filler; every base has one queried fact at `distance` and
`n_extra_facts` unqueried ones. Probes that need other bases call `make_example` and the edit
themselves.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from synth.edits import apply_edit, resolve
from synth.example import Pair
from synth.generate import make_example
from synth.language import Language


def make_pair(
    name: str,
    lang: Language,
    rng: np.random.Generator,
    *,
    distance: int = 48,
    length: int | None = None,
    n_extra_facts: int = 1,
    prev_len: int = 32,
    entities: np.ndarray | None = None,
    **params: Any,
) -> Pair:
    """A base built for edit `name` (a name of `synth.edits.EDITS`) and the edit applied to it.

    length: tokens of the query's document (default: the distance plus room for the query, 16
    tokens of lead filler and ~10 tokens per extra fact). Other keyword arguments go to the edit."""
    edit = resolve(name)
    lead = 16
    kw: dict[str, Any] = {"n_extra_facts": n_extra_facts, "entities": entities, "lead": lead}
    if edit == "insert":
        kw["supported"] = False
        params.setdefault("distance", distance)
    if edit == "prior-doc-conflict" and params.get("same_length", True):
        kw["prev_len"] = prev_len
    if edit == "topic-shift":
        params.setdefault("keep", max(8, distance // 2))
    if length is None:
        length = distance + 24 + 10 * n_extra_facts + lead
    base = make_example(lang, rng, (distance,), length=length, **kw)
    return apply_edit(edit, base, rng, lang, **params)
