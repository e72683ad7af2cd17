"""Synth texts in the synth language's own ids, for a model that reads them."""

from __future__ import annotations

from typing import Any

import numpy as np

from probes.api.fact_pairs import answer_job, base_example
from probes.api.paired import Job
from probes.api.probe_base import ProbeInputError
from probes.engine.sweep import example_sweep_text
from probes.texts.base import Texts, Variant
from synth import rng as rnd
from synth.edits import EDITS
from synth.edits.prior_doc_conflict import cross_document, extend_b
from synth.generate import MIN_DISTANCE, make_example, make_local_example
from synth.language import FACT_VALUE_OFFSET


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

    @property
    def fact_length(self) -> int:
        return FACT_VALUE_OFFSET + 2

    def even(self, pair, rng, topic: int | None = None):
        """The pair with its edit evened to the model's tokens of what it replaces (through the
        bridge; `topic`: the filler's topic there, else the document's)."""
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

    # ------------------------------------------------------------------ single texts

    def local_text(self, rng, length):
        return make_local_example(self.lang, rng, length)

    def word_starts(self, text):
        return np.arange(1, len(text))  # a token is a word

    def ablated_tokens(self, rng, text, kind, boundary):
        tokens, b = text.tokens, boundary
        if kind == "shuffle":
            far = tokens[1:b][rnd.permutation(rng, b - 1)]
        else:
            far = make_local_example(self.lang, rng, b).tokens[1:b]
        return np.concatenate([tokens[:1], far, tokens[b:]])

    # ------------------------------------------------------------------ the sweep's texts

    def sweep_text(self, rng, distances, length, start, ordinary):
        ex = make_example(self.lang, rng, distances, length=length, lead=8)
        return example_sweep_text(ex, start, ordinary)

    # ------------------------------------------------------------------ topic shift

    def topic_shift_pair(self, rng, distance: int, region: int, window: int, fact_distance: int):
        """A topic shift in synth ids (`Texts.topic_shift_jobs`), not evened."""
        lead = region + (distance - 1) + window
        try:
            base = make_example(self.lang, rng, [fact_distance], lead=lead)
            keep = int(base.queries[0].answer.start - (1 + region))  # from the first kept token
            return EDITS["topic-shift"](base, rng, self.lang, keep=keep)
        except ValueError as e:
            raise ProbeInputError(
                f"cannot build a topic shift at distance {distance}: {e}"
            ) from None

    def topic_shift_jobs(self, rng, distance, bin, *, region, window, fact_distance, jobs):
        fact = fact_distance or self.short_distance
        return jobs(self.topic_shift_pair(rng, distance, region, window, fact), distance)

    # ------------------------------------------------------------------ cross-doc

    def cross_documents(self, shape, rng, gap):
        try:  # B ends in `tail` filler from its own stream (the texts before it are the same
            # whatever the tail)
            texts = cross_document(self.lang, rng, b_distance=shape.b_distance,
                                   b_lead=shape.b_lead, gap=gap, start=shape.a_start)  # fmt: skip
        except ValueError as e:
            raise ProbeInputError(f"B's fact → answer distance {shape.b_distance}: {e}") from None
        return extend_b(texts, shape.tail_rng, self.lang, shape.tail)
