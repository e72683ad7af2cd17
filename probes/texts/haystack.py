"""Real text (`--haystack`): facts and their edits written in sentences of a haystack, under the
model's own tokenizer (`synth.text.world.TextWorld`)."""

from __future__ import annotations

from typing import Any

from probes.api.probe_base import ProbeInputError
from probes.engine.fact_pairs import answer_job
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

    def fact_jobs(self, probe, variants, rng, distance, lead, bin, *, supported=True, tail=2,
                  minimum=None):  # fmt: skip
        missing = [v.edit for v in variants if v.edit not in REAL_EDITS]
        # a base without its fact, or with another tail, is not written on real text yet
        if missing or not supported or tail != 2:
            raise ProbeInputError(f"probe {probe} does not write real text yet; drop --haystack")
        try:
            base = fact_text(self.world, rng, [distance], lead=lead)
            pairs = [REAL_EDITS[v.edit](self.world, rng, base, **v.params) for v in variants]
        except Misaligned:
            return None
        except ProbeInputError:
            raise
        except ValueError as e:
            raise ProbeInputError(f"cannot build a text at distance {distance}: {e}") from None
        return [
            answer_job(v.group, pair, base, v.info, alt=None if v.alt is None else v.alt(pair),
                       base_id=v.base_id)
            for v, pair in zip(variants, pairs, strict=True)
        ]  # fmt: skip

    # ------------------------------------------------------------------ restatements

    def restated_fact_job(self, probe, rng, group, distance, lead, bin, *, restated_at):
        # the `update` edit has no real-text realisation (`probes.texts.real_edits`)
        raise ProbeInputError(f"probe {probe} does not write real text yet; drop --haystack")
