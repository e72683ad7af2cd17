"""fact-swap: does the model read a fact N tokens back? Swap its value and watch the answer.

Base: a fact "the ATTR of ENTITY is A ." and, `distance` tokens later, the query
"? ATTR of ENTITY A .". Variant: the same text with the stated value B (a value of A's token
length sharing no token with anything else in the example); the query and its answer A are kept.
Only the value tokens differ, so everything before them is shared and every later token keeps its
position (exact zeros where the model cannot see the fact).

    delta (per pair) = mean over answer tokens of NLL_variant(A) − NLL_base(A)
                       > 0 ⇔ the model read the distant value (it now expects B, not A)

Because only the value changes, topic and format adaptation cancel: this is retrieval.
Also: the answer contrast log p(A) − log p(B) in both texts (value priors cancel in the shift),
retrieval accuracy (every answer token the argmax under teacher forcing) in the base, and
whether the model retrieves B in the variant. Distance is measured in the base, from the fact's
last token to the first answer token.

With `--haystack` the texts are real text (`synth.text.facts`): the fact "The ATTRIBUTE of
ENTITY is A." planted in haystack filler, the query "What is the ATTRIBUTE of ENTITY? It is A."
`distance` model tokens after it, B a value of A's token length that occurs nowhere in the
haystack; every token but A's is the same in both texts.

Default n = 24 pairs per bin, chosen from the effect it must detect: with the 4 auto bins and
Holm, the verdict rule detects (80 % power) a mean delta of 0.73 sd of the per-pair deltas
(n = 16: 0.93 sd, n = 40: 0.55 sd); every bin reports its realised minimum detectable delta
(`mdd80`, in nats). A model that reads the fact moves the answer's NLL by several nats (p(A)
from near 1 to near chance among the values) with a per-pair sd of the same order, so 24 pairs
resolve retrieval wherever it exists, and a partial effect of about 1 nat at sd ≈ 1.4; beyond the
layered reach the delta is exactly 0 (the `beyond_reach_zero` check) and any n shows it. --quick
uses 6 pairs per bin (a smoke run: MDD ≈ 1.9 sd).
"""

from __future__ import annotations

from typing import ClassVar

from probes.api.declarations import PAIRED, signed
from probes.api.fact_pairs import FactParams, plan_by_distance
from probes.api.paired import PairedProbe
from probes.api.probe_base import RunContext
from probes.api.registry import probe


@probe("fact-swap", version=2, diagnose=20)
class FactSwap(PairedProbe):
    """Swap a distant fact's value; delta on the answer = retrieval, by distance."""

    Params = FactParams  # distance bins and the fact's lead, nothing of its own
    smoke: ClassVar[dict] = {"synth": {}, "haystack": {"distance": "40-60,90-120"}, "bridged": {}}

    default_n = 24
    quick_n = 6
    finding = "the model reads the fact"
    finding_sign = 1  # Δ > 0: the answer A got less likely when the fact said B
    opposite = "the answer is likelier when the fact states another value"
    columns = PAIRED
    delta_doc = (
        "mean over answer tokens of NLL(variant: fact says B) − NLL(base: fact says A), nats"
    )

    def plan(self, ctx: RunContext) -> None:
        plan_by_distance(
            self, ctx, "replace", query=0, alt=lambda pair: tuple(pair.meta["new_value"])
        )

    @classmethod
    def diagnose_rows(cls, summary: dict) -> list[dict]:
        h, reach = summary["metrics"]["by_horizon"], summary["metrics"]["by_reach"]

        def accuracy(side: str) -> str:
            a = h[side]["accuracy"]
            return "no pairs" if a is None else f"accuracy {a:.2f}"

        parts = [
            f"{label} Δ={signed(reach[label]['delta_mean'])} (n={reach[label]['n']})"
            for label in ("layered", "beyond")
            if label in reach
        ]
        beyond = accuracy("beyond") + ("; " + ", ".join(parts) if parts else "")
        return [
            cls.effect(
                "retrieval within the horizon",
                "pair delta, reach direct (or state)",
                "fact-swap pair delta NLL(fact says B) − NLL(fact says A) on the answer, fact "
                "inside the direct window (a recurrent model: anywhere, through its state)",
                h["within"],
                detail=accuracy("within"),
            ),
            cls.effect(
                "retrieval beyond the horizon",
                "pair delta, reach layered+beyond",
                "the same for facts only in the layered reach or beyond it",
                h["beyond"],
                detail=beyond,
            ),
        ]
