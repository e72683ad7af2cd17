"""The paired engine every fact probe runs on: pairs → rows → per-token scores → per-pair deltas.

A `Job` is one synth `Pair` plus what to score: the answer tokens in the base and their aligned
positions in the variant, the sign of the delta, and optionally a second candidate answer (B)
for the answer contrast. Rows per job:

    base            the base text, cut after its last scored token
    variant         forks off `base` where the two texts first differ
    base_alt        (contrast only) the base with the answer tokens replaced by B; forks off `base`
    variant_alt     (contrast only) the variant with the answer replaced by B; forks off `variant`

so the text before an edit is computed once (`LossModel.score_shared` when the model has it).
Rows of several jobs are batched (similar lengths together, padding at the end with doc id −1).

Per pair (the unit of analysis; tokens are never the unit):
    delta            = sign · mean over answer tokens of (NLL_variant − NLL_base)
    correct_*        = every answer token is the argmax (teacher forcing)
    contrast_base    = log p(A) − log p(B) in the base    = Σ NLL(base_alt) − Σ NLL(base)
    contrast_variant = log p(A) − log p(B) in the variant = Σ NLL(variant_alt) − Σ NLL(variant)
    contrast_shift   = contrast_base − contrast_variant (value priors cancel; > 0 ⇔ the fact is read)

The run's own checks (a failure makes `probe run` exit 1):
    identical_prefix   tokens before the first difference score the same in base and variant
                       (8 per pair, 2 with the recompute evaluator; a causality / determinism
                       check of the evaluator)
    beyond_reach_zero  answer tokens whose layered reach does not include the edit have delta 0
                       (length-preserving edits only; checks the reach computation and the model)
within a dtype's tolerance (float32: 1e-4 nats); the fraction of exact zeros is reported too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from probes import stats
from probes.framework.probe import Outcome, Probe, RunContext
from probes.protocol import max_rows, score_rows, tolerance
from probes.reach import REACH_LABELS, classify, doc_starts, label_bin

# Tokens before the first difference compared by `identical_prefix`: free for a streaming model
# (it scores every token anyway), a whole window each for the recompute evaluator.
PREFIX_CHECK_TOKENS = {True: 8, False: 2}


@dataclass
class Job:
    group: int  # index into the probe's groups (bins / grid cells)
    pair: Any  # synth.example.Pair
    base_targets: np.ndarray  # base positions of the scored tokens
    variant_targets: np.ndarray  # the same tokens' positions in the variant
    fact_end: int  # base position of the fact's last token (distances are measured from it)
    sign: int = 1  # delta = sign · (variant − base)
    alt: tuple[int, ...] | None = None  # the other candidate answer (contrast), same length
    info: dict[str, Any] = field(default_factory=dict)  # recorded per pair in samples.jsonl
    base_id: int | None = None  # jobs with one base_id share one base Example (scored once)

    @property
    def distance(self) -> int:
        return int(self.base_targets[0]) - self.fact_end


@dataclass
class Rows:
    tokens: list[np.ndarray] = field(default_factory=list)
    doc_ids: list[np.ndarray] = field(default_factory=list)
    positions: list[np.ndarray] = field(default_factory=list)
    parent: list[int] = field(default_factory=list)
    shared: list[int] = field(default_factory=list)

    def mark(self, row: int, scored) -> None:
        self.positions[row][np.asarray(scored, dtype=np.int64)] = True

    def add(self, tokens, doc_ids, scored, parent=-1, shared=0) -> int:
        pos = np.zeros(len(tokens), dtype=bool)
        pos[np.asarray(scored, dtype=np.int64)] = True
        self.tokens.append(np.asarray(tokens, dtype=np.int64))
        self.doc_ids.append(np.asarray(doc_ids, dtype=np.int64))
        self.positions.append(pos)
        self.parent.append(parent)
        self.shared.append(shared)
        return len(self.tokens) - 1

    def arrays(self, pad_id: int):
        n = max(len(t) for t in self.tokens)
        R = len(self.tokens)
        tokens = np.full((R, n), pad_id, dtype=np.int64)
        docs = np.full((R, n), -1, dtype=np.int64)
        pos = np.zeros((R, n), dtype=bool)
        for r, (t, d, p) in enumerate(zip(self.tokens, self.doc_ids, self.positions, strict=True)):
            tokens[r, : len(t)] = t
            docs[r, : len(d)] = d
            pos[r, : len(p)] = p
        return tokens, docs, pos, np.array(self.parent), np.array(self.shared)


def first_difference(a_tok, a_doc, b_tok, b_doc) -> int:
    n = min(len(a_tok), len(b_tok))
    diff = np.flatnonzero((a_tok[:n] != b_tok[:n]) | (a_doc[:n] != b_doc[:n]))
    return int(diff[0]) if diff.size else n


def _edit_end(pair) -> int | None:
    """Base position of the last edited token when the edit keeps every other token in place
    (length-preserving, identity alignment elsewhere); None otherwise."""
    a = pair.alignment
    if len(pair.base) != len(pair.variant):
        return None
    keep = a >= 0
    if not np.array_equal(a[keep], np.flatnonzero(keep)):
        return None
    edited = np.flatnonzero(~keep)
    diff = np.flatnonzero(
        (pair.base.tokens != pair.variant.tokens) | (pair.base.doc_ids != pair.variant.doc_ids)
    )
    last = max(edited.max() if edited.size else -1, diff.max() if diff.size else -1)
    return int(last) if last >= 0 else None


class PairedProbe(Probe):
    """A probe made of Jobs: subclasses build `self.jobs` and `self.groups` in `plan` and
    may override `group_fields` / `extra_metrics` / `make_plots` / `describe`."""

    delta_doc = "mean over answer tokens of NLL(variant) − NLL(base), nats"
    delta_higher_is_better = True
    plot_series: str | None = None  # a bin field: one line per value in the delta plot
    jobs: list[Job]
    groups: list[dict[str, Any]]  # per group: fields shown in the bin (distance_lo/hi, kind, k, …)

    # ------------------------------------------------------------------ scoring

    def execute(self, ctx: RunContext) -> Outcome:
        pad = ctx.lang.vocab.pad_id
        rows_per_job = 4 if any(j.alt is not None for j in self.jobs) else 2
        per_batch = max(1, max_rows(ctx.model, ctx.geometry) // rows_per_job)

        def key(i: int):
            job = self.jobs[i]
            return (len(job.pair.base), i if job.base_id is None else job.base_id, i)

        order = sorted(range(len(self.jobs)), key=key)
        records: list[dict | None] = [None] * len(self.jobs)
        tokens_out: list[dict] = [{}] * len(self.jobs)
        with ctx.steps(len(self.jobs), f"{self.name}: scoring pairs") as advance:
            for start in range(0, len(order), per_batch):
                idx = order[start : start + per_batch]
                for i, (rec, tok) in zip(idx, self._score_batch(ctx, idx, pad), strict=True):
                    rec = {"pair": i, **rec}
                    records[i] = rec
                    tokens_out[i] = tok
                    ctx.sample(rec)
                advance(len(idx))
        return self.summarize(ctx, records, tokens_out)

    def _score_batch(self, ctx: RunContext, idx: Sequence[int], pad: int):
        rows = Rows()
        layout = []
        n_check = PREFIX_CHECK_TOKENS[hasattr(ctx.model, "score_shared")]
        base_rows: dict[tuple[int, int], int] = {}  # (base_id, length) → row
        for i in idx:
            job = self.jobs[i]
            b, v = job.pair.base, job.pair.variant
            bt, vt = job.base_targets, job.variant_targets
            lb, lv = int(bt.max()) + 1, int(vt.max()) + 1
            shared = first_difference(b.tokens[:lb], b.doc_ids[:lb], v.tokens[:lv], v.doc_ids[:lv])
            check = np.arange(max(1, shared - n_check), min(shared, lb, lv))
            check = check[check < min(bt.min(), vt.min())]
            reuse = base_rows.get((job.base_id, lb)) if job.base_id is not None else None
            if reuse is None:
                r_b = rows.add(b.tokens[:lb], b.doc_ids[:lb], np.r_[check, bt])
                if job.base_id is not None:
                    base_rows[(job.base_id, lb)] = r_b
            else:
                r_b = reuse
                rows.mark(r_b, np.r_[check, bt])
            r_v = rows.add(v.tokens[:lv], v.doc_ids[:lv], np.r_[check, vt], r_b, shared)
            r_ba = r_va = None
            if job.alt is not None:
                alt = np.asarray(job.alt, dtype=np.int64)
                tb = b.tokens[:lb].copy()
                tb[bt] = alt
                tv = v.tokens[:lv].copy()
                tv[vt] = alt
                r_ba = rows.add(tb, b.doc_ids[:lb], bt, r_b, int(bt[0]))
                r_va = rows.add(tv, v.doc_ids[:lv], vt, r_v, int(vt[0]))
            layout.append((job, r_b, r_v, r_ba, r_va, check))
        tokens, docs, pos, parent, shared = rows.arrays(pad)
        scores = score_rows(
            ctx.model, tokens, docs, pos, ctx.geometry, parent=parent, shared=shared
        )
        nll, correct = scores.nll, scores.correct
        out = []
        for job, r_b, r_v, r_ba, r_va, check in layout:
            out.append(self._record(ctx, job, nll, correct, r_b, r_v, r_ba, r_va, check))
        return out

    def _record(self, ctx, job: Job, nll, correct, r_b, r_v, r_ba, r_va, check):
        bt, vt = job.base_targets, job.variant_targets
        nb, nv = nll[r_b, bt], nll[r_v, vt]
        if not (np.all(np.isfinite(nb)) and np.all(np.isfinite(nv))):
            raise RuntimeError(f"{self.name}: the model returned a non-finite NLL on answer tokens")
        delta_tok = job.sign * (nv - nb)
        base = job.pair.base
        starts = doc_starts(base.doc_ids)[bt - 1]
        hz = [ctx.horizon.token(int(t), s) for t, s in zip(bt, starts, strict=True)]
        direct = np.array([h[0] for h in hz])
        reach = np.array([h[1] for h in hz])
        dist = bt - job.fact_end
        labels = [
            classify(int(d), int(w), int(r)) for d, w, r in zip(dist, direct, reach, strict=True)
        ]
        prefix = np.abs(nll[r_v, check] - nll[r_b, check]) if check.size else np.zeros(0)
        edit_end = _edit_end(job.pair)
        if edit_end is not None:
            beyond = (bt - edit_end) > reach
        else:
            beyond = np.zeros(len(bt), dtype=bool)
        rec: dict[str, Any] = {
            "group": job.group,
            "distance": job.distance,
            "delta": float(delta_tok.mean()),
            "nll_base": float(nb.mean()),
            "nll_variant": float(nv.mean()),
            "correct_base": bool(correct[r_b, bt].all()),
            "correct_variant": bool(correct[r_v, vt].all()),
            "reach": labels[0],
            "direct_window": int(direct[0]),
            "layered_reach": int(reach[0]),
            "answer_len": len(bt),
            "prefix_max_abs": float(prefix.max()) if prefix.size else 0.0,
            "beyond_tokens": int(beyond.sum()),
            "beyond_max_abs": float(np.abs(delta_tok[beyond]).max()) if beyond.any() else 0.0,
            "beyond_exact": bool(np.all(delta_tok[beyond] == 0.0)) if beyond.any() else True,
            **job.info,
        }
        tok = {
            "position_base": bt,
            "position_variant": vt,
            "distance": dist,
            "nll_base": nb,
            "nll_variant": nv,
            "direct": direct,
            "reach": reach,
            "labels": labels,
        }
        if r_ba is not None:
            nba, nva = nll[r_ba, bt], nll[r_va, vt]
            rec["contrast_base"] = float(nba.sum() - nb.sum())
            rec["contrast_variant"] = float(nva.sum() - nv.sum())
            rec["correct_variant_alt"] = bool(correct[r_va, vt].all())
            tok["nll_base_alt"] = nba
            tok["nll_variant_alt"] = nva
        return rec, tok

    # ------------------------------------------------------------------ summary

    def group_fields(self, g: int) -> dict[str, Any]:
        return dict(self.groups[g])

    def summarize(self, ctx: RunContext, records: list[dict], toks: list[dict]) -> Outcome:
        n_groups = len(self.groups)
        by_group: dict[int, list[int]] = defaultdict(list)
        for i, r in enumerate(records):
            by_group[r["group"]].append(i)
        deltas = [np.array([records[i]["delta"] for i in by_group[g]]) for g in range(n_groups)]
        group_stats = stats.grouped(deltas)
        has_alt = any("contrast_base" in r for r in records)
        bins = []
        for g in range(n_groups):
            ids = by_group[g]
            b = {**self.group_fields(g), **group_stats[g]}
            b["distance_mean"] = (
                float(np.mean([records[i]["distance"] for i in ids])) if ids else None
            )
            dist = [d for i in ids for d in toks[i]["distance"]]
            dirs = [d for i in ids for d in toks[i]["direct"]]
            rch = [d for i in ids for d in toks[i]["reach"]]
            lab = label_bin(dist, dirs, rch)
            b.update(
                lab
                or {
                    "reach": None,
                    "within_horizon": None,
                    "reach_fraction": None,
                    "direct_window": None,
                    "layered_reach": None,
                }
            )
            acc = stats.accuracy(np.array([records[i]["correct_base"] for i in ids], dtype=bool))
            b.update(acc)
            b["accuracy_variant"] = stats.accuracy(
                np.array([records[i]["correct_variant"] for i in ids], dtype=bool)
            )["accuracy"]
            if has_alt:
                b.update(self._contrast([records[i] for i in ids]))
            bins.append(b)
        metrics = self._metrics(records, has_alt)
        metrics["n_significant_bins"] = sum(1 for b in bins if b["significant"])
        metrics.update(self.extra_metrics(ctx, records, bins))
        checks = self._checks(ctx, records)
        docs = self.metric_docs(has_alt)
        hib = {
            "delta_mean": self.delta_higher_is_better,
            "accuracy": True,
            "accuracy_variant": False,
        }
        if has_alt:
            hib.update({"contrast_base": True, "contrast_variant": False, "contrast_shift": True})
        arrays = self._arrays(records, toks)
        outcome = Outcome(
            metrics=metrics,
            bins=bins,
            checks=checks,
            verdict="",
            metric_docs=docs,
            higher_is_better=hib,
            n_pairs=len(records),
            arrays=arrays,
        )
        outcome.verdict = self.verdict(outcome)
        outcome.plots = self.make_plots(ctx, outcome)
        return outcome

    @staticmethod
    def _contrast(recs: list[dict]) -> dict[str, Any]:
        cb = np.array([r["contrast_base"] for r in recs])
        cv = np.array([r["contrast_variant"] for r in recs])
        acc_alt = stats.accuracy(np.array([r["correct_variant_alt"] for r in recs], dtype=bool))
        return {
            "contrast_base": stats.describe(cb),
            "contrast_variant": stats.describe(cv),
            "contrast_shift": stats.describe(cb - cv),
            "accuracy_variant_alt": acc_alt["accuracy"],
        }

    def _metrics(self, records: list[dict], has_alt: bool) -> dict[str, Any]:
        d = stats.describe(np.array([r["delta"] for r in records]))
        acc = stats.accuracy(np.array([r["correct_base"] for r in records], dtype=bool))
        m: dict[str, Any] = {
            "delta_mean": d["mean"],
            "delta_ci95": d["ci95"],
            "p_value": d["p_value"],
            "accuracy": acc["accuracy"],
            "accuracy_ci95": acc["accuracy_ci95"],
            "accuracy_variant": stats.accuracy(
                np.array([r["correct_variant"] for r in records], dtype=bool)
            )["accuracy"],
        }
        if has_alt:
            m.update(self._contrast(records))
        by_reach = {}
        for label in REACH_LABELS:
            sel = [r for r in records if r["reach"] == label]
            if not sel:
                continue
            dd = stats.describe(np.array([r["delta"] for r in sel]))
            a = stats.accuracy(np.array([r["correct_base"] for r in sel], dtype=bool))
            by_reach[label] = {
                "n": dd["n"],
                "delta_mean": dd["mean"],
                "ci95": dd["ci95"],
                "p_value": dd["p_value"],
                "accuracy": a["accuracy"],
            }
        m["by_reach"] = by_reach
        return m

    def _checks(self, ctx: RunContext, records: list[dict]) -> dict[str, dict]:
        tol = tolerance(ctx.model)
        prefix = max((r["prefix_max_abs"] for r in records), default=0.0)
        n_beyond = sum(r["beyond_tokens"] for r in records)
        beyond = max((r["beyond_max_abs"] for r in records), default=0.0)
        exact = [r["beyond_exact"] for r in records if r["beyond_tokens"]]
        return {
            "identical_prefix": {
                "passed": bool(prefix <= tol),
                "max_abs_delta": prefix,
                "tolerance": tol,
                "doc": "tokens before the first difference score the same in base and variant",
            },
            "beyond_reach_zero": {
                "passed": bool(beyond <= tol),
                "n_tokens": n_beyond,
                "max_abs_delta": beyond,
                "exact_zero_pairs": sum(exact),
                "pairs": len(exact),
                "tolerance": tol,
                "doc": "answer tokens whose layered reach excludes the edit have delta 0",
            },
        }

    def _arrays(self, records: list[dict], toks: list[dict]) -> dict[str, np.ndarray]:
        keys = ["position_base", "position_variant", "distance", "nll_base", "nll_variant"]
        keys += ["direct", "reach"]
        if any("nll_base_alt" in t for t in toks):
            keys += ["nll_base_alt", "nll_variant_alt"]
        out: dict[str, np.ndarray] = {}
        counts = np.array([len(t["position_base"]) for t in toks], dtype=np.int64)
        out["pair"] = np.repeat(np.arange(len(toks), dtype=np.int64), counts)
        out["group"] = np.repeat(np.array([r["group"] for r in records], dtype=np.int64), counts)
        for k in keys:
            parts = [
                np.asarray(t.get(k, np.full(c, np.nan))) for t, c in zip(toks, counts, strict=True)
            ]
            out[k] = np.concatenate(parts) if parts else np.zeros(0)
        out["reach_label"] = np.concatenate(
            [[REACH_LABELS.index(x) for x in t["labels"]] for t in toks]
        ).astype(np.int8)
        return out

    # ------------------------------------------------------------------ hooks

    def extra_metrics(self, ctx: RunContext, records: list[dict], bins: list[dict]) -> dict:
        return {}

    def metric_docs(self, has_alt: bool) -> dict[str, str]:
        docs = {
            "delta_mean": f"mean over pairs of the pair delta ({self.delta_doc})",
            "delta_ci95": "95% Student-t interval of delta_mean",
            "p_value": "two-sided Wilcoxon signed-rank p over all pairs (bins: Holm-adjusted)",
            "accuracy": "fraction of pairs whose every answer token is the argmax in the base",
            "accuracy_ci95": "Wilson 95% interval of accuracy",
            "accuracy_variant": "the same in the variant (the base's answer tokens)",
            "by_reach": "delta and accuracy of the pairs whose first answer token is direct / "
            "layered / beyond",
            "n_significant_bins": "bins called significant by the verdict rule: "
            + stats.VERDICT_RULE,
            "bins[].mdd80": "minimum detectable mean delta of the bin (80% power, Holm worst case)",
            "bins[].reach": "direct | layered | beyond: where most of the bin's answer tokens see "
            "the fact (probes.reach)",
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

    def verdict(self, outcome: Outcome) -> str:
        parts = []
        for label in REACH_LABELS:
            sel = [b for b in outcome.bins if b.get("reach") == label and b["n"]]
            if not sel:
                continue
            sig = sum(1 for b in sel if b["significant"])
            n = sum(b["n"] for b in sel)
            mean = sum(b["delta_mean"] * b["n"] for b in sel) / n
            parts.append(f"{label} Δ={mean:+.3f} ({sig}/{len(sel)} bins significant)")
        any_sig = any(b["significant"] for b in outcome.bins)
        head = (
            f"{self.name}: {self.effect_phrase(True)}"
            if any_sig
            else f"{self.name}: {self.effect_phrase(False)}"
        )
        failed = [k for k, c in outcome.checks.items() if not c.get("passed", True)]
        tail = f" — CHECK FAILED: {', '.join(failed)}" if failed else ""
        return f"{head} — {'; '.join(parts)}{tail}"

    def effect_phrase(self, found: bool) -> str:
        return "the model uses the fact" if found else "no evidence the model uses the fact"

    def make_plots(self, ctx: RunContext, outcome: Outcome) -> list:
        from probes.report import plots

        hz = ctx.horizon
        (dmin, dmax), (rmin, rmax) = hz.ranges()
        direct = {"min": dmin, "max": dmax, "mean": (dmin + dmax) / 2}
        reach = {"min": rmin, "max": rmax, "mean": (rmin + rmax) / 2}
        g = ctx.geometry
        title = (
            f"{self.name} · {ctx.model.info.id} · mem {g.mem_len} tgt {g.tgt_len} "
            f"clamp {g.clamp_len} {'same_length ' if g.same_length else ''}{g.policy}"
        )

        def draw(run_dir) -> str:
            plots.delta_by_distance(
                run_dir / "delta_by_distance.png",
                outcome.bins,
                title=title,
                direct=direct,
                reach=reach,
                series_key=self.plot_series,
            )
            return "delta_by_distance.png"

        return [draw]
