"""Each synth edit's real-text realisation (`--haystack`), by the edit's name in `synth.edits`:
`(world, rng, base, **params) -> Pair`, taking the synth edit's parameters. An edit without one
is not written on real text. Synth, the layer below, knows nothing of real-text probes, so the
realisations are registered here, beside the texts that use them.

    @real_edit("my-edit")
    def my_edit_text(world, rng, base, *, query=0): ...
"""

from __future__ import annotations

from collections.abc import Callable

from probes.api.probe_base import ProbeInputError
from synth.edits import EDITS
from synth.example import Pair
from synth.text import facts

REAL_EDITS: dict[str, Callable[..., Pair]] = {}


def real_edit(name: str) -> Callable[[Callable[..., Pair]], Callable[..., Pair]]:
    """Register the decorated function as edit `name`'s real-text realisation."""
    if name not in EDITS:
        raise ValueError(f"real_edit {name!r}: no synth edit of that name (synth.edits.EDITS)")

    def register(fn: Callable[..., Pair]) -> Callable[..., Pair]:
        if name in REAL_EDITS:
            raise ValueError(f"real_edit {name!r} is registered twice")
        REAL_EDITS[name] = fn
        return fn

    return register


real_edit("replace")(facts.swap_value)
real_edit("rebind")(facts.rebind_entity)


@real_edit("delete")
def delete_fact(world, rng, base, *, query: int = 0, same_length: bool = True) -> Pair:
    """The fact becomes a haystack run of its length: on real text a deleted fact is always
    filled (synth's `same_length=False` cuts it out)."""
    if not same_length:
        raise ProbeInputError("--no-fill: on real text a deleted fact is always filled")
    return facts.delete_fact(world, rng, base, query)
