"""Synth texts in the synth language's own ids, for a model that reads them."""

from __future__ import annotations

from typing import Any

from probes.engine.fact_pairs import answer_job, base_example
from probes.engine.paired import Job
from probes.texts.base import Texts
from synth.edits import EDITS
from synth.generate import MIN_DISTANCE


class SynthTexts(Texts):
    mode = "synth"
    reports_unmatched = False

    def __init__(self, lang: Any):
        self.lang = lang

    @property
    def vocab(self):
        return self.lang.vocab

    @property
    def min_distance(self) -> int:
        return MIN_DISTANCE

    def fact_draw(self, edit: str, rng, group: int, distance: int, lead: int, *, alt=None,
                  **params):  # fmt: skip
        """A base at `distance` (drawn now), and the function drawing a job (an edit) of it;
        `even(pair, rng)` (the bridge's) evens the edit first."""
        base = base_example(self.lang, rng, distance, lead)
        make = EDITS[edit]

        def draw() -> Job:
            pair = self.even(make(base, rng, self.lang, **params), rng)
            job_alt = None if alt is None else alt(pair)
            return answer_job(group, pair, base, {"lead": lead}, alt=job_alt)

        return draw

    def even(self, pair, rng):
        return pair

    def fact_job(self, probe, edit, rng, group, distance, lead, bin, *, alt=None, **params):
        return self.fact_draw(edit, rng, group, distance, lead, alt=alt, **params)()
