"""Synth texts in the synth language's own ids, for a model that reads them."""

from __future__ import annotations

from typing import Any

import numpy as np

from probes.api.probe_base import ProbeInputError
from probes.engine.fact_pairs import answer_job, base_example
from probes.engine.paired import Job
from probes.texts.base import Texts, Variant
from synth.edits import EDITS
from synth.generate import MIN_DISTANCE, make_example


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

    def fact_draw(self, variants: list[Variant], rng, distance: int, lead: int, *,
                  supported: bool = True, tail: int = 2):  # fmt: skip
        """A base at `distance` (drawn now), and the function drawing the jobs of its variants
        (each edit evened first by `even`: the bridge's). A base without its fact
        (`supported=False`) has each edit state it at `distance`, in the variant."""
        base = base_example(self.lang, rng, distance, lead, supported=supported, tail=tail)
        at = {} if supported else {"distance": distance}

        def draw() -> list[Job]:
            jobs = []
            for v in variants:
                vrng = rng if v.rng is None else v.rng
                try:
                    pair = EDITS[v.edit](base, vrng, self.lang, **at, **v.params)
                except ValueError as e:
                    if v.refusal is None:
                        raise
                    raise ProbeInputError(f"{v.refusal}: {e}") from None
                pair = self.even(pair, vrng)
                alt = None if v.alt is None else v.alt(pair)
                job = answer_job(v.group, pair, base if supported else pair.variant, v.info,
                                 sign=v.sign, alt=alt, base_id=v.base_id,
                                 value_len=v.value_len)  # fmt: skip
                if v.check_tail is not None:
                    job.check_targets = np.arange(len(base) - v.check_tail, len(base))
                jobs.append(job)
            return jobs

        return draw

    def even(self, pair, rng):
        return pair

    def fact_jobs(self, probe, variants, rng, distance, lead, bin, *, supported=True, tail=2,
                  minimum=None):  # fmt: skip
        return self.fact_draw(variants, rng, distance, lead, supported=supported, tail=tail)()

    # ------------------------------------------------------------------ restatements

    def restated_draw(self, probe: str, rng, group: int, distance: int, lead: int,
                      restated_at: int):  # fmt: skip
        """A base at `distance` (drawn now), and the function drawing its restatement's job
        (`Texts.restated_fact_job`; the edits evened by `even`)."""
        try:
            base0 = make_example(self.lang, rng, [distance], lead=lead)
        except ValueError as e:
            raise ProbeInputError(f"cannot build an update at distance {distance}: {e}") from None

        def draw() -> Job:
            try:
                upd = EDITS["update"](base0, rng, self.lang, distance=restated_at, answer="new")
            except ValueError as e:
                raise ProbeInputError(
                    f"cannot build an update at distance {len(base0)}: {e}"
                ) from None
            stale, k = upd.variant, int(upd.meta["stale_fact"])
            old = stale.facts[k]
            # base: the outdated statement overwritten by neutral filler (nothing moves)
            meta = {"edit": probe, "stale": [old.span.start, old.span.end]}
            deleted = self.even(EDITS["delete"](stale, rng, self.lang, fact=k), rng)
            pair = deleted.reversed(meta)
            bt, vt = pair.aligned_targets()
            return Job(
                group=group,
                pair=pair,
                base_targets=bt,
                variant_targets=vt,
                fact_end=old.span.end - 1,
                sign=1,
                alt=tuple(old.value),
                info={"lead": lead, "gap": base0.distance(0) - restated_at, "value_len": len(bt)},
            )

        return draw

    def restated_fact_job(self, probe, rng, group, distance, lead, bin, *, restated_at):
        return self.restated_draw(probe, rng, group, distance, lead, restated_at)()
