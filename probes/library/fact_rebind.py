"""fact-rebind: is retrieval a keyed lookup, or copying the value that is in context?

fact-swap's delta mixes three things: looking the entity up, copying "the value in context"
whatever it is bound to, and a competing value (B) in the variant. Every fact-swap base holds one
fact and no other value token, so a model that copies the value in context without matching the
entity scores as well there as one that looks the entity up. This probe scores three variants of
the *same* bases (one fact "the ATTR of ENTITY is A .", its query `distance` tokens later):

    rebind   the fact bound to another entity: "the ATTR of OTHER is A ." — A is still in the
             text, ENTITY's fact is gone (synth's rebind edit; one token changes)
    delete   the fact replaced by same-length filler: A is gone too
    swap     the stated value becomes B (fact-swap's variant)

    delta (per pair) = mean over answer tokens of NLL_variant(A) − NLL_base(A)

and reports, per base (the unit of analysis):

    keyed lookup = rebind Δ              what a pure copier would not pay: the entity mattered
    copy         = delete Δ − rebind Δ   what A's mere presence in the text gives the answer
    swap         = swap Δ                lookup, copying and a competing value together

each with its 95 % t interval and exact signed-rank p, over all pairs and over those whose fact
lies in the first answer token's direct window or, for a recurrent model, in its state
(`within_horizon`; `probe diagnose` shows keyed lookup and copy from there). Bins: distance × variant, Holm across all of them.

On real text (`--haystack`) the three are `synth.text.facts`' edits of one fact document:
`rebind_entity` (another entity whose statement is as many tokens long), `delete_fact` (a
haystack run of the fact's length) and `swap_value`; a base whose variants cannot all keep its
length and every other token is drawn again, and counted as unmatched when none can.

Through the tokenizer bridge (a model with its own tokenizer) a base is kept only when all three
of its variants map to the model's tokens (the other entity and B of their words' token
lengths, the deleted fact's filler evened to its model tokens), its distance fitted into its bin
in model tokens; the others are counted as unmatched.

Default n = 24 bases per distance bin (three pairs each, scored on one shared base): as in
fact-swap, the rule then detects about 0.75 sd of the per-pair deltas per bin.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from probes import stats
from probes.api.declarations import PAIRED, Column, signed
from probes.api.fact_pairs import (
    FactParams,
    distance_bins,
    draws_per_bin,
    lead_range,
)
from probes.api.horizon import WITHIN_HORIZON
from probes.api.paired import PairedProbe
from probes.api.probe_base import RunContext
from probes.api.registry import probe
from probes.texts.base import Variant
from synth import rng as rnd

VARIANTS = ("rebind", "delete", "swap")
EDIT = {"rebind": "rebind", "delete": "delete", "swap": "replace"}  # each variant's edit


@probe("fact-rebind", version=1, diagnose=25)
class FactRebind(PairedProbe):
    """Keyed lookup vs copy: the fact's value kept but rebound, deleted, or swapped."""

    Params = FactParams  # distance bins and the fact's lead, nothing of its own
    smoke: ClassVar[dict] = {"synth": {}, "haystack": {"distance": "40-60"}, "bridged": {}}

    default_n = 24
    quick_n = 6
    finding = "the model looks the entity up (keyed lookup)"
    finding_sign = 1  # Δ > 0: the answer got less likely with the fact bound elsewhere
    opposite = "the answer is likelier with the fact bound to another entity"
    columns = (PAIRED[0], Column("variant", "variant", "left", identifies=True), *PAIRED[1:])
    delta_doc = "mean over answer tokens of NLL(variant) − NLL(base: the fact as stated), nats"

    def plan(self, ctx: RunContext) -> None:

        bins = distance_bins(self.params.distance, ctx)
        lead_lo, lead_hi = lead_range(self.params.lead, ctx)
        self.groups = [
            {"distance_lo": lo, "distance_hi": hi, "variant": v}
            for lo, hi in bins
            for v in VARIANTS
        ]
        self.jobs = []
        for b, rng, d in draws_per_bin(self.name, ctx, bins):
            lead = rnd.randrange(rng, lead_lo, lead_hi)
            base_id = len(self.jobs) // len(VARIANTS)
            variants = [  # one base, its three edits
                Variant(b * len(VARIANTS) + i, EDIT[v], {"query": 0},
                        {"variant": v, "base": base_id, "lead": lead}, base_id=base_id)
                for i, v in enumerate(VARIANTS)
            ]  # fmt: skip
            jobs = ctx.texts.fact_jobs(self.name, variants, rng, d, lead, bins[b])
            if jobs is None:
                ctx.unmatched += len(VARIANTS)  # the base's three pairs
            else:
                self.jobs += jobs
        ctx.require_matched(self.name, len(self.jobs))

    def primary(self, group: dict) -> bool:
        return group["variant"] == "rebind"  # the headline delta: keyed lookup

    def extra_metrics(self, ctx: RunContext, records: list[dict], bins: list[dict]) -> dict:
        out = {"all": effects(records)}
        out["within_horizon"] = effects([r for r in records if r["reach"] in WITHIN_HORIZON])
        out["copy_by_distance"] = [
            {"distance_lo": lo, "distance_hi": hi, **effects(sel)["copy"]}
            for lo, hi in dict.fromkeys((g["distance_lo"], g["distance_hi"]) for g in self.groups)
            for sel in [[r for r in records if lo <= r["distance"] <= hi]]
        ]
        return {"effects": out}

    docs: ClassVar[dict[str, str]] = {
        "delta_mean": "keyed lookup: mean over bases of the rebind delta (the value kept "
        "in the text, bound to another entity), nats",
        "effects": "{all, within_horizon}: keyed_lookup (rebind Δ), copy (delete Δ − "
        "rebind Δ per base), swap (swap Δ), each describe() over bases; "
        "copy_by_distance: copy per distance bin",
        "bins[].variant": "rebind | delete | swap",
    }

    @classmethod
    def diagnose_rows(cls, summary: dict) -> list[dict]:
        e = summary["metrics"]["effects"]["within_horizon"]
        swap = f"swap Δ {signed(e['swap']['mean'])} (lookup, copy and a competing value)"
        return [
            cls.effect(
                "retrieval: keyed lookup",
                "effects.within_horizon.keyed_lookup",
                "NLL of the answer with the fact rebound to another entity (its value still in "
                "the text) − with the fact, fact inside the direct window",
                e["keyed_lookup"],
                detail=swap,
            ),
            cls.effect(
                "retrieval: copy",
                "effects.within_horizon.copy",
                "delete Δ − rebind Δ per base: what the value's mere presence gives the answer",
                e["copy"],
                detail=f"delete Δ {signed(e['delete']['mean'])}",
            ),
        ]


def effects(records: list[dict]) -> dict:
    """keyed lookup, copy (paired per base), delete and swap over the given records."""
    by = {v: {r["base"]: r["delta"] for r in records if r["variant"] == v} for v in VARIANTS}
    both = sorted(set(by["rebind"]) & set(by["delete"]))
    copy = [by["delete"][i] - by["rebind"][i] for i in both]
    return {
        "keyed_lookup": stats.describe(np.array(list(by["rebind"].values()))),
        "copy": stats.describe(np.array(copy)),
        "delete": stats.describe(np.array(list(by["delete"].values()))),
        "swap": stats.describe(np.array(list(by["swap"].values()))),
    }
