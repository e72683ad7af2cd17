"""distractor: does the model still find the fact when misleading statements stand between?

Base: a fact and, `distance` tokens later, its query (clean). Variant: the same text with `k`
distractor statements written over filler between the fact and the query (nothing moves), of one
kind:

    same_attribute   the same attribute of another entity   ("the color of OTHER is B .")
    same_entity      another attribute of the same entity   ("the city of ENTITY is B .")
    near_miss        the same attribute of another entity with a value sharing a token with the
                     answer ("deep amber" against "amber")

    delta (per pair) = mean over answer tokens of NLL_variant(A) − NLL_base(A)
                       > 0 ⇔ the distractors hurt the answer (lower is better)

Grid: kind × k (near_miss only at k = 1: a one-token value has a single near miss in the
language, and synth never states a value twice; larger k are listed in `skipped_cells`). The clean bases are shared by every cell (cell (kind, k) pair i distracts base
i), so cells compare like with like. The distance defaults to one bin inside the direct window
(where the model can read the fact at all) with room for the largest k: the far half of the
shortest direct window, from the statements' room on; a window shorter than that room is refused
(exit 2) rather than placing the bin beyond it.

Through the tokenizer bridge (a model with its own tokenizer) the distance is in model tokens
(each base's synth distance fitted into the range) and a base is kept only when every cell's
variant of it maps to the model's tokens (the filler right after each statement redrawn so that
the statement and it take the tokens of the filler they overwrite, `probes.texts.bridged.fill`):
the cells still share their bases; a base that does not map is counted once per cell as
unmatched.

Default n = 24 pairs per cell: with the 7 default cells and Holm the rule detects (80 % power)
0.78 sd of the per-pair deltas per cell (`mdd80` reports it in nats). Interference worth
reporting costs a large fraction of the retrieval effect (nats), well above that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from probes.api.declarations import ACCURACY, CONTRAST, DISTANCE, REACH, STATS, Column
from probes.api.distance_bins import parse_ranges, ranges_text
from probes.api.fact_pairs import LEAD_HELP, check_lead, check_tail, lead_range
from probes.api.paired import PairedProbe
from probes.api.params import increasing_ints, param
from probes.api.probe_base import Outcome, ProbeInputError, RunContext
from probes.api.registry import probe
from probes.report import plots
from probes.texts.base import Variant
from synth import rng as rnd
from synth.edits.distract import KINDS
from synth.language import MAX_FACT_TOKENS

# The language gives a one-token value exactly one near miss ("amber" → "deep amber"), and synth
# never states one value twice in an example, so near_miss cells exist for k = 1 only.
NEAR_MISS_MAX = 1
NEAR_MISS_WHY = "a one-token answer has a single near-miss value in the language"


def parse_kinds(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise ValueError(
            f"unknown kind {bad[0] if bad else text!r}; use a comma list of {', '.join(KINDS)}"
        )
    return kinds


def parse_ks(text: str) -> list[int]:
    return increasing_ints(text, "counts", "1,2,4")


def check_distance(text: str) -> None:
    bins = parse_ranges(text)
    if bins is not None and len(bins) != 1:
        raise ValueError(f"{text!r}: give one range LO-HI (or 'auto')")


@probe("distractor", version=2)
class Distractor(PairedProbe):
    """k distractors of each kind between fact and query; delta vs the clean base."""

    @dataclass(frozen=True)
    class Params:
        kinds: str = param(
            ",".join(KINDS),
            help="distractor kinds, a comma list of " + ", ".join(KINDS),
            check=parse_kinds,
        )
        k: str = param("1,2,4", help="distractors per variant, a comma list", check=parse_ks)
        distance: str = param(
            "auto",
            help="one distance range LO-HI for fact → answer; 'auto': inside the direct window, "
            "with room for the largest k",
            check=check_distance,
        )
        lead: str = param("auto", help=LEAD_HELP, check=check_lead)

    default_n = 24
    quick_n = 6
    smoke: ClassVar[dict] = {
        "synth": {"distance": "48-64"},
        "bridged": {"k": "1,2", "distance": "150-250"},
    }
    finding = "distractors interfere"
    finding_sign = 1  # Δ > 0: the answer got less likely with the distractors
    opposite = "distractors help the answer"
    columns = (
        DISTANCE,
        Column("kind", "kind", "left", identifies=True),
        Column("k", "k", identifies=True),
        *STATS,
        *ACCURACY,
        CONTRAST,
        *REACH,
    )
    plot_series = "kind"
    delta_higher_is_better = False
    delta_doc = "mean over answer tokens of NLL(variant: k distractors) − NLL(clean base), nats"

    def _distance(self, ctx: RunContext, kmax: int) -> tuple[int, int]:
        need = MAX_FACT_TOKENS * (kmax + 1) + 8

        def given(text: str) -> tuple[int, int]:
            lo, hi = parse_ranges(text)[0]
            if lo < need:
                raise ProbeInputError(
                    f"--distance {text!r}: {kmax} distractors need a distance of at least "
                    f"{need}; e.g. {need}-{need + 64}"
                )
            return lo, hi

        def auto() -> tuple[int, int]:
            (dmin, _), _ = ctx.horizon.ranges()
            if ctx.horizon.state:  # a recurrent state reads the fact at any distance
                return need, need + 16
            if need > dmin:  # no distance with room for the statements is read directly
                g = ctx.geometry
                raise ProbeInputError(
                    f"--distance auto: the direct window is as short as {dmin} tokens (mem "
                    f"{g.mem_len}, tgt {g.tgt_len}) and {kmax} distractors need a distance of "
                    f"at least {need}: give --k with fewer distractors, a longer --mem, or "
                    f"--distance LO-HI (from {need}; a fact beyond the direct window is not "
                    "read directly)"
                )
            return max(need, dmin // 2), dmin  # the window's far half, every token reading it

        return ctx.resolve_auto(
            "distance", self.params.distance, given, auto, lambda r: ranges_text([r])
        )

    def plan(self, ctx: RunContext) -> None:

        kinds = parse_kinds(self.params.kinds)
        ks = parse_ks(self.params.k)
        lo, hi = self._distance(ctx, max(ks))
        lead_lo, lead_hi = lead_range(self.params.lead, ctx)
        rng = ctx.rng(self.name, "bases", lo, hi)
        # the answers all see the distractors: filler past their reach gives beyond_reach_zero
        # tokens to check
        tail, n_check = check_tail(ctx)
        self.groups, self.skipped, cells = [], [], []
        for kind in kinds:
            for k in ks:
                if kind == "near_miss" and k > NEAR_MISS_MAX:
                    self.skipped.append({"kind": kind, "k": k, "why": NEAR_MISS_WHY})
                    continue
                cells.append((len(self.groups), kind, k, ctx.rng(self.name, kind, k)))
                self.groups.append({"distance_lo": lo, "distance_hi": hi, "kind": kind, "k": k})

        need = MAX_FACT_TOKENS * (max(ks) + 1) + 8  # the statements' room: the least distance
        drawn = []  # per base: its job in every cell
        for _ in range(ctx.n):
            d = rnd.randrange(rng, lo, hi)
            lead = rnd.randrange(rng, lead_lo, lead_hi)
            b_id = len(drawn)
            # every cell distracts this one base, each from its own stream
            variants = [
                Variant(
                    g,
                    "distract",
                    {"query": 0, "k": k, "kind": kind},
                    {"kind": kind, "k": k, "lead": lead, "base": b_id},
                    base_id=b_id,
                    rng=erng,
                    value_len=False,
                    check_tail=n_check,
                    refusal=f"distractor {kind} k={k}",
                )
                for g, kind, k, erng in cells
            ]
            jobs = ctx.texts.fact_jobs(self.name, variants, rng, d, lead, (lo, hi), tail=tail,
                                       minimum=need)  # fmt: skip
            if jobs is None:
                ctx.unmatched += len(cells)
            else:
                drawn.append(jobs)
        self.jobs = [jobs[c] for c in range(len(cells)) for jobs in drawn]  # cell by cell
        ctx.require_matched(self.name, len(self.jobs))

    def extra_metrics(self, ctx, records, bins) -> dict:
        return {"skipped_cells": self.skipped}

    docs: ClassVar[dict[str, str]] = {
        "accuracy_variant": "retrieval accuracy with the distractors (accuracy: clean)",
        "bins[].kind": "distractor kind: " + ", ".join(KINDS),
        "bins[].k": "distractors per variant",
        "skipped_cells": "kind × k cells that cannot be built, with the reason",
    }

    def make_plots(self, ctx: RunContext, outcome: Outcome) -> list:

        title = f"distractor · {ctx.model.info.id} · mem {ctx.geometry.mem_len}"

        return [
            plots.deferred(
                plots.delta_by_distance,
                "delta_by_k.png",
                outcome.bins,
                title=title,
                xlabel="distractors between the fact and the query (k)",
                x_key="k",
                series_key="kind",
            )
        ]
