"""A paired probe: a table of per-pair deltas, each pair a base text and its variant under one
edit, with the answer tokens scored in both.

A probe author subclasses `PairedProbe`, declares what it finds (`finding`, `finding_sign`,
`opposite`, `margin`, `delta_doc`) and fills `self.jobs` and `self.groups` in `plan`, one `Job`
per pair (`probes.api.fact_pairs.plan_by_distance` does it for a fact edit by distance); the hooks
below shape its records, bins, metrics, verdict and plots. Scoring, aggregation and the run's
own checks are the run machinery's: `execute` hands the probe to the paired engine that
`probes/__init__.py` names (`registry.set_paired_engine`; `probes.engine.paired` documents the
rows, the per-pair figures and the checks), so this contract imports nothing above it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from probes.api import checks
from probes.api.horizon import REACH_LABELS
from probes.api.probe_base import Outcome, Probe, RunContext
from probes.api.registry import paired_engine
from probes.stats import VERDICT_RULE, signed_effect, verdict_counts

# Names a subclass may define expecting the engine to call them, as PairedProbe's methods once
# were; the engine (a module of its own) never does, so such an override would be skipped.
ENGINE_METHODS = frozenset({"summarize", "_score_batch", "_record", "_checks"})


@dataclass
class Job:
    """One pair a PairedProbe scores: a synth `Pair` (base and variant, the same `Example` and
    `Pair` on real text), the answer tokens' positions in each, the sign of the delta, and
    optionally the other candidate answer B for the answer contrast."""

    group: int  # index into the probe's groups (bins / grid cells)
    pair: Any  # synth.example.Pair
    base_targets: np.ndarray  # base positions of the scored tokens
    variant_targets: np.ndarray  # the same tokens' positions in the variant
    fact_end: int  # base position of the fact's last token (distances are measured from it)
    sign: int = 1  # delta = sign · (variant − base)
    alt: tuple[int, ...] | None = None  # the other candidate answer (contrast), same length
    info: dict[str, Any] = field(default_factory=dict)  # recorded per pair in samples.jsonl
    base_id: int | None = None  # jobs with one base_id share one base Example (scored once)
    # base positions after the answer scored only for the beyond-reach zero check (tokens the
    # edit cannot reach: a probe whose answers all see the edit gives the check something to
    # check); length-preserving edits only (the same positions in the variant)
    check_targets: np.ndarray | None = None

    @property
    def distance(self) -> int:
        return int(self.base_targets[0]) - self.fact_end

    def row_length(self, side: str) -> int:
        """Tokens of the base (or variant) row a scoring call needs: up to its last scored
        target, the check tail's included."""
        targets = self.base_targets if side == "base" else self.variant_targets
        tail = self.check_targets if self.check_targets is not None else targets[:0]
        return int(max(targets.max(), tail.max(initial=0))) + 1


class PairedProbe(Probe):
    """A probe made of Jobs: subclasses build `self.jobs` and `self.groups` in `plan` and may
    override the hooks below (`primary`, `record_fields`, `bin_fields`, `extra_metrics`,
    `metric_docs`, `effect_phrase`, `verdict`, `make_plots`)."""

    shards = True  # scores through score_batches only
    self_checks = ("identical_prefix", "beyond_reach_zero")
    delta_doc = "mean over answer tokens of NLL(variant) − NLL(base), nats"
    finding = "the model uses the fact"  # what a significant run shows
    # The sign of Δ the finding claims (+1: Δ > 0 supports it) and what significant bins of the
    # other sign show instead; the verdict's head follows the sign of the significant bins.
    finding_sign: ClassVar[int] = 1
    opposite: ClassVar[str] = "the effect runs the other way"
    # the probe's own metric docs (and its wording of shared ones)
    docs: ClassVar[dict[str, str]] = {}
    delta_higher_is_better = True
    plot_series: str | None = None  # a bin field: one line per value in the delta plot
    jobs: list[Job]
    groups: list[dict[str, Any]]  # per group: fields shown in the bin (distance_lo/hi, kind, k, …)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse a method the paired engine once called on the probe and no longer does (its
        override would be skipped without a word); the hooks below replace them."""
        super().__init_subclass__(**kwargs)
        if stale := sorted(ENGINE_METHODS & set(vars(cls))):
            raise TypeError(
                f"{cls.__name__} defines {', '.join(stale)}, which the paired engine does not "
                "call on a probe: override its hooks (record_fields, bin_fields, extra_metrics, "
                "verdict, make_plots) instead"
            )

    def longest_row(self) -> int:
        """The longest text the planned jobs score (the runner checks it against the model's
        `max_row_length` before a run directory exists)."""
        return max((max(len(j.pair.base), len(j.pair.variant)) for j in self.jobs), default=0)

    def execute(self, ctx: RunContext) -> Outcome:
        """Score every job and summarize: the paired engine's work (module docstring)."""
        return paired_engine().execute(self, ctx)

    # ------------------------------------------------------------------ hooks

    def primary(self, group: dict[str, Any]) -> bool:
        """Whether a group's pairs make the run's headline delta (delta_mean, p_value,
        by_reach); every group by default."""
        return True

    def record_fields(self, record: dict[str, Any]) -> dict[str, Any]:
        """More fields of one pair's record, computed from it (before it is written)."""
        return {}

    def bin_fields(self, records: list[dict]) -> dict[str, Any]:
        """More fields of one bin, from the records of its pairs."""
        return {}

    def extra_metrics(self, ctx: RunContext, records: list[dict], bins: list[dict]) -> dict:
        """More run metrics (read-only views of the records and bins)."""
        return {}

    def metric_docs(self, has_alt: bool) -> dict[str, str]:
        return {**paired_metric_docs(self.delta_doc, has_alt), **self.docs}

    def verdict(self, outcome: Outcome) -> str:
        parts = []
        primary = [b for b in outcome.bins if self.primary(b)]
        for label in REACH_LABELS:
            sel = [b for b in primary if b.get("reach") == label and b["n"]]
            if not sel:
                continue
            n = sum(b["n"] for b in sel)
            mean = sum(b["delta_mean"] * b["n"] for b in sel) / n
            parts.append(f"{label} Δ={mean:+.3f} ({verdict_counts(sel)})")
        margin = primary[0].get("margin", self.margin) if primary else self.margin
        word = signed_effect(primary, self.finding_sign)
        undecidable = [b for b in primary if b.get("verdict") == "inconclusive"]
        if word == "inconclusive" and all(
            b.get("can_be_significant") is False for b in undecidable
        ):
            word = "too few pairs"
        head = f"{self.name}: {self.effect_phrase(word, margin)}"
        return f"{head} — {'; '.join(parts)}{checks.note(outcome.checks)}"

    def effect_phrase(self, word: str, margin: float) -> str:
        """The verdict's head for the bins' `signed_effect` (significant | opposite | mixed |
        negligible | inconclusive | too few pairs), from the probe's `finding`, `finding_sign` and
        `opposite`."""
        if word == "significant":
            return self.finding
        if word in ("opposite", "mixed"):
            claimed, other = (">", "<") if self.finding_sign > 0 else ("<", ">")
            if word == "opposite":
                return f"{self.opposite} (significant Δ {other} 0: not that {self.finding})"
            return (
                f"mixed — significant bins of both signs (Δ {claimed} 0: {self.finding}; "
                f"Δ {other} 0: {self.opposite})"
            )
        if word == "negligible":
            return f"negligible — if {self.finding}, by less than ±{margin:g} {self.margin_unit}"
        if word == "too few pairs":
            return (
                f"too few pairs to decide whether {self.finding} — with these pairs no bin can "
                "reach a Holm-adjusted p below 0.05 (give more pairs: --n)"
            )
        return f"inconclusive — no evidence that {self.finding}"

    def make_plots(self, ctx: RunContext, outcome: Outcome) -> list:
        """The run's plots: by default Δ by distance, a line per `plot_series` value, with the
        model's direct window and layered reach marked."""
        return paired_engine().delta_plots(self, ctx, outcome)


def paired_metric_docs(delta_doc: str, has_alt: bool) -> dict[str, str]:
    """What each metric of a paired run means, its pair delta described by `delta_doc`."""
    docs = {
        "delta_mean": f"mean over pairs of the pair delta ({delta_doc})",
        "delta_ci95": "95% Student-t interval of delta_mean",
        "p_value": "two-sided Wilcoxon signed-rank p over all pairs (bins: Holm-adjusted)",
        "accuracy": "fraction of pairs whose every answer token is the argmax in the base",
        "accuracy_ci95": "Wilson 95% interval of accuracy",
        "accuracy_variant": "the same in the variant (the base's answer tokens)",
        "answer_prob": "mean over pairs of the base answer's probability, exp(−Σ NLL over its "
        "tokens) under teacher forcing: how much mass the model gives the answer, where "
        "accuracy only says whether every token is the argmax",
        "answer_prob_variant": "the same in the variant (the base's answer tokens)",
        "by_reach": "delta and accuracy of the pairs whose first answer token is direct / "
        "layered / beyond",
        "by_horizon": "{within, beyond}: describe() of the pair deltas and the accuracy of the "
        "pairs whose fact is in the first answer token's direct window (or in a recurrent "
        "state), and of the rest",
        "n_significant_bins": "bins called significant by the verdict rule: " + VERDICT_RULE,
        "bins[].verdict": "significant | negligible | inconclusive (the verdict rule, with the "
        "probe's margin: see run.json margin)",
        "bins[].mdd80": "minimum detectable mean delta of the bin (80% power, Holm worst case)",
        "bins[].reach": "direct | layered | beyond: where most of the bin's answer tokens see "
        "the fact (probes.api.horizon)",
    }
    if has_alt:
        docs.update(
            {
                "contrast_base": "log p(A) − log p(B) at the answer in the base (fact says A)",
                "contrast_variant": "log p(A) − log p(B) at the answer in the variant "
                "(fact says B)",
                "contrast_shift": "contrast_base − contrast_variant per pair: value priors "
                "cancel; > 0 ⇔ the model reads the value",
                "accuracy_variant_alt": "fraction of pairs whose every token of B is the "
                "argmax in the variant (the model retrieves the swapped value)",
            }
        )
    return docs
