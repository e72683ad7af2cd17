"""fact-delete: how much does the answer owe to the fact being there at all?

Base: a fact and, `distance` tokens later, its query (as in fact-swap). Variant: the fact removed
— by default replaced by neutral filler of the same length in the document's topic (so every
other token keeps its index and exact zeros stay exact); `--no-fill` cuts it out instead (later
tokens move up; the alignment maps the answer tokens, and the beyond-reach check is skipped
because every later token changes its offset in its segment).

    delta (per pair) = mean over answer tokens of NLL_variant(A) − NLL_base(A)
                       > 0 ⇔ the fact's presence helped the answer

What each measures: fact-delete, what the answer owes to the statement being there at all
(without it the model falls back on its prior over values; with it, whatever the statement gives:
its value, and that this entity and attribute were mentioned); fact-swap, what it owes to the
stated value itself (the variant still states the fact, with another value B, and the answer A
becomes a contradiction). So neither bounds the other in general: a model that reads the value
usually has the larger fact-swap delta (a contradicted answer costs more than an unsupported
one), while a delta that shows in fact-delete and not in fact-swap is the model using the mention,
not the value. Read them side by side.

With `--haystack` (real text) the fact becomes a haystack run of exactly its length (`--fill`
only). Through the tokenizer bridge (a model with its own tokenizer) the same-length filler is
evened to the fact's length in model tokens (`probes.texts.bridged.fill`: filler words redrawn
until their tokens add up to the fact's), so nothing after it moves; `--no-fill` cuts the fact's
words out and the alignment maps every later word's tokens.

Default n = 24 pairs per bin (the same reasoning as fact-swap: with 4 bins and Holm the rule
detects 0.73 sd of the per-pair deltas at 80 % power; `mdd80` per bin reports it in nats).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from probes.api.declarations import PAIRED
from probes.api.fact_pairs import FactParams, plan_by_distance
from probes.api.paired import PairedProbe
from probes.api.params import param
from probes.api.probe_base import ProbeInputError, RunContext
from probes.api.registry import probe


@probe("fact-delete", version=2)
class FactDelete(PairedProbe):
    """Remove a distant fact (same-length filler); delta on the answer, by distance."""

    @dataclass(frozen=True)
    class Params(FactParams):
        fill: bool = param(
            True,
            help="replace the fact by same-length neutral filler (--no-fill: cut it out, "
            "shifting later tokens)",
        )

    default_n = 24
    quick_n = 6
    smoke: ClassVar[dict] = {"synth": {}, "haystack": {"distance": "40-60"}, "bridged": {}}
    finding = "the fact's presence helps the answer"
    finding_sign = 1  # Δ > 0: the answer got less likely without the fact
    opposite = "the fact's presence hurts the answer"
    columns = PAIRED
    delta_doc = "mean over answer tokens of NLL(variant: fact deleted) − NLL(base), nats"

    def plan(self, ctx: RunContext) -> None:
        if not self.params.fill and not ctx.texts.changes_lengths:
            raise ProbeInputError(
                "--no-fill cuts the fact out, moving the text after it, which real text does "
                "not do (its deleted fact is filled to its length): drop --no-fill or --haystack"
            )
        plan_by_distance(self, ctx, "delete", query=0, same_length=self.params.fill)
