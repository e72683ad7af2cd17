"""The paired engine every `PairedProbe` (probes.api.paired) runs on: pairs → rows → per-token
scores → per-pair deltas → bins, metrics, checks and plots.

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

The run's own checks (`probes.engine.aggregate.paired_checks`; a failure makes `probe run` exit 1):
    identical_prefix   tokens before the first difference score the same in base and variant
                       (8 per pair, 2 with the recompute evaluator; a causality / determinism
                       check of the evaluator). The variant is declared to share with its base
                       only the text before these tokens, so a model that forks rows
                       (`score_shared`) computes them in both rather than copying the base's
    beyond_reach_zero  answer tokens whose layered reach does not include the edit have delta 0
                       (length-preserving edits only; checks the reach computation and the model)
within a dtype's tolerance (float32: 1e-4 nats); the fraction of exact zeros is reported too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from probes.api.horizon import UNBOUNDED, doc_starts
from probes.api.model import score_rows, tolerance
from probes.api.paired import Job, PairedProbe
from probes.api.probe_base import Outcome, RunContext
from probes.api.rows import Rows, first_difference, score_batches
from probes.engine import aggregate
from probes.report import plots

# Tokens before the first difference compared by `identical_prefix`: free for a streaming model
# (it scores every token anyway), a whole window each for the recompute evaluator.
PREFIX_CHECK_TOKENS = {True: 8, False: 2}


@dataclass(frozen=True)
class JobRows:
    """Where one job's texts sit in a scoring call, and its prefix-check positions."""

    base: int
    variant: int
    base_alt: int | None
    variant_alt: int | None
    check: np.ndarray  # positions before the first difference, scored in base and variant
    # `--token-view`: base positions scored for `probe show` and their variant positions
    view_base: np.ndarray | None = None
    view_variant: np.ndarray | None = None


def text_arrays(jobs: Sequence[Job]) -> dict[str, np.ndarray]:
    """texts.npz: what every pair was scored on, so a number can be checked without the tool.
    Pair k's base row is `base_tokens[base_offsets[k]:base_offsets[k + 1]]` (model token ids,
    from the row start to its last scored token; `base_doc_ids` the same slice: the document
    each token belongs to, which --reset masks by), the variant likewise; tokens.npz's
    `position_base` / `position_variant` index into these rows. Pair k is tokens.npz's and
    samples.jsonl's `pair` k. With a contrast answer, pair k's contrast rows are its base and
    variant rows with the answer tokens replaced by `alt_tokens[alt_offsets[k]:alt_offsets[k +
    1]]` (empty: no contrast)."""
    out: dict[str, np.ndarray] = {}
    if any(job.alt is not None for job in jobs):
        alts = [np.asarray(job.alt or (), dtype=np.int32) for job in jobs]
        out["alt_offsets"] = np.r_[0, np.cumsum([len(a) for a in alts])].astype(np.int64)
        out["alt_tokens"] = np.concatenate(alts).astype(np.int32)
    for side in ("base", "variant"):
        rows = []
        for job in jobs:
            example, n = getattr(job.pair, side), job.row_length(side)
            rows.append((example.tokens[:n], example.doc_ids[:n]))
        lengths = np.array([len(t) for t, _ in rows], dtype=np.int64)
        out[f"{side}_offsets"] = np.r_[0, np.cumsum(lengths)].astype(np.int64)
        out[f"{side}_tokens"] = np.concatenate([t for t, _ in rows]).astype(np.int32)
        out[f"{side}_doc_ids"] = np.concatenate([d for _, d in rows]).astype(np.int32)
    return out


def stored_row(texts, side: str, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Pair k's `side` ("base" or "variant") row from a run's texts.npz (`text_arrays`): its
    token ids and document ids."""
    a, b = texts[f"{side}_offsets"][k : k + 2]
    return texts[f"{side}_tokens"][a:b].astype(np.int64), texts[f"{side}_doc_ids"][a:b]


def view_positions(job: Job, fork: int, first: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """`--token-view n`: the base positions scored for `probe show` — from the first checked
    token through the n after the first difference (`first`), and the n before the answer
    through its last token — whose token the variant keeps (the pair's alignment), and their
    variant positions. Empty for n = 0."""
    if n <= 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    bt, lv = job.base_targets, job.row_length("variant")
    lb = job.row_length("base")
    near_edit = np.arange(max(1, fork), min(first + n + 1, lb))
    near_answer = np.arange(max(1, int(bt.min()) - n), int(bt.max()) + 1)
    base = np.union1d(near_edit, near_answer).astype(np.int64)
    aligned = np.asarray(job.pair.alignment, dtype=np.int64)  # variant → base, −1: edited
    to_variant = np.full(len(job.pair.base), -1, dtype=np.int64)
    kept = np.flatnonzero(aligned >= 0)
    to_variant[aligned[kept]] = kept
    variant = to_variant[base]
    keep = (variant >= 0) & (variant < lv)
    return base[keep], variant[keep]


def view_arrays(toks: list[dict]) -> dict[str, np.ndarray]:
    """tokens.npz's `view_*` arrays (`--token-view`): per pair the base and variant positions
    scored for `probe show` and their NLLs, flat, with `view_pair`; {} without a view."""
    views = [t.get("view") for t in toks]
    if not any(v is not None for v in views):
        return {}
    out = {"view_pair": np.repeat(
        np.arange(len(views), dtype=np.int64),
        [0 if v is None else len(v["view_position_base"]) for v in views],
    )}  # fmt: skip
    for key in ("view_position_base", "view_position_variant", "view_nll_base", "view_nll_variant"):
        parts = [np.asarray(v[key]) for v in views if v is not None]
        out[key] = np.concatenate(parts)
    return out


def edit_end(pair) -> int | None:
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


def execute(probe: PairedProbe, ctx: RunContext) -> Outcome:
    """Score `probe.jobs` and summarize them: `PairedProbe.execute`."""
    return summarize(probe, ctx, *score_jobs(probe, ctx))


def score_jobs(probe: PairedProbe, ctx: RunContext) -> tuple[list[dict], list[dict]]:
    """Every job's record and per-token arrays, in job order, a scoring call at a time
    (`score_batches`)."""
    rows_per_job = 4 if any(j.alt is not None for j in probe.jobs) else 2

    def key(i: int):
        job = probe.jobs[i]
        return (len(job.pair.base), i if job.base_id is None else job.base_id, i)

    order = sorted(range(len(probe.jobs)), key=key)
    return score_batches(
        ctx,
        order,
        rows_per_job,
        f"{probe.name}: scoring pairs",
        lambda items: score_batch(probe, ctx, items, ctx.pad_id),
        work=lambda i: len(probe.jobs[i].pair.base) + len(probe.jobs[i].pair.variant),
        together=lambda i: ("job", i) if probe.jobs[i].base_id is None else probe.jobs[i].base_id,
    )


def score_batch(probe: PairedProbe, ctx: RunContext, idx: Sequence[int], pad: int):
    """One scoring call: the rows of jobs `idx` (module docstring), scored; their records."""
    rows = Rows()
    layout: list[tuple[int, JobRows]] = []
    n_check = PREFIX_CHECK_TOKENS[hasattr(ctx.model, "score_shared")]
    base_rows: dict[tuple[int, int], int] = {}  # (base_id, length) → row
    for i in idx:
        job = probe.jobs[i]
        b, v = job.pair.base, job.pair.variant
        bt, vt = job.base_targets, job.variant_targets
        tail = job.check_targets if job.check_targets is not None else bt[:0]
        lb, lv = job.row_length("base"), job.row_length("variant")
        shared = first_difference(b.tokens[:lb], b.doc_ids[:lb], v.tokens[:lv], v.doc_ids[:lv])
        check = np.arange(max(1, shared - n_check), min(shared, lb, lv))
        check = check[check < min(bt.min(), vt.min())]
        # the variant shares only what comes before the checked tokens: a fork may take its
        # parent's scores for the prefix it shares, and a copy checks nothing
        fork = int(check[0]) if check.size else shared
        pb, pv = view_positions(job, fork, shared, ctx.token_view)
        reuse = base_rows.get((job.base_id, lb)) if job.base_id is not None else None
        if reuse is None:
            r_b = rows.add(b.tokens[:lb], b.doc_ids[:lb], np.r_[check, bt, tail, pb])
            if job.base_id is not None:
                base_rows[(job.base_id, lb)] = r_b
        else:
            r_b = reuse
            rows.mark(r_b, np.r_[check, bt, tail, pb])
        r_v = rows.add(v.tokens[:lv], v.doc_ids[:lv], np.r_[check, vt, tail, pv], r_b, fork)
        r_ba = r_va = None
        if job.alt is not None:
            alt = np.asarray(job.alt, dtype=np.int64)
            tb = b.tokens[:lb].copy()
            tb[bt] = alt
            tv = v.tokens[:lv].copy()
            tv[vt] = alt
            r_ba = rows.add(tb, b.doc_ids[:lb], bt, r_b, int(bt[0]))
            r_va = rows.add(tv, v.doc_ids[:lv], vt, r_v, int(vt[0]))
        view = (pb, pv) if ctx.token_view else (None, None)
        layout.append((i, JobRows(r_b, r_v, r_ba, r_va, check, *view)))
    tokens, docs, pos, parent, shared = rows.arrays(pad)
    scores = score_rows(ctx.model, tokens, docs, pos, ctx.geometry, parent=parent, shared=shared)
    out = []
    for i, where in layout:
        rec, tok = record(probe, ctx, probe.jobs[i], scores, where)
        out.append(({"pair": i, **rec}, tok))
    return out


def record(probe: PairedProbe, ctx, job: Job, scores, where: JobRows):
    """One pair's record (samples.jsonl) and per-token arrays, from its rows' scores."""
    nll, correct = scores.nll, scores.correct
    bt, vt = job.base_targets, job.variant_targets
    nb, nv = nll[where.base, bt], nll[where.variant, vt]
    if not (np.all(np.isfinite(nb)) and np.all(np.isfinite(nv))):
        raise RuntimeError(f"{probe.name}: the model returned a non-finite NLL on answer tokens")
    delta_tok = job.sign * (nv - nb)
    hz, starts_of = ctx.horizon, doc_starts(job.pair.base.doc_ids)
    starts = starts_of[bt - 1]
    tok = [hz.token(int(t), s) for t, s in zip(bt, starts, strict=True)]
    direct = np.array([h[0] for h in tok])
    reach = np.array([h[1] for h in tok])
    dist = bt - job.fact_end
    labels = [hz.label(int(t), job.fact_end, s) for t, s in zip(bt, starts, strict=True)]
    check = where.check
    prefix = np.abs(nll[where.variant, check] - nll[where.base, check]) if check.size else None
    end = edit_end(job.pair)
    b, v = job.pair.base, job.pair.variant
    first = first_difference(b.tokens, b.doc_ids, v.tokens, v.doc_ids)

    def unseen(targets: np.ndarray) -> np.ndarray:
        """Which targets the edit (its last token, or a sink among its tokens) cannot reach."""
        if end is None:
            return np.zeros(len(targets), dtype=bool)
        return np.array(
            [
                not hz.within_reach(int(t), end, s)
                and not (hz.sinks and any(hz.is_sink(p, s) for p in range(first, end + 1)))
                for t, s in zip(targets, starts_of[targets - 1], strict=True)
            ],
            dtype=bool,
        )

    beyond_delta = delta_tok[unseen(bt)]
    if job.check_targets is not None and end is not None:
        ct = job.check_targets
        far = ct[unseen(ct)]
        beyond_delta = np.r_[beyond_delta, nll[where.variant, far] - nll[where.base, far]]
    rec: dict[str, Any] = {
        "group": job.group,
        "distance": job.distance,
        "delta": float(delta_tok.mean()),
        "nll_base": float(nb.mean()),
        "nll_variant": float(nv.mean()),
        "correct_base": bool(correct[where.base, bt].all()),
        "correct_variant": bool(correct[where.variant, vt].all()),
        # a probability: a planted model's NLL may go below 0, which no distribution gives
        "p_answer_base": float(np.exp(-max(float(nb.sum()), 0.0))),
        "p_answer_variant": float(np.exp(-max(float(nv.sum()), 0.0))),
        "reach": labels[0],
        "direct_window": int(direct[0]),
        "layered_reach": int(reach[0]),
        "answer_len": len(bt),
        "prefix_max_abs": float(prefix.max()) if prefix is not None else 0.0,
        "prefix_tokens": int(check.size),
        "beyond_tokens": int(beyond_delta.size),
        "beyond_max_abs": float(np.abs(beyond_delta).max(initial=0.0)),
        "beyond_exact": bool(np.all(beyond_delta == 0.0)),
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
        "labels": np.array(labels),
    }
    if where.view_base is not None:
        tok["view"] = {
            "view_position_base": where.view_base,
            "view_position_variant": where.view_variant,
            "view_nll_base": nll[where.base, where.view_base],
            "view_nll_variant": nll[where.variant, where.view_variant],
        }
    if where.base_alt is not None:
        nba, nva = nll[where.base_alt, bt], nll[where.variant_alt, vt]
        rec["contrast_base"] = float(nba.sum() - nb.sum())
        rec["contrast_variant"] = float(nva.sum() - nv.sum())
        rec["correct_variant_alt"] = bool(correct[where.variant_alt, vt].all())
        tok["nll_base_alt"] = nba
        tok["nll_variant_alt"] = nva
    rec.update(probe.record_fields(rec))
    return rec, tok


def summarize(
    probe: PairedProbe, ctx: RunContext, records: list[dict], toks: list[dict]
) -> Outcome:
    """The run's Outcome from its records: bins, metrics, checks, arrays, verdict and plots,
    through the probe's hooks."""
    bins = aggregate.paired_bins(probe.groups, records, toks, ctx.margin)
    for g, b in enumerate(bins):
        b.update(probe.bin_fields([r for r in records if r["group"] == g]))
    has_alt = any("contrast_base" in r for r in records)
    primary = [r for r in records if probe.primary(probe.groups[r["group"]])]
    metrics = aggregate.paired_metrics(records, primary, has_alt)
    metrics["n_significant_bins"] = sum(1 for b in bins if b["significant"])
    metrics.update(probe.extra_metrics(ctx, records, bins))
    hib = {
        "delta_mean": probe.delta_higher_is_better,
        "accuracy": True,
        "accuracy_variant": False,
        "answer_prob": True,
        "answer_prob_variant": False,
    }
    if has_alt:
        hib.update({"contrast_base": True, "contrast_variant": False, "contrast_shift": True})
    outcome = Outcome(
        metrics=metrics,
        bins=bins,
        checks=aggregate.paired_checks(records, tolerance(ctx.model)),
        metric_docs=probe.metric_docs(has_alt),
        higher_is_better=hib,
        n_pairs=len(records),
        arrays={**aggregate.token_arrays(records, toks), **view_arrays(toks)},
        texts=text_arrays(probe.jobs),
    )
    outcome.verdict = probe.verdict(outcome)
    outcome.plots = probe.make_plots(ctx, outcome)
    return outcome


def delta_plots(probe: PairedProbe, ctx: RunContext, outcome: Outcome) -> list:
    """`PairedProbe.make_plots`'s default: Δ by distance, the horizon marked."""
    hz = ctx.horizon
    (dmin, dmax), (rmin, rmax) = hz.ranges()
    direct = {"min": dmin, "max": dmax, "mean": (dmin + dmax) / 2}
    reach = {"min": rmin, "max": rmax, "mean": (rmin + rmax) / 2}
    if hz.unbounded:  # nothing to mark: the whole row is read (probes.api.horizon.UNBOUNDED)
        reach = None
        direct = direct if dmax < UNBOUNDED and not hz.state else None
    g = ctx.geometry
    title = (
        f"{probe.name} · {ctx.model.info.id} · mem {g.mem_len} tgt {g.tgt_len} "
        f"clamp {g.clamp_len} {'same_length ' if g.same_length else ''}{g.policy}"
    )

    return [
        plots.deferred(
            plots.delta_by_distance,
            "delta_by_distance.png",
            outcome.bins,
            title=title,
            direct=direct,
            reach=reach,
            series_key=probe.plot_series,
        )
    ]
