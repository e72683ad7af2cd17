"""Real text (`--haystack`): facts and their edits written in sentences of a haystack, under the
model's own tokenizer (`synth.text.world.TextWorld`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from probes.api.fact_pairs import answer_job
from probes.api.probe_base import ProbeInputError
from probes.engine.sweep import example_sweep_text
from probes.texts.base import Texts
from synth import rng as rnd
from synth.edits import EDITS, NotOnRealText
from synth.text import contexts
from synth.text.facts import fact_text
from synth.text.haystack import HaystackError
from synth.text.render import Misaligned, Piece, render

ABLATION_REDRAWS = 8  # draws of a shuffle or a foreign run before an ablation is given up


class HaystackTexts(Texts):
    mode = "haystack"
    changes_lengths = False
    min_distance_why = " on real text (the longest query's prefix)"

    def __init__(self, world: Any):
        self.world = world

    @property
    def vocab(self):
        return self.world.vocab

    @property
    def min_distance(self) -> int:
        return self.world.min_distance

    @property
    def short_distance(self) -> int:
        return self.world.min_distance

    @property
    def fact_length(self) -> int:
        return len(self.world.fact(0, 0, 0))

    @property
    def query_length(self) -> int:
        # the longest query's prefix, the value and the full stop
        return self.world.min_distance + self.world.value_len + 1

    def query_window(self, queries: int) -> int:
        # an English query is about 40 tokens, not 8
        return queries * (self.world.min_distance + 8) + 32

    def length_limits(self) -> list[tuple[int, str]]:
        n = self.world.haystack.n_tokens
        return [(n, f"the haystack's {n:,} tokens")]

    def fact_jobs(self, probe, variants, rng, distance, lead, bin, *, supported=True, tail=2,
                  minimum=None):  # fmt: skip
        missing = [v.edit for v in variants if EDITS[v.edit].real is None]
        # a base without its fact, or with another tail, is not written on real text yet
        if missing or not supported or tail != 2:
            raise ProbeInputError(f"probe {probe} does not write real text yet; drop --haystack")
        try:
            base = fact_text(self.world, rng, [distance], lead=lead)
            pairs = [
                EDITS[v.edit].on_real_text(self.world, rng, base, **v.params) for v in variants
            ]
        except Misaligned:
            return None
        except NotOnRealText as e:
            raise ProbeInputError(f"probe {probe}: {e}; drop --haystack") from None
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
        # the `update` edit has no real-text realisation (`synth.edits.register(..., real=)`)
        raise ProbeInputError(f"probe {probe} does not write real text yet; drop --haystack")

    # ------------------------------------------------------------------ single texts

    sentences = "haystack sentences"

    def local_text(self, rng, length):
        return contexts.contiguous_text(self.world, rng, length)

    def sentence_text(self, rng, length):
        return contexts.sentence_text(self.world, rng, length)

    def word_starts(self, text):
        i, j = text.meta["pieces"]
        return 1 + np.concatenate([[0], np.cumsum(self.world.haystack.piece_lengths(i, j))])

    def ablated_tokens(self, rng, text, kind, boundary):
        # whole haystack words shuffled, or another document's words, rendered again: kept only
        # when every token from the boundary on stays as it was
        tokens, b = text.tokens, boundary
        world, h = self.world, self.world.haystack
        i, j = text.meta["pieces"]
        lengths = np.asarray(h.piece_lengths(i, j))
        n_far = int(np.searchsorted(1 + np.cumsum(lengths), b, side="right"))  # whole words
        sep = Piece(world.tokenizer.separator, 0, "eod")
        rest = list(range(i + n_far, j))
        own_docs = {int(h.doc_of[x % h.n_pieces]) for x in range(i, j)}  # the text's documents
        for _ in range(ABLATION_REDRAWS):
            if kind == "shuffle":
                order = [i + int(x) for x in rnd.permutation(rng, n_far)]
            else:
                try:
                    doc, z0, z1 = h.document_run(rng, b - 1, exclude=int(h.doc_of[i % h.n_pieces]))
                except HaystackError:
                    return None
                if doc in own_docs:
                    continue
                order = list(range(z0, z1))
            idx = order + rest
            pieces = [sep, *(Piece(h.pieces(x, x + 1)[0], 0) for x in idx)]
            planned = [1, *(h.piece_lengths(x, x + 1)[0] for x in idx)]
            try:
                out = render(world.tokenizer, pieces, planned).tokens[: len(tokens)]
            except Misaligned:
                continue
            if len(out) == len(tokens) and np.array_equal(out[b:], tokens[b:]):
                return out
        return None

    # ------------------------------------------------------------------ the sweep's texts

    def sweep_text(self, rng, distances, length, start, ordinary):
        try:
            ex = fact_text(self.world, rng, distances, length=length, lead=8)
        except Misaligned:
            return None
        return example_sweep_text(ex, start, ordinary)

    # ------------------------------------------------------------------ topic shift

    def topic_shift_jobs(self, rng, distance, bin, *, region, window, fact_distance, jobs):
        try:  # the region: another haystack document's text
            pair = contexts.topic_shift(
                self.world, rng, region=region, distance=distance, window=window,
                fact_distance=fact_distance or self.short_distance,
            )  # fmt: skip
        except Misaligned:
            return None
        except ValueError as e:
            raise ProbeInputError(
                f"cannot build a topic shift at distance {distance}: {e}"
            ) from None
        return jobs(pair, distance)

    # ------------------------------------------------------------------ cross-doc

    def cross_documents(self, shape, rng, gap):
        try:  # B ends in `tail` tokens of haystack text past A's reach
            return contexts.cross_document(
                self.world, rng, b_distance=shape.b_distance, b_lead=shape.b_lead, gap=gap,
                start=shape.a_start, tail=shape.tail,
            )  # fmt: skip
        except Misaligned:
            return None
        except HaystackError as e:  # what the plan's room check (CrossDoc.plan) did not foresee
            raise ProbeInputError(f"cross-doc: {e}") from None
        except ValueError as e:
            raise ProbeInputError(f"B's fact → answer distance {shape.b_distance}: {e}") from None
