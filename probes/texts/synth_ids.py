"""Synth texts in the synth language's own ids, for a model that reads them."""

from __future__ import annotations

from typing import Any

from probes.engine.fact_pairs import answer_job, base_example
from probes.engine.paired import Job
from probes.texts.base import Texts, Variant
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

    def fact_draw(self, variants: list[Variant], rng, distance: int, lead: int):
        """A base at `distance` (drawn now), and the function drawing the jobs of its variants
        (each edit evened first by `even`: the bridge's)."""
        base = base_example(self.lang, rng, distance, lead)

        def draw() -> list[Job]:
            jobs = []
            for v in variants:
                pair = self.even(EDITS[v.edit](base, rng, self.lang, **v.params), rng)
                alt = None if v.alt is None else v.alt(pair)
                jobs.append(answer_job(v.group, pair, base, v.info, alt=alt, base_id=v.base_id))
            return jobs

        return draw

    def even(self, pair, rng):
        return pair

    def fact_jobs(self, probe, variants, rng, distance, lead, bin):
        return self.fact_draw(variants, rng, distance, lead)()
