"""fact-insert: a fact inserted into a haystack at controlled distance and depth.

Base: a document whose query has no supporting fact (the haystack: `depth` filler tokens, then
the slot where the fact would go, filler, the query). Variant: the fact written into that slot
(overwriting exactly as many filler tokens, so nothing else moves), `distance` tokens before the
first answer token. Grid: distance bins × depths, where depth = filler tokens between the
document start and the fact (how deep in the document the fact sits, and so how much of the
memory is already taken by the document when it arrives).

    delta (per pair) = mean over answer tokens of NLL_base(A) − NLL_variant(A)
                       (note the order: base has no fact) > 0 ⇔ the inserted fact helped

Outputs a heatmap (depth × distance) of the mean delta (`insert_heatmap.png`; * = significant)
beside the usual delta-by-distance plot (one line per depth).

Through the tokenizer bridge (a model with its own tokenizer) the distance bins are in model
tokens (each pair's synth distance fitted into its bin), the fact and the filler right after it
take the model tokens of the filler they overwrite (`probes.texts.bridged.fill`), and a depth is
about as many model tokens of filler (`Texts.synth_length`; each pair records its realised
`depth_tokens`); pairs that cannot be mapped are counted as unmatched.

Default n = 16 pairs per cell: a 4 × 3 grid is 12 cells (the costliest probe: every depth adds
its haystack), Holm runs over all 12, and the rule then detects (80 % power) 1.06 sd of the
per-pair deltas per cell (`mdd80` reports it in nats); a model that reads an inserted fact moves
the answer by several nats, far above that. Raise --n for fine structure along depth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from probes.api.declarations import ACCURACY, CONTRAST, DISTANCE, REACH, STATS, Column
from probes.api.fact_pairs import DistanceParams, distance_bins
from probes.api.paired import Job, PairedProbe
from probes.api.params import increasing_ints, ints_text, param
from probes.api.probe_base import Outcome, RunContext
from probes.api.registry import probe
from probes.report import plots
from probes.texts.base import Variant
from synth import rng as rnd

DEPTH_HELP = (
    "depths (filler tokens before the fact): 'auto' (8, (mem+tgt)/2 and mem+tgt of the eval "
    "geometry) or a comma list, e.g. 8,256,1024"
)


def parse_depths(text: str, mem_plus_tgt: int | None = None) -> list[int]:
    def auto() -> list[int]:
        if mem_plus_tgt is None:
            return []
        return sorted({8, max(8, mem_plus_tgt // 2), max(8, mem_plus_tgt)})

    return increasing_ints(text, "depths", "8,256,1024", auto)


def check_depths(text: str) -> None:
    parse_depths(text)


def depth_tokens(job: Job) -> dict:
    """The depth a pair realises in the model's tokens: where its inserted fact starts."""
    fact = job.pair.variant.facts[job.pair.variant.queries[0].fact]
    return {"depth_tokens": int(fact.span.start)}


@probe("fact-insert", version=2)
class FactInsert(PairedProbe):
    """Insert a fact at a controlled distance and depth; delta grid (heatmap)."""

    @dataclass(frozen=True)
    class Params(DistanceParams):  # no --lead: --depth places the fact
        depth: str = param("auto", help=DEPTH_HELP, check=check_depths)

    default_n = 16
    quick_n = 4
    smoke: ClassVar[dict] = {"synth": {}, "bridged": {"depth": "8,64"}}
    finding = "the inserted fact helps"
    finding_sign = 1  # Δ > 0: the answer is likelier with the inserted fact
    opposite = "the inserted fact hurts the answer"
    columns = (
        DISTANCE,
        Column("depth", "depth", identifies=True),
        *STATS,
        *ACCURACY,
        CONTRAST,
        *REACH,
    )
    plot_series = "depth"
    delta_doc = "mean over answer tokens of NLL(base: no fact) − NLL(variant: fact inserted), nats"

    def plan(self, ctx: RunContext) -> None:

        bins = distance_bins(self.params.distance, ctx)
        g_ = ctx.geometry
        room = g_.mem_len + g_.tgt_len
        depths = ctx.resolve_auto(
            "depth",
            self.params.depth,
            lambda t: parse_depths(t, room),
            lambda: parse_depths("auto", room),
            ints_text,
        )
        self.groups = []
        self.jobs = []
        for depth in depths:
            lead = ctx.texts.synth_length(depth)
            for lo, hi in bins:
                g = len(self.groups)
                self.groups.append({"distance_lo": lo, "distance_hi": hi, "depth": depth})
                rng = ctx.rng(self.name, lo, hi, depth)
                for _ in range(ctx.n):
                    d = rnd.randrange(rng, lo, hi)
                    # the base lacks the fact; the insert edit states it at the base's distance
                    v = Variant(g, "insert", {"query": 0}, {"depth": depth}, sign=-1,
                                realised=depth_tokens)  # fmt: skip
                    jobs = ctx.texts.fact_jobs(self.name, [v], rng, d, lead, (lo, hi),
                                               supported=False)  # fmt: skip
                    if jobs is None:
                        ctx.unmatched += 1
                    else:
                        self.jobs.extend(jobs)
        ctx.require_matched(self.name, len(self.jobs))

    def extra_metrics(self, ctx, records, bins) -> dict:
        depths = sorted({b["depth"] for b in bins})
        dists = sorted({(b["distance_lo"], b["distance_hi"]) for b in bins})
        grid = [
            [
                next(
                    (
                        b["delta_mean"]
                        for b in bins
                        if b["depth"] == dep and (b["distance_lo"], b["distance_hi"]) == dd
                    ),
                    None,
                )
                for dd in dists
            ]
            for dep in depths
        ]
        return {
            "grid": {
                "rows_depth": depths,
                "cols_distance": [list(d) for d in dists],
                "delta_mean": grid,
            }
        }

    docs: ClassVar[dict[str, str]] = {
        "grid": "delta_mean per cell: rows = depths, columns = distance bins",
        "bins[].depth": "filler tokens between the document start and the inserted fact",
    }

    def make_plots(self, ctx: RunContext, outcome: Outcome) -> list:

        line_plots = super().make_plots(ctx, outcome)
        grid = outcome.metrics["grid"]
        sig = [
            [
                any(
                    b["significant"]
                    for b in outcome.bins
                    if b["depth"] == dep and [b["distance_lo"], b["distance_hi"]] == dd
                )
                for dd in grid["cols_distance"]
            ]
            for dep in grid["rows_depth"]
        ]

        heat = plots.deferred(
            plots.heatmap,
            "insert_heatmap.png",
            grid["delta_mean"],
            row_labels=[str(d) for d in grid["rows_depth"]],
            col_labels=[f"{lo}–{hi}" for lo, hi in grid["cols_distance"]],
            title=f"fact-insert · {ctx.model.info.id} · mem {ctx.geometry.mem_len}",
            xlabel="distance (fact's last token → first answer token)",
            ylabel="depth (tokens before the fact)",
            marks=sig,
        )
        return [heat, *line_plots]
