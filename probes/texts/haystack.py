"""Real text (`--haystack`): facts and their edits written in sentences of a haystack, under the
model's own tokenizer (`synth.text.world.TextWorld`)."""

from __future__ import annotations

from typing import Any

from probes.engine.fact_pairs import answer_job
from probes.framework.probe import ProbeInputError
from probes.texts.base import Texts
from probes.texts.real_edits import REAL_EDITS
from synth.text.facts import fact_text
from synth.text.render import Misaligned


class HaystackTexts(Texts):
    mode = "haystack"
    min_distance_why = " on real text (the longest query's prefix)"

    def __init__(self, world: Any):
        self.world = world

    @property
    def vocab(self):
        return self.world.vocab

    @property
    def min_distance(self) -> int:
        return self.world.min_distance

    def length_limits(self) -> list[tuple[int, str]]:
        n = self.world.haystack.n_tokens
        return [(n, f"the haystack's {n:,} tokens")]

    def fact_job(self, probe, edit, rng, group, distance, lead, bin, *, alt=None, **params):
        real = REAL_EDITS.get(edit)
        if real is None:
            raise ProbeInputError(f"probe {probe} does not write real text yet; drop --haystack")
        try:
            base = fact_text(self.world, rng, [distance], lead=lead)
            pair = real(self.world, rng, base, **params)
        except Misaligned:
            return None
        except ProbeInputError:
            raise
        except ValueError as e:
            raise ProbeInputError(f"cannot build a text at distance {distance}: {e}") from None
        job_alt = None if alt is None else alt(pair)
        return answer_job(group, pair, base, {"lead": lead}, alt=job_alt)
