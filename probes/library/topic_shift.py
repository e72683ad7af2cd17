"""topic-shift: does the model adapt to the topic of distant text? (facts untouched)

Base: one document — `<eod>`, `--region` filler tokens of the document's topic, then `distance`
− 1 more filler tokens, the `--window` scored filler tokens, a fact, filler and its query.
Variant: the same text with every filler token of the first region (everything more than
`distance` − 1 tokens before the scored window) replaced by filler of another topic (synth's
topic_shift edit; facts, queries and all later tokens untouched, nothing moves). Distance: from
the last replaced token to a scored token (bins by the first scored token).

    delta (per pair) = mean over the scored tokens of NLL_variant − NLL_base
    tokens = ordinary  the `--window` filler tokens: > 0 ⇔ the model adapted its filler
                       predictions to the distant topic (topic adaptation)
    tokens = answer    the query's answer tokens (the fact is `--fact-distance` before them, in
                       both texts): ≈ 0 when retrieval does not depend on the topic

With `--haystack` the text is real (`synth.text.contexts.topic_shift`): the document is one
haystack document's text, and the variant's distant region is as many tokens of another
document's text — the topic is the document's subject, not a synth topic; `old_topic` and
`new_topic` are the two documents.

Through the tokenizer bridge (a model with its own tokenizer) the distance bins are in model
tokens (each pair's synth distance fitted into its bin), the replaced region is evened to the
base region's model tokens with words of the new topic (`probes.texts.bridged.fill`), the scored
window is the first `--window` model tokens of its words, and `--region` and `--fact-distance`
are about as many model tokens (`Texts.synth_length`; `--fact-distance` defaults to 64 there,
16 synth words' worth); pairs that cannot be mapped are counted as unmatched. The run's texts
draw each pair, in whichever of the three they are written (`Texts.topic_shift_jobs`).

Topic adaptation is the effect of the cache that is neither boundary repair (the scored tokens
have `distance` − 1 tokens of their own topic right before them in both texts) nor retrieval of a
fact; report it beside fact-swap's retrieval delta (`probe diagnose` does).

Default n = 24 pairs per bin: with the 3–4 auto bins × 2 token sets and Holm the rule detects
about 0.76 sd of the per-pair deltas (`mdd80` in nats); the window averages 16 tokens per pair, so
the per-pair sd is small and small adaptation effects resolve. --quick uses 6.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from probes import stats
from probes.api.declarations import (
    ACCURACY,
    DISTANCE,
    REACH,
    STATS,
    Column,
    signed,
)
from probes.api.fact_pairs import distance_bins, distance_param, draws_per_bin
from probes.api.paired import Job, PairedProbe
from probes.api.params import param
from probes.api.probe_base import RunContext
from probes.api.registry import probe
from synth.generate import MIN_DISTANCE

DISTANCE_HELP = (
    "distance bins, last replaced (distant) token → first scored token: 'auto' (fact-swap's bins "
    "from the eval geometry) or LO-HI,… e.g. 8-64,700-900"
)
TOKENS = ("ordinary", "answer")


@probe("topic-shift", version=2, diagnose=30)
class TopicShift(PairedProbe):
    """Distant filler of another topic, facts untouched: delta on ordinary tokens = adaptation."""

    @dataclass(frozen=True)
    class Params:
        distance: str = distance_param(DISTANCE_HELP)
        region: int = param(
            128, help="filler tokens of the distant region that change topic", min=8, max=8192
        )
        window: int = param(16, help="ordinary (filler) tokens scored per pair", min=1, max=512)
        fact_distance: int | None = param(
            None,
            help="the fact → its answer (inside the kept, unchanged text) [default: 16; on real "
            "text the shortest its query allows]",
            min=6,
            max=4096,
        )

    default_n = 24
    quick_n = 6
    margin = 0.02
    margin_unit = "nats/token"
    margin_why = (
        "2 % of an ordinary token's perplexity; adapting to a topic moves filler predictions by "
        "tenths of a nat"
    )
    finding = "the model adapts to the distant topic"
    finding_sign = 1  # Δ > 0: the filler got less likely after distant text of another topic
    opposite = "the filler is likelier after distant text of another topic"
    columns = (DISTANCE, Column("tokens", "tokens", identifies=True), *STATS, *ACCURACY, *REACH)
    plot_series = "tokens"
    smoke: ClassVar[dict] = {
        "synth": {},
        "haystack": {"region": 24, "distance": "8-12"},
        "bridged": {},
    }
    delta_doc = (
        "mean over the scored tokens of NLL(variant: distant filler of another topic) − "
        "NLL(base), nats"
    )

    def plan(self, ctx: RunContext) -> None:
        # from the replaced region to the scored tokens: the synth floor on real text too
        bins = distance_bins(self.params.distance, ctx, minimum=MIN_DISTANCE)
        self.groups = [
            {"distance_lo": lo, "distance_hi": hi, "tokens": t} for lo, hi in bins for t in TOKENS
        ]
        self.jobs = []
        p = self.params
        for b, rng, d in draws_per_bin(self.name, ctx, bins):
            g = {t: b * len(TOKENS) + i for i, t in enumerate(TOKENS)}  # this bin's two groups
            base_id = len(self.jobs)
            jobs = ctx.texts.topic_shift_jobs(
                rng, d, bins[b], region=p.region, window=p.window, fact_distance=p.fact_distance,
                jobs=lambda pair, d, g=g, base_id=base_id: self._jobs(pair, g, d, base_id),
            )  # fmt: skip
            if jobs is None:
                ctx.unmatched += len(TOKENS)
                continue
            ordinary = jobs[0]
            # the window's words may take more model tokens (the bridge): its first `window`
            cut = ordinary.base_targets[: p.window]
            self.jobs += [replace(ordinary, base_targets=cut, variant_targets=cut), jobs[1]]
        ctx.require_matched(self.name, len(self.jobs))

    def _jobs(self, pair, groups: dict[str, int], d: int, base_id: int) -> list[Job]:
        """The pair's two jobs, drawn at distance d: its scored filler window, `d` tokens after
        the last replaced token, and its query's answer."""
        window = self.params.window
        base, q = pair.base, pair.base.queries[0]
        replaced = np.flatnonzero(pair.alignment < 0)
        last = int(replaced.max())
        ordinary = np.arange(last + d, last + d + window, dtype=np.int64)
        if not base.filler_mask()[ordinary].all():  # the texts' layout makes them filler
            raise RuntimeError(f"{self.name}: scored window {ordinary[0]}.. is not all filler")
        info = {
            "old_topic": pair.meta["old_topic"],
            "new_topic": pair.meta["new_topic"],
            "n_replaced": len(replaced),
        }
        answer = q.answer.indices()
        return [
            Job(groups["ordinary"], pair, ordinary, ordinary, last, info=info, base_id=base_id),
            Job(groups["answer"], pair, answer, answer, last, info=info, base_id=base_id),
        ]

    def verdict(self, outcome) -> str:
        import dataclasses

        ordinary = [b for b in outcome.bins if b["tokens"] == "ordinary"]
        head = super().verdict(dataclasses.replace(outcome, bins=ordinary))
        a = outcome.metrics.get("by_tokens", {}).get("answer", {})
        if a.get("mean") is None:
            return head
        return f"{head}; answer tokens (facts untouched) Δ={a['mean']:+.3f}"

    def primary(self, group: dict) -> bool:
        return group["tokens"] == "ordinary"  # the headline delta: topic adaptation

    def extra_metrics(self, ctx: RunContext, records: list[dict], bins: list[dict]) -> dict:

        out = {}
        for t in TOKENS:
            ids = {g for g, b in enumerate(self.groups) if b["tokens"] == t}
            sel = [r for r in records if r["group"] in ids]
            out[t] = stats.describe(np.array([r["delta"] for r in sel]))
            out[t]["by_reach"] = {
                label: stats.describe(np.array([r["delta"] for r in sel if r["reach"] == label]))
                for label in ("direct", "layered", "state", "beyond")
                if any(r["reach"] == label for r in sel)
            }
        return {"by_tokens": out}

    docs: ClassVar[dict[str, str]] = {
        "delta_mean": "topic adaptation: mean over pairs of the delta on ordinary tokens "
        "(NLL with distant filler of another topic − NLL in the base), nats",
        "by_reach": "delta on ordinary tokens by whether the replaced region's last token "
        "is direct / layered / beyond for the first scored token",
        "by_tokens": "{ordinary, answer}: describe() of the pair deltas on ordinary "
        "(filler) tokens — topic adaptation — and on answer tokens (facts untouched), "
        "each with by_reach",
        "bins[].tokens": "ordinary (the scored filler window) | answer (the query's answer)",
        "accuracy": "fraction of pairs whose every scored token is the argmax in the base "
        "(for ordinary tokens: the whole window)",
    }

    @classmethod
    def diagnose_rows(cls, summary: dict) -> list[dict]:
        tokens = summary["metrics"]["by_tokens"]
        return [
            cls.effect(
                "topic adaptation",
                "by_tokens.ordinary",
                "NLL of ordinary tokens with the distant filler in another topic − in the "
                "document's topic",
                tokens["ordinary"],
                detail=f"answer tokens {signed(tokens['answer']['mean'])}",
            )
        ]
