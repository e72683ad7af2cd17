"""context-sweep: loss vs visible history, by truncation, for answer and ordinary tokens.

Fixed target tokens (probes.engine.sweep, each text drawn by `Texts.sweep_text`: the last
`--window` tokens of long documents, holding `--facts` queries whose facts lie at distances
spread log-uniformly up to the maximum, and filler), scored with a visible history of exactly c
tokens for every c of `--contexts`: each target is predicted from a fresh window of its c
previous tokens (the recompute evaluator with window c; its own
document is always longer), opened by the text's opening token (`--opening`, the default: a
model pretrained on texts that begin with its bos has never seen one without it, and Gemma 3
reads a window without it worse than uniform at c = 1; `--no-opening`: the c tokens alone, as
version 2 measured). Streaming with memory c would let a token see further,
through the layered reach; that curve is computed too (`--stream`), for contrast only.

Per text (the unit of analysis) and c: the mean NLL of its answer tokens and of its ordinary
(filler) tokens. Bins, one per c: `answer_nll` / `ordinary_nll` with 95 % t intervals over texts,
`answer_accuracy` (fraction of answer tokens that are the argmax), `fact_visible` (fraction of
answer tokens whose fact lies within c), and the streaming `stream_answer_nll` /
`stream_ordinary_nll`. Plot: `context_sweep.png`, NLL vs c (log scale), truncated and streaming.

With `--haystack` the texts are real text (`synth.text.facts.fact_text`): English facts and
queries in haystack filler, the ordinary targets haystack words; `--window` must hold the
queries (about 40 tokens each under a small BPE; its default there makes room for them).

Through the tokenizer bridge (a model with its own tokenizer) the texts are synth texts mapped
to the model's tokens (`probes.texts.bridged.BridgedTexts.mapped_sweep_text`): contexts,
distances and the window's scored tokens are model tokens; `--window` counts synth words there.

Effective context (`effective_context`, per token set answer | ordinary | all): the smallest c of
the sweep whose perplexity is within 1 % of the perplexity at the largest c,
(e^{L(c)} − e^{L(max)}) / e^{L(c)} < 0.01, L = the mean over texts of the text means; with a 95 %
percentile interval from 1,000 bootstrap resamples of the texts (seeded by --seed; why
percentile and how to read it: probes.engine.bootstrap). A value at the largest c means the loss
still falls at the end of the sweep (the true value may be larger).

A recurrent model scored by its state has no window (its geometry's mem_len is 0), so its
largest c is STATE_MAX_CONTEXT unless `--max-context` says.

Default n = 16 texts, each scored on its answer tokens (about 6) and `--ordinary` 16 filler
tokens evenly spaced over its last `--window` tokens; the cost is one window of c tokens per
scored token and c, so it grows with the sum of the squared contexts (about 2 minutes for the
default-shaped model at --mem 640 on 2 CPU cores; --quick: 4 texts). On a real model that is
hours at one thread, so each context's results go to samples.jsonl whole, and a resumed
diagnose (`probe diagnose --resume`) picks up the contexts an interrupted sweep finished.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from probes import stats
from probes.api.declarations import Column, effect_row
from probes.api.model import window_limit
from probes.api.params import ints_text, param
from probes.api.probe_base import Outcome, Probe, ProbeInputError, RunContext
from probes.api.registry import probe
from probes.engine import bootstrap
from probes.engine.sweep import (
    CONTEXTS_HELP,
    check_contexts,
    make_texts,
    pair_means,
    parse_contexts,
    require_window,
    streaming,
    truncated,
)
from probes.report import plots
from probes.report.plots import line_plot

STATE_MAX_CONTEXT = 1024  # the largest c of 'auto' for a recurrent state (no window of its own)
SETS = ("answer", "ordinary", "all")
THRESHOLD = 0.01
WINDOW_OVERHEAD = 64  # tokens; only the progress line's time left reads it


def effective_context(means: np.ndarray, contexts: list[int], threshold: float = THRESHOLD):
    """The smallest c whose perplexity is within `threshold` (relative) of the last c's.
    means: (C, n) text means; returns the c (never None: the last c always qualifies)."""
    L = means.mean(axis=1)
    ref = L[-1]
    for j, c in enumerate(contexts):
        if 1.0 - np.exp(ref - L[j]) < threshold:  # (e^{L_c} − e^{L_max}) / e^{L_c}
            return int(c)
    return int(contexts[-1])


@probe("context-sweep", version=3, diagnose=60)
class ContextSweep(Probe):
    """Loss vs visible history c by truncation (answer and ordinary tokens), beside streaming."""

    @dataclass(frozen=True)
    class Params:
        contexts: str = param("auto", help=CONTEXTS_HELP, check=check_contexts)
        max_context: int = param(
            0,
            help="the largest c for 'auto' (0: the eval mem_len + tgt_len; a recurrent state: "
            f"{STATE_MAX_CONTEXT:,})",
            min=0,
        )
        window: int | None = param(
            None,
            help="the last tokens of a text: its queries and ordinary targets [default: 64; on "
            "real text room for the queries and 32 more]",
            min=16,
            max=4096,
        )
        facts: int = param(4, help="queries per text (facts spread over the distances)", min=1)
        ordinary: int = param(
            16, help="ordinary (filler) tokens scored per text, evenly spaced (0: all)", min=0
        )
        stream: bool = param(True, help="also the streaming curve (memory c) for contrast")
        opening: bool = param(
            True,
            help="open every truncated window with the text's opening token (a pretrained "
            "model's bos), as a model with a context of c tokens sees a text; off: the c "
            "tokens alone (version 2)",
        )

    default_n = 16
    quick_n = 4
    smoke: ClassVar[dict] = {
        "synth": {"window": 120, "facts": 2, "contexts": "1,16,64"},
        "haystack": {"window": 120, "facts": 2, "contexts": "1,16,64"},
        "bridged": {"contexts": "1,16,64"},
    }
    resumes_from_samples = True  # a sample holds one context whole; a long sweep resumes by c
    columns = (
        Column("c", "c", identifies=True),
        Column("n", "n"),
        Column("answer NLL", "answer_nll", "f3"),
        Column("answer CI", "answer_ci95", "ci"),
        Column("ordinary NLL", "ordinary_nll", "f3"),
        Column("ordinary CI", "ordinary_ci95", "ci"),
        Column("stream answer", "stream_answer_nll", "f3"),
        Column("stream ordinary", "stream_ordinary_nll", "f3"),
        Column("answer acc", "answer_accuracy", "f2"),
        Column("fact visible", "fact_visible", "f2"),
    )

    def plan(self, ctx: RunContext) -> None:

        require_window([ctx.model], self.name)
        p = self.params
        g = ctx.geometry
        top = p.max_context or (g.mem_len + g.tgt_len)
        if not p.max_context and ctx.horizon.state:  # a recurrent state: no window to stop at
            top = max(top, STATE_MAX_CONTEXT)
        longest = window_limit(ctx.model) if p.opening else None
        if longest is not None and not p.max_context:
            top = min(top, longest - 1)  # the opening token takes a position of the window
        self.contexts = ctx.resolve_auto(
            "contexts",
            p.contexts,
            lambda t: parse_contexts(t, top),
            lambda: parse_contexts("auto", top),
            ints_text,
        )
        if longest is not None and self.contexts[-1] + 1 > longest:
            c = self.contexts[-1]
            raise ProbeInputError(
                f"context-sweep: c = {c:,} and the opening token make a window of {c + 1:,} "
                f"tokens, past the model's {longest:,} positions; use contexts up to "
                f"{longest - 1:,} or --no-opening"
            )
        if len(self.contexts) < 2:
            raise ProbeInputError(
                f"--contexts {p.contexts!r}: give at least two lengths (a curve), e.g. 1,16,64"
            )
        self.max_context = self.contexts[-1]
        window = p.window
        if window is None:  # room for the queries (on real text about 40 tokens each, not 8)
            window = ctx.texts.query_window(p.facts)
        rng = ctx.rng(self.name, self.max_context, window, p.facts)
        self.texts = make_texts(ctx, rng, ctx.n, self.max_context, window, p.facts, p.ordinary)

    def execute(self, ctx: RunContext) -> Outcome:

        C = len(self.contexts)
        conds = ["truncated", "stream"] if self.params.stream else ["truncated"]
        means = {(c, s): np.zeros((C, len(self.texts))) for c in conds for s in SETS}
        acc = np.zeros((C, len(self.texts)))
        nll_all = {}
        kept = self._kept(ctx.kept_samples, conds)
        # what each step costs, for the time left: a truncated step forwards a window of c
        # tokens per scored token, each window also paying a fixed cost (its call reads every
        # weight: about WINDOW_OVERHEAD tokens' worth); a streamed one forwards every text once
        scored = sum(len(t.scored) for t in self.texts)
        streamed = sum(len(t.tokens) for t in self.texts)
        work = [scored * (c + WINDOW_OVERHEAD) if cond == "truncated" else streamed
                for c in self.contexts for cond in conds]  # fmt: skip
        with ctx.steps(C * len(conds), f"{self.name}: contexts", work) as advance:
            for j, c in enumerate(self.contexts):
                if c in kept:  # scored by the interrupted run this one resumes
                    record = kept[c]
                    for cond in conds:
                        for s in SETS:
                            means[cond, s][j] = record[f"{cond}_{s}_nll"]
                    acc[j] = record["answer_accuracy"]
                    nll_all[c] = np.asarray(record["nll_truncated"], dtype=np.float64)
                    ctx.sample(record)
                    advance(len(conds), kept=True)
                    continue
                for cond in conds:
                    if cond == "truncated":
                        nll, correct = truncated(
                            ctx.model, self.texts, c, ctx.geometry, opening=self.params.opening
                        )
                    else:
                        nll, correct = streaming(ctx.model, self.texts, c, ctx.geometry)
                    for s in SETS:
                        means[cond, s][j] = pair_means(nll, self.texts, s)
                    if cond == "truncated":
                        acc[j] = [correct[i, t.answer].mean() for i, t in enumerate(self.texts)]
                        nll_all[c] = np.concatenate(
                            [nll[i, t.scored] for i, t in enumerate(self.texts)]
                        )
                    advance(1)
                ctx.sample(
                    {
                        "c": c,
                        **{
                            f"{cond}_{s}_nll": means[cond, s][j].tolist()
                            for cond in conds
                            for s in SETS
                        },
                        "answer_accuracy": acc[j].tolist(),
                        "nll_truncated": nll_all[c].tolist(),
                    }
                )
        for (cond, _), v in means.items():
            if not np.all(np.isfinite(v)):
                raise RuntimeError(f"{self.name}: the model returned a non-finite NLL ({cond})")
        return self.summarize(ctx, means, acc, nll_all)

    def _kept(self, samples: list[dict], conds: list[str]) -> dict[int, dict]:
        """The contexts an interrupted run of this measurement finished, by c: each sample
        whole (every per-text mean, the accuracies and the per-token NLLs, shaped as this
        run's texts); a sample of an older layout or another shape is scored again."""
        n, scored = len(self.texts), sum(len(t.scored) for t in self.texts)
        keys = [f"{cond}_{s}_nll" for cond in conds for s in SETS]
        kept = {}
        for record in samples:
            c = record.get("c")
            lengths = [len(record.get(k) or ()) for k in (*keys, "answer_accuracy")]
            if (c in self.contexts and lengths == [n] * len(lengths)
                    and len(record.get("nll_truncated") or ()) == scored):  # fmt: skip
                kept[c] = record
        return kept

    def summarize(self, ctx, means, acc, nll_all) -> Outcome:
        bins = []
        visible = [
            float(np.mean([np.mean(t.distance <= c) for t in self.texts])) for c in self.contexts
        ]
        for j, c in enumerate(self.contexts):
            b: dict[str, Any] = {"c": c, "n": len(self.texts)}
            for s in ("answer", "ordinary"):
                d = stats.describe(means["truncated", s][j])
                b[f"{s}_nll"], b[f"{s}_ci95"] = d["mean"], d["ci95"]
                if ("stream", s) in means:
                    b[f"stream_{s}_nll"] = float(means["stream", s][j].mean())
            b["answer_accuracy"] = float(acc[j].mean())
            b["fact_visible"] = visible[j]
            bins.append(b)
        rng = ctx.rng(self.name, "bootstrap")
        eff = {}
        for s in SETS:
            m = means["truncated", s]
            eff[s] = {
                "c": effective_context(m, self.contexts),
                "ci95": bootstrap.interval(
                    lambda idx, m=m: effective_context(m[:, idx], self.contexts), m.shape[1], rng
                ),
                "censored": effective_context(m, self.contexts) == self.contexts[-1],
            }
        metrics: dict[str, Any] = {
            "contexts": self.contexts,
            "max_context": self.max_context,
            "effective_context": eff,
            "threshold": THRESHOLD,
            "answer_nll_at_max": bins[-1]["answer_nll"],
            "ordinary_nll_at_max": bins[-1]["ordinary_nll"],
            "scored_tokens_per_text": {
                "answer": float(np.mean([len(t.answer) for t in self.texts])),
                "ordinary": float(np.mean([len(t.ordinary) for t in self.texts])),
            },
        }
        if ("stream", "all") in means:
            metrics["stream_effective_context"] = {
                s: effective_context(means["stream", s], self.contexts) for s in SETS
            }
        outcome = Outcome(
            metrics=metrics,
            bins=bins,
            metric_docs=METRIC_DOCS,
            higher_is_better={"answer_nll": False, "ordinary_nll": False, "answer_accuracy": True},
            n_pairs=len(self.texts),
            arrays={
                "contexts": np.array(self.contexts, dtype=np.int64),
                "text": np.concatenate(
                    [np.full(len(t.scored), i, np.int64) for i, t in enumerate(self.texts)]
                ),
                "position": np.concatenate([t.scored for t in self.texts]),
                "is_answer": np.concatenate([np.isin(t.scored, t.answer) for t in self.texts]),
                "nll_truncated": np.stack([nll_all[c] for c in self.contexts]),
            },
        )
        a, o = eff["answer"], eff["ordinary"]

        def fmt(e):
            ci = e["ci95"]
            return f"{'≥' if e['censored'] else ''}{e['c']}" + (
                f" [{ci[0]}, {ci[1]}]" if ci else ""
            )

        outcome.verdict = (
            f"{self.name}: effective context (within 1% of the perplexity at c={self.max_context}) "
            f"answer tokens {fmt(a)}, ordinary tokens {fmt(o)}; answer NLL "
            f"{bins[0]['answer_nll']:.3f} at c={self.contexts[0]} → {bins[-1]['answer_nll']:.3f} "
            f"at c={self.max_context}"
        )
        outcome.plots = [self._plot(ctx, bins)]
        return outcome

    def _plot(self, ctx, bins):

        xs = [b["c"] for b in bins]
        series = {}
        for s in ("answer", "ordinary"):
            series[f"{s} tokens, truncated (band: 95% CI)"] = {
                "x": xs,
                "y": [b[f"{s}_nll"] for b in bins],
                "lo": [b[f"{s}_ci95"][0] if b[f"{s}_ci95"] else None for b in bins],
                "hi": [b[f"{s}_ci95"][1] if b[f"{s}_ci95"] else None for b in bins],
            }
        for s in ("answer", "ordinary"):
            if f"stream_{s}_nll" in bins[0]:
                series[f"{s} tokens, streaming with memory c"] = {
                    "x": xs,
                    "y": [b[f"stream_{s}_nll"] for b in bins],
                    "style": "s--",
                }
        g = ctx.geometry
        title = f"{self.name} · {ctx.model.info.id} · tgt {g.tgt_len} clamp {g.clamp_len}"

        return plots.deferred(
            line_plot,
            "context_sweep.png",
            series,
            title=title,
            xlabel="visible history c (tokens)",
            ylabel="NLL (nats/token, mean over texts)",
            logx=True,
            vlines=[(g.mem_len + g.tgt_len, "eval mem+tgt")],
        )

    @classmethod
    def diagnose_rows(cls, summary: dict) -> list[dict]:
        e = summary["metrics"]["effective_context"]
        top = summary["metrics"]["max_context"]

        def at_least(x: dict) -> str:
            return f"{'≥' if x['censored'] else ''}{x['c']}"

        return [
            effect_row(
                "effective context (truncation)",
                cls.name,
                "effective_context.all.c",
                "tokens",
                "smallest truncated context within 1% of the perplexity at the largest c "
                "(context-sweep)",
                value=e["all"]["c"],
                ci95=e["all"]["ci95"],
                n=summary["n_pairs"],
                detail=f"within 1% of the perplexity at c={top}; answer {at_least(e['answer'])}, "
                f"ordinary {at_least(e['ordinary'])}",
                censored=bool(e["all"]["censored"]),
            )
        ]


METRIC_DOCS = {
    "contexts": "the visible-history lengths c swept",
    "max_context": "the largest c (the reference of the effective context)",
    "threshold": "relative perplexity gap that counts as 'within' (1%)",
    "scored_tokens_per_text": "{answer, ordinary}: mean scored tokens of each kind per text",
    "effective_context": "{answer, ordinary, all}: {c, ci95, censored}: the smallest c whose "
    "perplexity is within 1% of that at the largest c (percentile bootstrap over texts); "
    "censored: only the largest c qualifies",
    "stream_effective_context": "the same for the streaming curve (memory c), for contrast",
    "answer_nll_at_max": "mean answer-token NLL at the largest c",
    "ordinary_nll_at_max": "mean ordinary-token NLL at the largest c",
    "bins[].c": "visible history: every target predicted from exactly c previous tokens",
    "bins[].answer_nll": "mean over texts of the mean NLL of the answer tokens (truncated)",
    "bins[].answer_ci95": "95% Student-t interval over texts",
    "bins[].ordinary_nll": "the same for ordinary (filler) tokens",
    "bins[].stream_answer_nll": "the same with the streaming evaluator and memory c",
    "bins[].answer_accuracy": "mean over texts of the fraction of answer tokens that are the "
    "argmax",
    "bins[].fact_visible": "fraction of answer tokens whose fact lies within c tokens",
}
