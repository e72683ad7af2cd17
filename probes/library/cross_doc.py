"""cross-doc: does the previous document leak into the next one through the cache?

Text: a document A, then a document B (its `<eod>` opens it). B states a fact and asks for it
`--b-distance` tokens later ("the ATTR of ENTITY is V ." … "? ATTR of ENTITY V ."); A states
the same attribute of the same entity with a conflicting value V′ (as many tokens as V), its last
token `distance` tokens before B's `<eod>` (the boundary). B's tokens are the same in every
condition and are scored under three cache policies:

    reset     a query sees only its own document: B's losses cannot depend on A (exact)
    carry     one stream, no reset: B reads A's states from the cache (the paper's evaluation)
    foreign   carry, but A replaced by an unrelated document of the same length (another topic,
              no facts): a cache that is full but irrelevant

Per pair, means over the scored tokens of B — `answer` (B's answer tokens V) or `first` (B's
first `--first` tokens after its `<eod>`); every delta > 0 means worse for B:

    carry-reset    NLL_carry(A;B) − NLL_reset(A;B)             what carrying A costs: any cache
                                                               content (a random model has it too)
    foreign-reset  NLL_carry(A_foreign;B) − NLL_reset(A;B)     what any full cache costs
    conflict       NLL_carry(A;B) − NLL_carry(A_foreign;B)     what A's fact itself does: the row
                                                               that answers "does a stale document
                                                               leak its fact" (with pull)
    pull           contrast_foreign − contrast_carry, contrast = log p(V) − log p(V′) at B's
                   answer (answer tokens only; value priors cancel, and so does what any full
                   cache does): > 0 ⇔ the model reads A's stale value V′ into B

The run's own checks (a failure makes `probe run` exit 1):
    reset_leakage_zero   leakage under reset, NLL_reset(A;B) − NLL_reset(A_foreign;B) on every
                         scored token of B (and on V′ in its place), is exactly 0 — bit for bit
    beyond_reach_zero    B tokens whose carry reach does not include A at all (nor a sink in A)
                         score the same under carry, foreign and reset (within the dtype's
                         tolerance; the same positions and shapes make them equal bit for bit);
                         a model whose reset moves positions (learned absolute positions) is
                         compared at equal positions only: carry with foreign. B ends in filler
                         past A's layered reach so that the check has tokens to check (by
                         default only where that at most doubles the longest text: a deep
                         model's reach is many times its texts; --check-tail)

Bins: distance (A's fact → the boundary) × kind × tokens; Holm runs across the distance bins of
one (kind, tokens) family. Each bin's reach label says where what the row measures falls for its
scored tokens under the carry geometry (under reset A is never visible), `reach_from`: A's fact
(its last token) for conflict and pull on B's answer; A's end (its last token, the boundary's
neighbour) for the rows that measure all of A — carry-reset, foreign-reset and every row of B's
first tokens — so a row labelled beyond sees nothing of A at all. Every policy is run on
the same tokens, so --reset/--carry is refused (exit 2); `metrics.policies` names what ran.

With `--haystack` all three are real text (`synth.text.contexts`): English facts and queries in
haystack filler, A's value of B's value's token length, the foreign document haystack text.

Through the tokenizer bridge (a model with its own tokenizer) the texts are synth texts mapped
to the model's tokens: the foreign document's filler is evened to A's model tokens (B's tokens
then sit at the same positions after either), V′ must take V's tokens, the distance bins are in
model tokens (each pair's synth gap fitted into its bin), `--b-distance` is about as many model
tokens (`Texts.synth_length`; default 16 synth words) and `--first` counts B's first model
tokens; pairs that cannot be mapped are counted as unmatched. The texts are the run's
(`Texts.cross_doc_pair`, `probes.texts.cross_doc_texts`).

Default n = 24 pairs per bin: with the 3–4 auto bins per family the rule detects (80 % power)
0.70–0.73 sd of the per-pair deltas (`mdd80` reports it in nats); stale state worth reporting moves
B's answer by a sizeable fraction of the retrieval effect (nats). --quick uses 6.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

import numpy as np

from probes import stats
from probes.api.checks import note, zero_check
from probes.api.declarations import DISTANCE, REACH, STATS, Column, signed
from probes.api.distance_bins import gap_bins, parse_ranges, ranges_text
from probes.api.fact_pairs import CHECK_TAIL, distance_param, draws_per_bin, row_limit
from probes.api.horizon import classify
from probes.api.model import horizon, reset_moves_positions, score_rows, tolerance
from probes.api.params import param
from probes.api.probe_base import Outcome, Probe, ProbeInputError, RunContext
from probes.api.registry import probe
from probes.api.rows import Rows, score_batches
from probes.engine.aggregate import by_group, by_reach, family_bins, flat_arrays
from probes.report import plots
from probes.stats import signed_effect, verdict_counts
from probes.texts.cross_doc_texts import B_LEAD, TextShape

KINDS = ("carry-reset", "foreign-reset", "conflict")
POLICIES = ("reset", "carry", "foreign")
NLLS = ("reset", "reset_foreign", "carry", "foreign")  # the scored conditions
TOKEN_ARRAYS = ["position", "is_answer", "distance", "direct", "reach", *(f"nll_{k}" for k in NLLS)]
FAMILIES = (
    *(("answer", k) for k in (*KINDS, "pull")),
    *(("first", k) for k in KINDS),
)
# What a family measures decides where its reach label is counted from: A's fact (its last
# token) for what A's fact does to B's answer (conflict, pull); A's last token for the rows that
# measure all of A — any cache content (carry-reset), a foreign document in A's place
# (foreign-reset), and every row of B's first tokens, which ask nothing about the fact.
OF_FACT = {("answer", "conflict"), ("answer", "pull")}
REACH_FROM = {"fact": ("A's fact", "distance"), "all": ("A's end", "distance_end")}

DISTANCE_HELP = (
    "bins of the distance from A's fact (its last token) to the document boundary (B's <eod>): "
    "'auto' (from the carry geometry: adjacent, inside the direct window, only in the layered "
    "reach, beyond) or LO-HI,… e.g. 2-16,200-300"
)


@probe("cross-doc", version=3, diagnose=40)
class CrossDoc(Probe):
    """Previous document with a conflicting fact: reset vs carry vs foreign cache on B."""

    @dataclass(frozen=True)
    class Params:
        distance: str = distance_param(DISTANCE_HELP)
        b_distance: int | None = param(
            None,
            help="B's own fact → answer distance (tokens) [default: 16; on real text the "
            "shortest its query allows]",
            min=6,
            max=4096,
        )
        first: int = param(8, help="B's first tokens scored (after its <eod>)", min=1, max=B_LEAD)
        check_tail: Literal["auto", "on", "off"] = param(
            "auto",
            help="pad B past A's layered reach so that beyond_reach_zero has tokens to check "
            "(a deep model's reach is n_layer cache lengths: thousands of tokens per text): "
            "on, off (B ends after its answer; the check is not applicable), or auto (on where "
            "the texts can hold it — the haystack, a model's positions — and it at most doubles "
            "the longest text)",
        )

    default_n = 24
    quick_n = 6
    shards = True  # scores through score_batches only
    columns = (
        DISTANCE,
        Column("kind", "kind", "left", identifies=True),
        Column("tokens", "tokens", identifies=True),
        *STATS,
        Column("acc", "accuracy", "f2"),
        Column("reach of", "reach_from", "left"),
        *REACH,
    )
    runs_every_policy = True
    tail_left_out = ""  # why auto left B's padding out (plan)
    smoke: ClassVar[dict] = {"synth": {}, "haystack": {"distance": "2-8"}, "bridged": {}}
    self_checks = ("reset_leakage_zero", "beyond_reach_zero")

    def plan(self, ctx: RunContext) -> None:

        p = self.params
        texts = ctx.texts
        self.b_distance = (
            texts.synth_length(p.b_distance, 6) if p.b_distance else texts.short_distance
        )
        self.reset_geometry = replace(ctx.geometry, reset=True)
        self.carry_geometry = replace(ctx.geometry, reset=False)
        self.carry_horizon = horizon(ctx.model, self.carry_geometry)
        self.reset_moves_positions = reset_moves_positions(ctx.model)
        (_, _), (_, reach) = self.carry_horizon.ranges()
        # B's first answer token after its <eod>, in the model's tokens: its lead, its fact
        # with a one-token value (on real text: a fact's tokens), then b_distance
        fact = texts.fact_length
        offset = texts.model_length(B_LEAD + fact + self.b_distance)
        given = parse_ranges(p.distance)
        bins = ctx.resolve_auto(
            "distance",
            p.distance,
            parse_ranges,
            lambda: gap_bins(self.carry_horizon, offset),
            ranges_text,
        )
        # filler after B's query, so that B's last CHECK_TAIL tokens lie beyond A's layered reach
        # (the beyond_reach_zero check has tokens to check)
        tail = (
            0 if self.carry_horizon.unbounded or p.check_tail == "off" else reach + CHECK_TAIL + 1
        )
        unpadded = bins[-1][1] + offset  # the longest gap and B up to its answer
        if tail > unpadded and p.check_tail == "auto":
            # a sanity check, not the measurement: never worth more than the texts themselves
            tail = 0
            self.tail_left_out = (
                f"B's padding past A's reach ({reach + CHECK_TAIL + 1:,} tokens) would more "
                f"than double its longest text ({unpadded:,} tokens without it)"
            )
        limit = row_limit(ctx)  # what a text can hold: the haystack, a model's positions
        if limit is not None:
            # A's fact, and B's fact and answer beside its offset, in the model's tokens
            facts = 2 * texts.model_length(fact)
            room = limit.tokens - offset - facts
            if tail and p.check_tail == "auto" and bins[-1][1] + tail > room:
                tail = 0  # the check's tokens do not fit: left out (the check says why)
                self.tail_left_out = (
                    f"B's padding past A's reach ({reach + CHECK_TAIL + 1:,} tokens) does not "
                    f"fit {limit.what}"
                )
            if given is None:
                bins = [(lo, min(hi, room - tail)) for lo, hi in bins if lo <= room - tail]
            elif bins[-1][1] + tail > room:
                padded = " with B padded past the reach" if tail else ""
                raise ProbeInputError(
                    f"--distance {p.distance!r}: {limit.what} hold gaps up to "
                    f"{max(room - tail, 0):,} tokens here{padded}; give shorter distances"
                    + (" or --check-tail off" if tail else "")
                )
            if not bins:
                raise ProbeInputError(
                    f"{limit.what} leave room for no cross-doc gap at this geometry"
                    + (f" with B padded {tail:,} tokens past its query" if tail else "")
                    + "; lower --mem"
                    + (" or give --check-tail off" if tail else "")
                )
        self.check_tail = (tail, CHECK_TAIL) if tail else (2, 0)
        self.tail_rng = ctx.rng(self.name, "tail")
        self.groups = [{"distance_lo": lo, "distance_hi": hi} for lo, hi in bins]
        a_start = (1, ctx.geometry.tgt_len)  # A's fact starts in its first segment
        shape = TextShape(self.b_distance, B_LEAD, p.first, *self.check_tail, self.tail_rng,
                          a_start)  # fmt: skip
        drawn = [
            texts.cross_doc_pair(shape, rng, g, gap, bins[g])
            for g, rng, gap in draws_per_bin(self.name, ctx, bins)
        ]
        self.pairs = [pr for pr in drawn if pr is not None]  # None: not aligned in the tokenizer
        ctx.unmatched += len(drawn) - len(self.pairs)
        ctx.require_matched(self.name, len(self.pairs))

    def _why_no_blind_tokens(self) -> str:
        why = "every scored token of B can see some of A under carry"
        if self.params.check_tail == "off":
            return why + " (--check-tail off: B ends at its answer)"
        if self.tail_left_out:
            return why + f" ({self.tail_left_out}: B ends at its answer; --check-tail on asks it)"
        return why

    def execute(self, ctx: RunContext) -> Outcome:
        order = sorted(range(len(self.pairs)), key=lambda i: len(self.pairs[i]["conf"]))
        records, toks = score_batches(
            ctx, order, 4, f"{self.name}: scoring pairs", lambda items: self._score(ctx, items)
        )
        return self.summarize(ctx, records, toks)

    def _score(self, ctx: RunContext, items):
        """A's and the foreign text before B, each also with V′ in B's answer, under both
        cache policies; one (record, tokens) per pair."""
        rows = Rows()
        layout = []
        for i in items:
            pr = self.pairs[i]
            scored = np.r_[pr["first"], pr["answer"], pr["check"]]
            docs = pr["doc_ids"]
            r_c = rows.add(pr["conf"], docs, scored)
            # related to r_c (nothing shared): compared with it bit for bit under reset
            r_f = rows.add(pr["foreign"], docs, scored, r_c, 0)
            alts = []
            end = int(pr["answer"][-1]) + 1  # the stale value in B's answer: scored there only
            for r in (r_c, r_f):
                t = rows.tokens[r][:end].copy()
                t[pr["answer"]] = pr["stale"]
                alts.append(rows.add(t, docs[:end], pr["answer"], r, int(pr["answer"][0])))
            layout.append((i, r_c, r_f, *alts))
        tokens, docs, pos, parent, shared = rows.arrays(ctx.pad_id)
        out = {
            name: score_rows(ctx.model, tokens, docs, pos, geometry, parent=parent, shared=shared)
            for name, geometry in (("reset", self.reset_geometry), ("carry", self.carry_geometry))
        }
        return [self._record(ctx, *where, out) for where in layout]

    def _record(self, ctx, i: int, r_c, r_f, r_ca, r_fa, out):
        pr = self.pairs[i]
        ans, first = pr["answer"], pr["first"]
        rs, cs = out["reset"], out["carry"]
        scored = np.r_[first, ans]
        nll = {
            "reset": rs.nll[r_c, scored],
            "reset_foreign": rs.nll[r_f, scored],
            "carry": cs.nll[r_c, scored],
            "foreign": cs.nll[r_f, scored],
        }
        for k, v in nll.items():
            if not np.all(np.isfinite(v)):
                raise RuntimeError(f"{self.name}: the model returned a non-finite NLL ({k})")
        k = len(first)
        part = {"first": slice(0, k), "answer": slice(k, None)}
        leak = np.r_[
            nll["reset"] - nll["reset_foreign"],
            rs.nll[r_ca, ans] - rs.nll[r_fa, ans],
        ]
        # tokens of B that the carry geometry lets see nothing of A (A's last token is len_a − 1):
        # among the scored ones, and the filler past A's reach appended to B for this check
        direct, reach = self.carry_horizon.tokens(scored)
        dist = scored - pr["fact_end"]
        seen = np.r_[scored, pr["check"]]
        _, seen_reach = self.carry_horizon.tokens(seen)
        blind = seen[(seen - (pr["len_a"] - 1)) > seen_reach]
        if self.carry_horizon.is_sink(0):  # A opens the row: every token of B sees its sinks
            blind = blind[:0]
        # blind tokens compare with reset only where reset keeps their positions (else the
        # carry and foreign rows, at the same positions, compare with each other)
        reset_b = cs.nll[r_f, blind] if self.reset_moves_positions else rs.nll[r_c, blind]
        rec: dict[str, Any] = {
            "group": pr["group"],
            "distance": pr["gap"],
            "cross_distance": int(ans[0] - pr["fact_end"]),
            "len_a": pr["len_a"],
            "answer_len": len(ans),
            "reach": classify(int(dist[k]), int(direct[k]), int(reach[k])),
            "direct_window": int(direct[k]),
            "layered_reach": int(reach[k]),
            "reset_leak_max_abs": float(np.abs(leak).max()),
            "reset_leak_exact": bool(np.all(leak == 0.0)),
            "reset_leak_tokens": int(leak.size),
            "blind_tokens": int(blind.size),
            "blind_max_abs": float(
                max(
                    np.abs(cs.nll[r_c, blind] - reset_b).max(initial=0.0),
                    np.abs(cs.nll[r_f, blind] - reset_b).max(initial=0.0),
                )
            ),
        }
        for tokens, sl in part.items():
            m = {key: float(v[sl].mean()) for key, v in nll.items()}
            for key, v in m.items():
                rec[f"nll_{key}_{tokens}"] = v
            rec[f"carry_reset_{tokens}"] = m["carry"] - m["reset"]
            rec[f"foreign_reset_{tokens}"] = m["foreign"] - m["reset"]
            rec[f"conflict_{tokens}"] = m["carry"] - m["foreign"]
        # policy → (its scores, the row of B's text, of B with V′ in the answer)
        rows = {"reset": (rs, r_c, r_ca), "carry": (cs, r_c, r_ca), "foreign": (cs, r_f, r_fa)}
        for pol, (sc, r, r_alt) in rows.items():
            rec[f"contrast_{pol}"] = float(sc.nll[r_alt, ans].sum() - sc.nll[r, ans].sum())
            rec[f"correct_{pol}"] = bool(sc.correct[r, ans].all())
        rec["pull_answer"] = rec["contrast_foreign"] - rec["contrast_carry"]
        tok = {
            "position": scored,
            "is_answer": np.r_[np.zeros(k, bool), np.ones(len(ans), bool)],
            "distance": dist,
            "distance_end": scored - (pr["len_a"] - 1),  # from A's last token (not in tokens.npz)
            "direct": direct,
            "reach": reach,
            **{f"nll_{key}": v for key, v in nll.items()},
        }
        return rec, tok

    def summarize(self, ctx: RunContext, records: list[dict], toks: list[dict]) -> Outcome:
        families = [
            ({"kind": kind, "tokens": tokens, "measure": f"{kind} · {tokens}", "reach_from": frm},
             f"{kind.replace('-', '_')}_{tokens}", tokens == "answer", distance)
            for tokens, kind in FAMILIES
            for frm, distance in [REACH_FROM["fact" if (tokens, kind) in OF_FACT else "all"]]
        ]  # fmt: skip
        bins = family_bins(self.groups, records, toks, families, "is_answer", ctx.margin)
        groups = [grp for _ in families for grp in by_group(self.groups, records)]
        for b, grp in zip(bins, groups, strict=True):
            if b["tokens"] == "answer":
                for pol in POLICIES:
                    b["accuracy" if pol == "reset" else f"accuracy_{pol}"] = accuracy(grp, pol)
        metrics = self._metrics(records)
        main = [b for b in bins if b["kind"] == "carry-reset" and b["tokens"] == "answer"]
        metrics["n_significant_bins"] = sum(b["significant"] for b in main)
        checks = self._checks(ctx, records)
        outcome = Outcome(
            metrics=metrics,
            bins=bins,
            checks=checks,
            metric_docs=METRIC_DOCS,
            higher_is_better={
                **dict.fromkeys(("delta_mean", "carry_minus_reset", "foreign_minus_reset"), False),
                **dict.fromkeys(("conflict", "pull"), False),
                **dict.fromkeys(("accuracy", "accuracy_carry"), True),
            },
            n_pairs=len(records),
            arrays=flat_arrays(records, toks, TOKEN_ARRAYS, "position"),
        )
        outcome.verdict = self._verdict(outcome)
        outcome.plots = [self._plot(ctx, bins)]
        return outcome

    def _metrics(self, records: list[dict]) -> dict[str, Any]:
        def d(key):
            return stats.describe(np.array([r[key] for r in records]))

        main = d("carry_reset_answer")
        acc = stats.accuracy(np.array([r["correct_reset"] for r in records], bool))
        leak = [r["reset_leak_max_abs"] for r in records]
        return {
            "delta_mean": main["mean"],
            "delta_ci95": main["ci95"],
            "p_value": main["p_value"],
            "carry_minus_reset": {"answer": main, "first": d("carry_reset_first")},
            "foreign_minus_reset": {
                "answer": d("foreign_reset_answer"),
                "first": d("foreign_reset_first"),
            },
            "conflict": {"answer": d("conflict_answer"), "first": d("conflict_first")},
            "pull": d("pull_answer"),
            "contrast": {k: d(f"contrast_{k}") for k in POLICIES},
            "reset_leakage": {
                "max_abs": max(leak, default=0.0),
                "exact_zero_pairs": sum(r["reset_leak_exact"] for r in records),
                "pairs": len(records),
            },
            "accuracy": acc["accuracy"],
            "accuracy_ci95": acc["accuracy_ci95"],
            **{f"accuracy_{pol}": accuracy(records, pol) for pol in ("carry", "foreign")},
            "by_reach": by_reach(records, "carry_reset_answer", accuracy=None),
            "policies": list(POLICIES),
        }

    def _checks(self, ctx: RunContext, records: list[dict]) -> dict[str, dict]:
        return {
            "reset_leakage_zero": zero_check(
                "under reset, B's scored tokens (and the stale value in the answer's place) "
                "score bit-for-bit the same after A and after the foreign document",
                covered=sum(r["reset_leak_tokens"] for r in records),
                worst=max((r["reset_leak_max_abs"] for r in records), default=0.0),
                tolerance=0.0,
                why_empty="no pairs",
            ),
            "beyond_reach_zero": zero_check(
                "B tokens whose carry reach includes nothing of A score the same under carry, "
                "foreign and reset",
                covered=sum(r["blind_tokens"] for r in records),
                worst=max((r["blind_max_abs"] for r in records), default=0.0),
                tolerance=tolerance(ctx.model),
                why_empty=self._why_no_blind_tokens(),
                n_tokens=sum(r["blind_tokens"] for r in records),
            ),
        }

    def _verdict(self, outcome: Outcome) -> str:
        """Two findings: what any cache content does to B (carry − reset) and what A's
        conflicting fact does (conflict: carry after A − carry after the foreign document)."""
        m, fmt = outcome.metrics, signed

        def family(kind):
            return [b for b in outcome.bins if b["kind"] == kind and b["tokens"] == "answer"]

        c, f = m["carry_minus_reset"]["answer"], m["conflict"]["answer"]
        ci = c["ci95"]
        head = {  # conflict > 0 claims the leak (METRIC_DOCS); a significant Δ < 0 does not
            "significant": "A's conflicting fact leaks into B's answer",
            "opposite": "B's answer is likelier after A than after a foreign document (no leak "
            "of A's fact)",
            "mixed": "mixed — A's fact costs B's answer in some bins and helps it in others",
            "negligible": "A's conflicting fact leaks into B by less than the margin",
        }.get(signed_effect(family("conflict"), 1), "no evidence that A's fact leaks into B")
        text = (
            f"{self.name}: {head} — A's fact (conflict) Δ={fmt(f['mean'])} "
            f"({verdict_counts(family('conflict'))}), pull toward A's value "
            f"{fmt(m['pull']['mean'])}; any cache content (carry-reset) Δ={fmt(c['mean'])}"
            + (f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "")
            + f" ({verdict_counts(family('carry-reset'))}), foreign-reset "
            f"Δ={fmt(m['foreign_minus_reset']['answer']['mean'])}; first tokens carry-reset "
            f"Δ={fmt(m['carry_minus_reset']['first']['mean'])}"
        )
        exact = outcome.checks["reset_leakage_zero"]["status"] == "passed"
        return text + ("; reset leakage exactly 0" if exact else "") + note(outcome.checks)

    @classmethod
    def diagnose_rows(cls, summary: dict) -> list[dict]:
        m = summary["metrics"]
        cache = (
            "stale state: cache content",
            "carry_minus_reset",
            "NLL of B's answer with the previous document carried − with reset (any content)",
            f"first tokens {signed(m['carry_minus_reset']['first']['mean'])}, reset leakage max "
            f"{m['reset_leakage']['max_abs']:.1g}",
        )
        fact = (
            "stale state: previous document's fact",
            "conflict",
            "NLL of B's answer after A (its conflicting value) − after a foreign document, both "
            "carried (A's fact itself)",
            f"pull toward A's value {signed(m['pull']['mean'])}",
        )
        return [
            cls.effect(
                effect,
                f"{key}.answer",
                why,
                m[key]["answer"],
                detail=detail,
            )
            for effect, key, why, detail in (cache, fact)
        ]

    def _plot(self, ctx: RunContext, bins: list[dict]):

        g = ctx.geometry
        title = (
            f"{self.name} · {ctx.model.info.id} · mem {g.mem_len} tgt {g.tgt_len} "
            f"clamp {g.clamp_len}"
        )
        shown = [b for b in bins if b["kind"] != "pull"]

        return plots.deferred(
            plots.delta_by_distance,
            "cross_doc.png",
            shown,
            title=title,
            ylabel="Δ NLL on B's tokens (nats, mean over pairs)",
            xlabel="distance from A's fact to the document boundary (tokens)",
            series_key="measure",
        )


def accuracy(records: list[dict], policy: str) -> float | None:
    """The share of pairs whose every answer token of B is the argmax under `policy`."""
    return stats.accuracy(np.array([r[f"correct_{policy}"] for r in records], bool))["accuracy"]


METRIC_DOCS = {
    "delta_mean": "carry-reset on B's answer (mean over pairs of NLL_carry(A;B) − NLL_reset(A;B)), "
    "nats; > 0 ⇔ carrying A hurts B",
    "delta_ci95": "95% Student-t interval of delta_mean",
    "p_value": "exact two-sided signed-rank p of delta_mean over all pairs",
    "carry_minus_reset": "{answer, first}: describe() of carry-reset: any cache content",
    "foreign_minus_reset": "{answer, first}: describe() of foreign-reset: a full, irrelevant cache",
    "conflict": "{answer, first}: describe() of conflict: what A's conflicting fact does to B",
    "pull": "describe() of pull: > 0 ⇔ the model reads A's stale value V′ into B's answer",
    "contrast": "{reset, carry, foreign}: log p(V) − log p(V′) at B's answer under each policy",
    "reset_leakage": "max |NLL_reset(A;B) − NLL_reset(A_foreign;B)| over B's scored tokens (0)",
    "accuracy": "fraction of pairs whose every answer token of B is the argmax under reset",
    "accuracy_ci95": "Wilson 95% interval of accuracy",
    "accuracy_carry": "the same under carry (A's conflicting fact in the cache)",
    "accuracy_foreign": "the same under carry after the foreign document",
    "by_reach": "carry-reset by where A's fact falls for B's first answer token (carry geometry)",
    "policies": "the cache policies scored (all of them, on the same tokens)",
    "n_significant_bins": "carry-reset · answer bins called significant: " + stats.VERDICT_RULE,
    "bins[].kind": "carry-reset | foreign-reset | conflict | pull (the module's formulas)",
    "bins[].tokens": "answer (B's answer tokens) | first (B's first tokens after its <eod>)",
    "bins[].distance_lo/hi": "distance from A's fact (its last token) to B's <eod>",
    "bins[].p_value": "signed-rank p, Holm-adjusted across the distance bins of one (kind, tokens)",
    "bins[].reach": "where what the bin measures falls for its scored tokens under the carry "
    "geometry, counted from bins[].reach_from",
    "bins[].reach_from": "A's fact (its last token: conflict and pull on B's answer) | A's end "
    "(A's last token: the rows that measure all of A — carry-reset, foreign-reset, first tokens)",
}
