"""boundary: does the cache repair segment starts? (context fragmentation, on local-only text)

Text: synth's local-only corpus (independent short sentences, the One Billion Word analogue):
nothing in it depends on anything beyond its own sentence, so the only thing a memory can give a
token is the rest of its broken sentence — the prefix that segmentation cut off. Each text is
`warm` segments (enough for a full memory: ⌈mem_len / tgt_len⌉, at least 1) and `--segments`
scored segments; every target of a scored segment is scored under three conditions:

    mem     the streaming evaluator with the eval memory (the paper's Transformer-XL)
    nomem   the same segmentation with mem_len 0: every segment starts from nothing
    doc     with memory, but a document boundary right before the segment (its first input
            becomes `<eod>`, which opens a new document; the run's --reset/--carry policy applies)

By position o in the segment (o = 0: the target predicted by the segment's first input):

    gain(o) = NLL_nomem(o) − NLL_mem(o)     > 0 ⇔ the memory helps at that position
    doc(o)  = NLL_doc(o) − NLL_mem(o)       what a document boundary costs there

Per pair (a text; the unit of analysis): the mean over its scored segments at each position, and
over the first `--first` positions (`first`), the rest (`rest`) and their difference
(`first−rest`). Boundary repair = gain concentrated at the first positions on text that has
nothing far to retrieve.

Metrics: `delta_mean` / `delta_ci95` / `p_value` = the gain in the first `--first` positions
(nats/token at segment start; `probe diagnose` reports it), `gain` and `doc` ({first, rest,
first_minus_rest}: describe()), `by_position` (the curve, per position: mean and CI of both,
and the three NLLs). Bins: kind (nomem-mem | doc-mem) × region (first | rest |
first_minus_rest, shown as `positions`), Holm across the three of one kind. Plot:
`boundary_gain.png`, the two curves by position with CI bands. Own checks:
`first_segment_equal` — the first segment has no memory under either condition, so mem and nomem
score its tokens the same; `reset_boundary_equal` — under reset the first scored segment after its
boundary is scored once more with the text before the boundary reversed (same length and doc
ids, other content, a scoring call of its own), and must score the same within the dtype's
tolerance: an evaluator that ignores reset reads the text before the boundary and fails it (not
applicable under `--carry`, where the doc condition reads it by design).

With `--haystack` the text is real: shuffled independent sentences of the haystack (both:
`Texts.sentence_text`; through the tokenizer bridge the synth text in the model's tokens, cut to
the length), the One
Billion Word analogue (sentences of real prose share more than synth's do — a style, a
subject — so a gain past the first positions is the cache reading that, not repair).

Boundary repair is a property of segmented (cached) evaluation: with `--evaluator recompute`
every token gets a full window of its own and the curve is flat by construction, and a
recurrent model scored by its state (`--evaluator state`) carries it through every segment
start — the probe is not applicable there (exit 2; `probe diagnose` leaves it out for that
model).

Default n = 16 texts: the first-k gain of a text averages `--first` × `--segments` tokens, so its
sd is a fraction of a nat and 16 texts detect (80 % power, 3 bins, Holm) 0.89 sd of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from probes import stats
from probes.api.checks import note, zero_check
from probes.api.declarations import STATS, Column, signed
from probes.api.model import score_rows, tolerance
from probes.api.params import param
from probes.api.probe_base import Outcome, Probe, ProbeNotApplicable, RunContext
from probes.api.registry import probe
from probes.api.rows import Rows, score_batches
from probes.report import plots

CHECK_TOKENS = 8  # first-segment targets scored for the first_segment_equal check
KINDS = ("nomem-mem", "doc-mem")


@probe("boundary", version=2, diagnose=10)
class Boundary(Probe):
    """Loss by position in the segment with vs without memory, on local-only text."""

    @dataclass(frozen=True)
    class Params:
        first: int = param(4, help="positions at a segment's start that count as its start", min=1)
        segments: int = param(2, help="scored segments per text", min=1, max=64)

    default_n = 16
    quick_n = 4
    shards = True  # scores through score_batches only
    margin = 0.02
    margin_unit = "nats/token"
    margin_why = (
        "2 % of a token's perplexity; the repair the cache gives a segment's first tokens is "
        "tenths of a nat"
    )
    columns = (
        Column("kind", "kind", "left", identifies=True),
        Column("positions", "positions", identifies=True),
        *STATS,
    )

    smoke: ClassVar[dict] = {"synth": {}, "haystack": {}, "bridged": {}}
    self_checks = ("first_segment_equal", "reset_boundary_equal")

    def plan(self, ctx: RunContext) -> None:
        g = ctx.geometry
        T = g.tgt_len
        if getattr(ctx.model, "evaluator", None) == "state":
            reason = "a recurrent state is carried through every segment start"
            raise ProbeNotApplicable(
                f"boundary: {reason}, so no segment start loses its prefix (with or without "
                "--mem the scores are the same); use --evaluator window for a fresh state per "
                "window",
                reason,
            )
        if self.params.first >= T:
            raise ValueError(
                f"--first {self.params.first} must be below the segment length {T} "
                "(the rest of the segment is the comparison)"
            )
        self.warm = max(1, math.ceil(g.mem_len / T))
        self.length = (self.warm + self.params.segments) * T + 1
        self.nomem_geometry = replace(g, mem_len=0, same_length=False)
        rng = ctx.rng(self.name, T, self.length)
        self.texts = [ctx.texts.sentence_text(rng, self.length) for _ in range(ctx.n)]

    def execute(self, ctx: RunContext) -> Outcome:

        S = self.params.segments
        records, curves = score_batches(
            ctx,
            list(range(len(self.texts))),
            S + 1,  # the text, and one row per scored segment with a boundary before it
            f"{self.name}: scoring texts",
            lambda items: self._score(ctx, items),
        )
        return self.summarize(ctx, records, curves)

    def _score(self, ctx: RunContext, items):
        """Each text with memory, without (mem_len 0), and with a document boundary before each
        scored segment; one (record, curve) per text."""

        T = ctx.geometry.tgt_len
        eod = ctx.eod_id
        seg_starts = [(self.warm + s) * T for s in range(self.params.segments)]
        check = np.arange(1, min(T, CHECK_TOKENS) + 1)
        scored = np.concatenate([k + 1 + np.arange(T) for k in seg_starts])
        rows = Rows()
        layout = []
        for i in items:
            ex = self.texts[i]
            r_main = rows.add(ex.tokens, ex.doc_ids, np.r_[check, scored])
            r_docs = []
            for k in seg_starts:
                tok = ex.tokens[: k + T + 1].copy()
                doc = ex.doc_ids[: k + T + 1].copy()
                tok[k] = eod
                doc[k:] = doc[k - 1] + 1
                r_docs.append(rows.add(tok, doc, k + 1 + np.arange(T), r_main, k))
            layout.append((i, r_main, r_docs))
        tokens, docs, pos, parent, shared = rows.arrays(ctx.pad_id)
        mem = score_rows(ctx.model, tokens, docs, pos, ctx.geometry, parent=parent, shared=shared)
        main = np.array([r for _, r, _ in layout])
        nomem = score_rows(ctx.model, tokens[main], docs[main], pos[main], self.nomem_geometry)
        other = self._other_prefix(ctx, tokens, docs, [r[0] for _, _, r in layout], seg_starts[0])
        out = []
        for j, (i, r_main, r_docs) in enumerate(layout):
            rec, curve = self._record(
                ctx, i, mem.nll, nomem.nll[j], r_main, r_docs, seg_starts, check
            )
            rec.update(self._reset_check(mem.nll[r_docs[0]], other, j, seg_starts[0]))
            out.append((rec, curve))
        return out

    def _other_prefix(self, ctx, tokens, docs, rows, start):
        """Under reset: the first scored segment after its document boundary, scored once more
        with the text before the boundary reversed (same length, same doc ids, other content).
        None under carry, where that segment reads the text before it by design."""

        if not ctx.geometry.reset:
            return None
        T = ctx.geometry.tgt_len
        end = start + T + 1
        tok, doc = tokens[rows, :end].copy(), docs[rows, :end]
        tok[:, :start] = tok[:, start - 1 :: -1]
        pos = np.zeros(tok.shape, dtype=bool)
        pos[:, start + 1 :] = True
        return score_rows(ctx.model, tok, doc, pos, ctx.geometry).nll

    def _reset_check(self, doc_row, other, j, start):
        """|NLL| difference of the segment after the boundary, after the text and after the
        reversed text (the `reset_boundary_equal` check; nothing to check under carry)."""
        if other is None:
            return {"reset_check_max_abs": 0.0, "reset_check_tokens": 0}
        t = start + 1 + np.arange(other.shape[1] - start - 1)
        return {
            "reset_check_max_abs": float(np.abs(other[j, t] - doc_row[t]).max()),
            "reset_check_tokens": len(t),
        }

    def _record(self, ctx, i, nll, nomem_row, r_main, r_docs, seg_starts, check):
        T = ctx.geometry.tgt_len
        k = self.params.first
        offs = np.arange(T)
        per = {"mem": [], "nomem": [], "doc": []}
        for s, start in enumerate(seg_starts):
            t = start + 1 + offs
            per["mem"].append(nll[r_main, t])
            per["nomem"].append(nomem_row[t])
            per["doc"].append(nll[r_docs[s], t])
        curve = {c: np.mean(v, axis=0) for c, v in per.items()}  # (T,) each
        for c, v in curve.items():
            if not np.all(np.isfinite(v)):
                raise RuntimeError(f"{self.name}: the model returned a non-finite NLL ({c})")
        rec: dict[str, Any] = {"text": i, "segments": len(seg_starts)}
        for kind, cond in zip(KINDS, ("nomem", "doc"), strict=True):
            gain = curve[cond] - curve["mem"]
            first, rest = float(gain[:k].mean()), float(gain[k:].mean())
            name = kind.replace("-", "_")
            rec[f"{name}_first"] = first
            rec[f"{name}_rest"] = rest
            rec[f"{name}_first_minus_rest"] = first - rest
        rec["check_max_abs"] = float(np.abs(nll[r_main, check] - nomem_row[check]).max())
        rec["check_tokens"] = len(check)
        for c in ("mem", "nomem", "doc"):
            rec[f"nll_{c}_first"] = float(curve[c][:k].mean())
            rec[f"nll_{c}_rest"] = float(curve[c][k:].mean())
        return rec, curve

    def summarize(self, ctx: RunContext, records: list[dict], curves: list[dict]) -> Outcome:
        T = ctx.geometry.tgt_len
        k = self.params.first
        bins = []
        keys = ("first", "rest", "first_minus_rest")
        labels = {"first": f"0–{k - 1}", "rest": f"{k}–{T - 1}", "first_minus_rest": "first−rest"}
        for kind in KINDS:
            name = kind.replace("-", "_")
            deltas = [np.array([r[f"{name}_{x}"] for r in records]) for x in keys]
            fam = stats.grouped(deltas, ctx.margin)
            for x, st in zip(keys, fam, strict=True):
                bins.append({"kind": kind, "positions": labels[x], "region": x, **st})
        by_position = []
        for o in range(T):
            row: dict[str, Any] = {"position": o}
            for kind, cond in zip(KINDS, ("nomem", "doc"), strict=True):
                d = stats.describe(np.array([c[cond][o] - c["mem"][o] for c in curves]))
                row[kind.replace("-", "_")] = {"mean": d["mean"], "ci95": d["ci95"]}
            for cond in ("mem", "nomem", "doc"):
                row[f"nll_{cond}"] = float(np.mean([c[cond][o] for c in curves]))
            by_position.append(row)

        def d(key):
            return stats.describe(np.array([r[key] for r in records]))

        gain = {x: d(f"nomem_mem_{x}") for x in keys}
        doc = {x: d(f"doc_mem_{x}") for x in keys}
        metrics = {
            "delta_mean": gain["first"]["mean"],
            "delta_ci95": gain["first"]["ci95"],
            "p_value": gain["first"]["p_value"],
            "gain": gain,
            "doc": doc,
            "first_k": k,
            "positions_per_segment": T,
            "segments_per_text": self.params.segments,
            "warm_segments": self.warm,
            "by_position": by_position,
        }
        checks = {
            "first_segment_equal": zero_check(
                "the first segment has no memory under either condition: mem and nomem score its "
                "first tokens the same",
                covered=sum(r["check_tokens"] for r in records),
                worst=max((r["check_max_abs"] for r in records), default=0.0),
                tolerance=tolerance(ctx.model),
                why_empty="no texts",
            ),
            "reset_boundary_equal": zero_check(
                "under reset, the segment after the document boundary scores the same when the "
                "text before the boundary is replaced (reversed): the doc condition reads "
                "nothing of it",
                covered=sum(r["reset_check_tokens"] for r in records),
                worst=max((r["reset_check_max_abs"] for r in records), default=0.0),
                tolerance=tolerance(ctx.model),
                why_empty="--carry: the segment after the boundary reads the text before it"
                if not ctx.geometry.reset
                else "no texts",
            ),
        }
        outcome = Outcome(
            metrics=metrics,
            bins=bins,
            checks=checks,
            metric_docs=METRIC_DOCS,
            higher_is_better={"delta_mean": True, "gain": True, "doc": False},
            n_pairs=len(records),
            arrays={
                f"nll_{c}": np.stack([cv[c] for cv in curves]) if curves else np.zeros((0, T))
                for c in ("mem", "nomem", "doc")
            },
        )
        outcome.verdict = self._verdict(outcome)
        outcome.plots = [self._plot(ctx, by_position)]
        return outcome

    def _verdict(self, outcome: Outcome) -> str:
        m = outcome.metrics
        k = m["first_k"]
        sig = {(b["kind"], b["region"]): b["significant"] for b in outcome.bins}
        g, dc = m["gain"], m["doc"]

        def f(x):
            return "—" if x is None or x.get("mean") is None else f"{x['mean']:+.3f}"

        def ci(x):
            c = x.get("ci95")
            return "" if not c else f" [{c[0]:+.3f}, {c[1]:+.3f}]"

        repaired = sig.get(("nomem-mem", "first")) and g["first"]["mean"] > 0
        concentrated = sig.get(("nomem-mem", "first_minus_rest")) and (
            g["first_minus_rest"]["mean"] > 0
        )
        hurt = sig.get(("nomem-mem", "first")) and g["first"]["mean"] < 0
        word = {(b["kind"], b["region"]): b["verdict"] for b in outcome.bins}
        if hurt:  # the gain's claimed sign is > 0; a significant loss is not repair
            head = "the memory hurts segment starts (no boundary repair)"
        elif repaired and concentrated:
            head = "the memory repairs segment starts (gain concentrated there)"
        elif repaired:
            head = "the memory helps at segment starts, but not more than elsewhere"
        elif word.get(("nomem-mem", "first")) == "negligible":
            head = "boundary repair is negligible (within the margin)"
        else:
            head = "inconclusive — no evidence of boundary repair"
        text = (
            f"{self.name}: {head} — gain in the first {k} positions {f(g['first'])}"
            f"{ci(g['first'])} nats/token, rest {f(g['rest'])}, first−rest "
            f"{f(g['first_minus_rest'])}{ci(g['first_minus_rest'])}; a document boundary "
            f"before the segment costs {f(dc['first'])} at its start"
        )
        return text + note(outcome.checks)

    def _plot(self, ctx: RunContext, by_position: list[dict]):

        g = ctx.geometry
        pts = []
        for row in by_position:
            for kind in KINDS:
                v = row[kind.replace("-", "_")]
                pts.append(
                    {
                        "position": row["position"],
                        "kind": kind,
                        "n": 1,
                        "delta_mean": v["mean"],
                        "ci95": v["ci95"],
                    }
                )
        title = (
            f"{self.name} · {ctx.model.info.id} · mem {g.mem_len} tgt {g.tgt_len} · "
            f"{ctx.texts.sentences} · first {self.params.first} positions = segment start"
        )

        return plots.deferred(
            plots.delta_by_distance,
            "boundary_gain.png",
            pts,
            title=title,
            ylabel="NLL(condition) − NLL(mem) (nats/token, mean over texts)",
            xlabel="position in the segment (0: predicted by the segment's first input)",
            x_key="position",
            series_key="kind",
        )

    @classmethod
    def diagnose_rows(cls, summary: dict) -> list[dict]:
        m = summary["metrics"]
        return [
            cls.effect(
                "boundary repair",
                "gain.first",
                "NLL without memory − with memory in the first positions of a segment, "
                "local-only text",
                m["gain"]["first"],
                detail=f"first {m['first_k']} positions; rest of the segment "
                f"{signed(m['gain']['rest']['mean'])}",
            )
        ]


METRIC_DOCS = {
    "delta_mean": "boundary repair: mean over texts of NLL_nomem − NLL_mem over the first "
    "--first positions of the scored segments, nats/token",
    "delta_ci95": "95% Student-t interval of delta_mean",
    "p_value": "two-sided Wilcoxon signed-rank p of delta_mean over texts",
    "gain": "{first, rest, first_minus_rest}: describe() over texts of NLL_nomem − NLL_mem in the "
    "first positions, in the rest of the segment, and their difference (concentration)",
    "doc": "the same for NLL_doc − NLL_mem: a document boundary right before the segment",
    "by_position": "per position o of the segment: nomem_mem and doc_mem ({mean, ci95} over "
    "texts) and the mean NLL under each condition (nll_mem, nll_nomem, nll_doc)",
    "first_k": "--first: the positions counted as the segment's start",
    "positions_per_segment": "tgt_len: positions per segment (the curve's length)",
    "segments_per_text": "--segments: scored segments per text",
    "warm_segments": "unscored segments before the first scored one (a full memory)",
    "bins[].kind": "nomem-mem (what the memory gives) | doc-mem (what a boundary costs)",
    "bins[].positions": "the positions averaged: the first k, the rest, or first − rest",
    "bins[].p_value": "Wilcoxon p, Holm-adjusted across the three regions of one kind",
}
