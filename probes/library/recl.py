"""recl: Relative Effective Context Length (Transformer-XL, Dai et al. 2019, Appendix C).

A model group (`--model` repeated; by default the shipped model and its no-recurrence sibling
`-mem0`), fixed target tokens (probes.engine.sweep texts: the last `--window` tokens of long documents
with facts spread over the distances), and truncated contexts c = start, start + Δ, …, max:

    l_i(c, t)   loss of model i at target t with exactly c tokens of context (recompute, window c)
    b(c, t)     = min_i l_i(c, t)                         the group's best
    T(c)        = the ⌈r · N⌉ targets with the largest b(c, t), chosen anew for each c (ties: in
                  target order); r ∈ {0.1, 0.5, 1.0} by default
    f_i(c, c′)  = mean over T(c) of min(b(c, t), l_i(c′, t))
    g_i(c)      = (e^{f_i(c, c)} − e^{f_i(c, c′)}) / e^{f_i(c, c)},   c′ = c + Δ
    RECL_i(r)   = the first c of the sweep with g_i(c) < threshold (0.01)

so f_i(c, c) is the group's best loss on the hard targets and g_i(c) the relative perplexity gain
model i gets from Δ more tokens of context, credited only up to what the group already achieves
at c. The paper states neither Δ nor the starting c; here they are parameters, recorded in the
result: by default Δ = the eval tgt_len and start = Δ, up to the eval attention length mem_len +
tgt_len (`--delta`, `--start`, `--max-context`). When no c qualifies, RECL is reported as the
last c tested with `censored: true` (the true value is larger). Each RECL has a 95 % percentile
interval from 1,000 bootstrap resamples of the texts (seeded by --seed; the paper gives none; why
percentile and how to read it: probes.engine.bootstrap).

Metrics: `recl` (model → r → {recl, ci95, censored}), `delta`, `start`, `contexts`, `gains`
(model → r → [g_i(c) for each c but the last]), `models` (id, path, sha256 of each member), and
the mean loss of each model at each c (`loss`). Bins: one per (model, r). Plot: `recl_gain.png`,
g_i(c) for r = the smallest of the set, with the 1 % threshold.

Through the tokenizer bridge (a group reading one tokenizer of its own) the texts are synth
texts mapped to its tokens, as context-sweep's are (`BridgedTexts.mapped_sweep_text`): contexts
and Δ are model tokens.

Default n = 8 texts, each with about 22 targets (its answer tokens and `--ordinary` 16 filler
tokens, evenly spaced over its last `--window` tokens): RECL needs every model at every c for
every target (one window of c tokens each), the costliest probe — about 2 minutes for the
default-shaped group at --mem 640 on 2 CPU cores; the bootstrap interval says how far
these ~180 targets pin the value. --quick: 4 texts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from probes.api.declarations import Column, effect_row
from probes.api.params import param
from probes.api.probe_base import Outcome, Probe, ProbeNotApplicable, RunContext
from probes.api.registry import probe
from probes.engine import bootstrap
from probes.engine.sweep import make_texts, require_window, truncated
from probes.report import plots
from probes.report.plots import line_plot


def check_rs(text: str) -> None:
    parse_rs(text)


def parse_rs(text: str) -> list[float]:
    try:
        rs = [float(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"{text!r} is not a list of fractions; e.g. 0.1,0.5,1.0") from None
    if not rs or any(not 0.0 < r <= 1.0 for r in rs):
        raise ValueError(f"fractions {text!r} must lie in (0, 1], e.g. 0.1,0.5,1.0")
    return rs


def gains(losses: np.ndarray, r: float) -> np.ndarray:
    """g[i, j] = g_i(c_j) with c′ = c_{j+1}. losses: (models, C, N) loss of model i at context
    c_j for target t. Returns (models, C − 1)."""
    m, C, N = losses.shape
    b = losses.min(axis=0)  # (C, N)
    k = max(1, math.ceil(r * N - 1e-9))
    out = np.zeros((m, C - 1))
    for j in range(C - 1):
        top = np.argsort(-b[j], kind="stable")[:k]  # the hardest targets under b(c_j, ·)
        f_cc = b[j, top].mean()  # = mean min(b, l_i(c, ·)) since b ≤ l_i
        for i in range(m):
            f_cn = np.minimum(b[j, top], losses[i, j + 1, top]).mean()
            out[i, j] = (math.exp(f_cc) - math.exp(f_cn)) / math.exp(f_cc)
    return out


def recl_values(
    losses: np.ndarray, contexts: list[int], r: float, threshold: float = 0.01
) -> list[tuple[int, bool]]:
    """Per model: (RECL, censored) — the first c with gain below the threshold; else the last c
    of the sweep with censored = True (the gain into it was still above: RECL is larger)."""
    g = gains(losses, r)
    out = []
    for i in range(losses.shape[0]):
        below = np.flatnonzero(g[i] < threshold)
        out.append((int(contexts[below[0]]), False) if below.size else (int(contexts[-1]), True))
    return out


@probe("recl", version=2, diagnose=70)
class RECL(Probe):
    """Relative effective context length of a model group (paper's Appendix C)."""

    @dataclass(frozen=True)
    class Params:
        r: str = param("0.1,0.5,1.0", help="fractions r of the hardest targets", check=check_rs)
        delta: int = param(0, help="Δ, the context step (0: the eval tgt_len)", min=0)
        start: int = param(0, help="the first c (0: Δ)", min=0)
        max_context: int = param(0, help="the last c (0: the eval mem_len + tgt_len)", min=0)
        threshold: float = param(0.01, help="gain below which c is the RECL", min=0.0, max=1.0)
        window: int = param(
            64, help="the last tokens of a text: its queries and ordinary targets", min=16, max=4096
        )
        facts: int = param(4, help="queries per text", min=1)
        ordinary: int = param(
            16, help="ordinary (filler) tokens scored per text, evenly spaced (0: all)", min=0
        )

    default_n = 8
    quick_n = 4
    columns = (
        Column("model", "model", identifies=True),
        Column("r", "r", "g", identifies=True),
        Column("n", "n"),
        Column("RECL", "recl", "lower-bound"),
        Column("RECL 95% CI", "recl_ci95", "span"),
    )
    model_group = True
    smoke: ClassVar[dict] = {"synth": {}, "bridged": {"tgt_len": 32}}

    def plan(self, ctx: RunContext) -> None:

        require_window(ctx.group or [ctx.model], self.name)
        p = self.params
        g = ctx.geometry
        self.delta = p.delta or g.tgt_len
        self.start = p.start or self.delta
        top = p.max_context or (g.mem_len + g.tgt_len)
        if top < self.start + self.delta:
            reason = (
                f"the sweep needs at least two contexts: start {self.start} + Δ {self.delta} > "
                f"max {top}"
                + ("" if p.max_context else f" (mem_len {g.mem_len} + tgt_len {g.tgt_len})")
            )
            raise ProbeNotApplicable(
                f"recl: {reason}; lower --delta/--start or raise --max-context", reason
            )
        n_steps = (top - self.start) // self.delta
        self.contexts = [self.start + k * self.delta for k in range(n_steps + 1)]
        self.rs = parse_rs(p.r)
        rng = ctx.rng(self.name, self.contexts[-1], p.window, p.facts)
        self.texts = make_texts(ctx, rng, ctx.n, self.contexts[-1], p.window, p.facts, p.ordinary)
        self.models = ctx.group or [ctx.model]

    def execute(self, ctx: RunContext) -> Outcome:
        from dataclasses import replace

        C, M = len(self.contexts), len(self.models)
        scored = [t.scored for t in self.texts]
        N = sum(len(s) for s in scored)
        losses = np.zeros((M, C, N))
        with ctx.steps(M * C, f"{self.name}: models × contexts") as advance:
            for i, model in enumerate(self.models):
                geometry = ctx.geometry
                if i > 0:  # another model of the group: its own clamp_len (truncation has no mem)
                    geometry = replace(model.default_geometry(), reset=ctx.geometry.reset)
                for j, c in enumerate(self.contexts):
                    nll, _ = truncated(model, self.texts, c, geometry)
                    losses[i, j] = np.concatenate([nll[k, s] for k, s in enumerate(scored)])
                    advance(1)
                ctx.sample(
                    {
                        "model": model.info.id,
                        "contexts": self.contexts,
                        "mean_loss": losses[i].mean(axis=1).tolist(),
                    }
                )
        if not np.all(np.isfinite(losses)):
            raise RuntimeError(f"{self.name}: the model returned a non-finite NLL")
        return self.summarize(ctx, losses, scored)

    def summarize(self, ctx: RunContext, losses: np.ndarray, scored) -> Outcome:
        ids = [m.info.id for m in self.models]
        text_of = np.concatenate([np.full(len(s), k) for k, s in enumerate(scored)])
        rng = ctx.rng(self.name, "bootstrap")
        th = self.params.threshold
        recl: dict[str, dict[str, Any]] = {mid: {} for mid in ids}
        gain_curves: dict[str, dict[str, list[float]]] = {mid: {} for mid in ids}
        bins = []
        n_texts = len(self.texts)
        # one set of text resamples for every r and model, expanded to the texts' targets
        boots = [
            np.concatenate([np.flatnonzero(text_of == k) for k in pick])
            for pick in bootstrap.resamples(n_texts, rng)
        ]
        for r in self.rs:
            key = f"{r:g}"
            point = recl_values(losses, self.contexts, r, th)
            g = gains(losses, r)
            draws = np.array(
                [
                    [v for v, _ in recl_values(losses[:, :, idx], self.contexts, r, th)]
                    for idx in boots
                ]
            ).reshape(len(boots), len(ids))
            for i, mid in enumerate(ids):
                ci = bootstrap.percentile_interval(draws[:, i])
                recl[mid][key] = {"recl": point[i][0], "ci95": ci, "censored": point[i][1]}
                gain_curves[mid][key] = g[i].tolist()
                bins.append(
                    {
                        "model": mid,
                        "r": r,
                        "recl": point[i][0],
                        "recl_ci95": ci,
                        "censored": point[i][1],
                        "n": n_texts,
                    }
                )
        metrics = {
            "recl": recl,
            "delta": self.delta,
            "start": self.start,
            "contexts": self.contexts,
            "threshold": th,
            "rs": self.rs,
            "gains": gain_curves,
            "loss": {mid: losses[i].mean(axis=1).tolist() for i, mid in enumerate(ids)},
            "models": [
                {"id": m.info.id, "path": m.info.path, "sha256": m.info.sha256} for m in self.models
            ],
            "n_targets": int(losses.shape[2]),
        }
        outcome = Outcome(
            metrics=metrics,
            bins=bins,
            metric_docs=METRIC_DOCS,
            higher_is_better={"recl": True},
            n_pairs=n_texts,
            arrays={"contexts": np.array(self.contexts), "losses": losses, "text": text_of},
        )
        r0 = f"{min(self.rs):g}"
        parts = []
        for mid in ids:
            v = recl[mid][r0]
            ci = v["ci95"]
            parts.append(
                f"{mid} {'≥' if v['censored'] else ''}{v['recl']}"
                + (f" [{ci[0]}, {ci[1]}]" if ci else "")
            )
        group = "one model (no group: RECL relative to itself)" if len(ids) == 1 else "the group"
        outcome.verdict = (
            f"{self.name}: RECL at r={r0} (Δ={self.delta}, start c={self.start}, over {group}): "
            + "; ".join(parts)
        )
        outcome.plots = [self._plot(ctx, gain_curves, r0)]
        return outcome

    def _plot(self, ctx, gain_curves, r0: str):

        xs = self.contexts[:-1]
        series = {
            f"{mid} (r={r0})": {"x": xs, "y": curves[r0]} for mid, curves in gain_curves.items()
        }
        th = self.params.threshold
        title = f"{self.name} · Δ={self.delta} · start {self.start} · threshold {th:g}"

        return plots.deferred(
            line_plot,
            "recl_gain.png",
            series,
            title=title,
            xlabel="context c (tokens); gain from c to c + Δ",
            ylabel="relative gain g_i(c)",
            hline=self.params.threshold,
        )

    @classmethod
    def diagnose_rows(cls, summary: dict) -> list[dict]:
        m = summary["metrics"]
        model_id = summary["model"]["id"]
        r0 = f"{min(m['rs']):g}"
        v = m["recl"][model_id][r0]
        others = ", ".join(
            f"{mid} {'≥' if x[r0]['censored'] else ''}{x[r0]['recl']}"
            for mid, x in m["recl"].items()
            if mid != model_id
        )
        return [
            effect_row(
                f"RECL (r = {r0})",
                cls.name,
                f"recl.{model_id}.{r0}",
                "tokens",
                "relative effective context length over the model group (paper's Appendix C)",
                value=v["recl"],
                ci95=v["ci95"],
                n=summary["n_pairs"],
                detail=f"Δ={m['delta']}, start c={m['start']}; group: {others}",
                censored=bool(v["censored"]),
            )
        ]


METRIC_DOCS = {
    "recl": "model id → r → {recl, ci95, censored}: the first c whose gain g_i(c) from c to c + Δ "
    "is below the threshold; ci95: percentile bootstrap over texts; censored: no c qualified, "
    "recl is the last c tested",
    "delta": "Δ: the context step (c′ = c + Δ)",
    "start": "the first c of the sweep",
    "contexts": "every c at which every model's truncated loss was computed",
    "threshold": "the gain threshold (the paper's 1%)",
    "rs": "fractions r of the hardest targets (the largest group-best loss b(c, t))",
    "gains": "model id → r → [g_i(c) for each c of the sweep but the last]",
    "loss": "model id → mean truncated loss over all targets at each c",
    "models": "the model group (id, path, sha256); RECL is relative to it",
    "n_targets": "scored target tokens (texts × window)",
    "bins[]": "one per (model, r): recl, recl_ci95, censored",
}
