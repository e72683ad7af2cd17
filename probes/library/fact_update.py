"""fact-update: a fact restated with a new value — does the stale first statement still pull?

Variant (stale): "the ATTR of ENTITY is A ." … "the ATTR of ENTITY is B ." …
"? ATTR of ENTITY B ." — the fact stated with value A, later updated to B (as many tokens as
A) `--answer-distance` tokens before the first answer token; the query answers B. Base (no
stale statement): the same text with the first statement overwritten by neutral filler of the
document's topic (nothing moves). Distance: from the stale statement's last token to the first answer token, measured in
the variant; the distance between the two statements is `gap` = distance − answer-distance.

    delta (per pair) = mean over answer tokens of NLL_stale(B) − NLL_base(B)
                       > 0 ⇔ the stale statement interferes with the updated answer

Stale-state share, at the answer, from the same forward passes (teacher forcing, all answer
tokens): `stale_mass` = p(A) in the stale text (probability mass the model still puts on the old
value), `stale_share` = p(A) / (p(A) + p(B)), both beside their value in the base (where A appears
nowhere: the prior), and `stale_share_shift` = stale_share − its base value per pair. The answer
contrast log p(B) − log p(A) (contrast_base / contrast_variant, as in fact-swap, with B the answer
and A the alternative) cancels value priors.

Through the tokenizer bridge (a model with its own tokenizer) the distance bins are in model
tokens (each pair's synth distance fitted into its bin), `--answer-distance` is converted to
about as many synth words' worth (`Texts.synth_length`; each pair records the realised
`answer_distance` and `gap` in model tokens), B must take A's model tokens and the base's filler
is evened to the stale statement's model tokens; pairs that cannot be are counted as unmatched.

Default n = 24 pairs per bin (the auto bins are fact-swap's: with 3–4 bins and Holm the rule
detects 0.70–0.73 sd of the per-pair deltas, `mdd80` in nats); the shares are proportions whose
CIs at n = 24 are about ±0.1 for a per-pair sd of 0.25. --quick uses 6.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from probes import stats
from probes.api.declarations import PAIRED, Column, signed
from probes.api.distance_bins import auto_bins, parse_ranges, ranges_text
from probes.api.fact_pairs import (
    LEAD_HELP,
    check_lead,
    distance_param,
    draws_per_bin,
    lead_range,
)
from probes.api.paired import PairedProbe
from probes.api.params import param
from probes.api.probe_base import ProbeInputError, RunContext
from probes.api.registry import probe
from synth import rng as rnd
from synth.language import MAX_FACT_TOKENS

DISTANCE_HELP = (
    "bins of the distance from the stale statement's last token to the first answer token: "
    "'auto' (fact-swap's bins from the eval geometry, starting after the update) or LO-HI,…"
)


@probe("fact-update", version=2, diagnose=50)
class FactUpdate(PairedProbe):
    """A fact updated to a new value: stale-state share and delta vs no stale statement."""

    @dataclass(frozen=True)
    class Params:
        distance: str = distance_param(DISTANCE_HELP)
        answer_distance: int = param(
            16, help="update statement → first answer token (tokens)", min=6, max=4096
        )
        lead: str = param("auto", help=LEAD_HELP, check=check_lead)

    default_n = 24
    quick_n = 6
    smoke: ClassVar[dict] = {"synth": {}, "bridged": {}}
    finding = "the stale statement interferes with the update"
    finding_sign = 1  # Δ > 0: the updated answer got less likely with the stale statement
    opposite = "the stale statement helps the updated answer"
    columns = (
        *PAIRED,
        Column("stale share", "stale_share", "f2"),
        Column("share w/o", "stale_share_without", "f2"),
    )
    delta_higher_is_better = False
    delta_doc = (
        "mean over answer tokens of NLL(variant: stale A stated, then B) − NLL(base: only B), nats"
    )

    def plan(self, ctx: RunContext) -> None:

        p = self.params
        floor = p.answer_distance + MAX_FACT_TOKENS + 1  # the stale fact ends before the update
        given = parse_ranges(p.distance)
        bins = ctx.resolve_auto(
            "distance", p.distance, parse_ranges, lambda: auto_bins(ctx.horizon), ranges_text
        )
        if given and given[0][0] < floor:
            raise ProbeInputError(
                f"--distance {p.distance!r}: the stale statement must end before the update, at "
                f"least {floor} tokens before the answer (--answer-distance {p.answer_distance} "
                f"+ {MAX_FACT_TOKENS + 1}); e.g. {floor}-{floor + 48}"
            )
        fixed = []
        for lo, hi in bins:
            lo = max(lo, floor, fixed[-1][1] + 1 if fixed else floor)
            if hi >= lo:
                fixed.append((lo, hi))
        lead_lo, lead_hi = lead_range(p.lead, ctx)
        self.groups = [
            {
                "distance_lo": lo,
                "distance_hi": hi,
                "gap_lo": lo - p.answer_distance,
                "gap_hi": hi - p.answer_distance,
            }
            for lo, hi in fixed
        ]
        self.jobs = []
        # the update `answer_distance` tokens before the answer, in the texts' own tokens
        ad = ctx.texts.synth_length(p.answer_distance, 6)
        for g, rng, d in draws_per_bin(self.name, ctx, fixed):
            lead = rnd.randrange(rng, lead_lo, lead_hi)
            job = ctx.texts.restated_fact_job(self.name, rng, g, d, lead, fixed[g], restated_at=ad)
            if job is None:
                ctx.unmatched += 1
            else:
                self.jobs.append(job)
        ctx.require_matched(self.name, len(self.jobs))

    def record_fields(self, r: dict) -> dict:
        """p(A) (the stale value) and its share against p(B), in the stale text and the base,
        from the answer's NLL and contrast (teacher forcing, all answer tokens); none for a job
        scored without the alternative."""
        if "contrast_variant" not in r:
            return {}
        n = r["answer_len"]
        out = {}
        for text, key in (("variant", "stale"), ("base", "without")):
            log_b = -r[f"nll_{text}"] * n
            contrast = r[f"contrast_{text}"]  # log p(B) − log p(A)
            out[f"mass_{key}"] = math.exp(log_b - contrast)
            out[f"share_{key}"] = 1.0 / (1.0 + math.exp(min(contrast, 700.0)))
        return out

    def bin_fields(self, records: list[dict]) -> dict:
        if not records or "share_stale" not in records[0]:
            return {}
        shift = _describe(records, "share_stale", minus="share_without")
        return {
            "stale_mass": _describe(records, "mass_stale")["mean"],
            "stale_share": _describe(records, "share_stale")["mean"],
            "stale_share_without": _describe(records, "share_without")["mean"],
            "stale_share_shift": shift["mean"],
            "stale_share_shift_ci95": shift["ci95"],
        }

    def extra_metrics(self, ctx: RunContext, records: list[dict], bins: list[dict]) -> dict:
        if not records or "share_stale" not in records[0]:
            return {}
        return {
            "stale_mass": _describe(records, "mass_stale"),
            "stale_mass_without": _describe(records, "mass_without"),
            "stale_share": _describe(records, "share_stale"),
            "stale_share_without": _describe(records, "share_without"),
            "stale_share_shift": _describe(records, "share_stale", minus="share_without"),
        }

    docs: ClassVar[dict[str, str]] = {
        "stale_mass": "p(A) at the answer in the stale text (teacher forcing, all answer "
        "tokens): probability mass on the outdated value; describe() over pairs",
        "stale_mass_without": "p(A) at the answer in the base (A stated nowhere: prior)",
        "stale_share": "p(A) / (p(A) + p(B)) in the stale text",
        "stale_share_without": "the same in the base",
        "stale_share_shift": "stale_share − stale_share_without per pair: > 0 ⇔ the "
        "stale statement still pulls toward A",
        "contrast_base": "log p(B) − log p(A) at the answer in the base (no stale A)",
        "contrast_variant": "log p(B) − log p(A) at the answer in the stale text",
        "contrast_shift": "contrast_base − contrast_variant per pair: > 0 ⇔ the stale value pulls",
        "accuracy_variant_alt": "fraction of pairs whose every token of A is the argmax "
        "in the stale text (the model answers the outdated value)",
        "bins[].gap_lo/hi": "distance between the two statements' last tokens",
    }

    @classmethod
    def diagnose_rows(cls, summary: dict) -> list[dict]:
        m = summary["metrics"]
        shift = m.get("stale_share_shift", {})
        share = signed(m.get("stale_share", {}).get("mean"), "{:.2f}")
        return [
            cls.effect(
                "stale state: outdated fact",
                "delta_mean",
                "NLL of the updated answer with the stale statement − without",
                value=m["delta_mean"],
                ci95=m["delta_ci95"],
                p_value=m["p_value"],
                n=summary["n_pairs"],
                detail=f"stale share {share} (shift {signed(shift.get('mean'))})",
            )
        ]


def _describe(records: list[dict], key: str, minus: str | None = None) -> dict:
    """describe() over pairs of a record field (or of its difference with another)."""
    values = [r[key] - (r[minus] if minus else 0.0) for r in records]
    return stats.describe(np.array(values))
