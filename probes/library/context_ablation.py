"""context-ablation: how far back the context is used, and how — its far part dropped, shuffled or
replaced (Khandelwal et al. 2018, "Sharp Nearby, Fuzzy Far Away").

Each text is `--context` tokens of context and then `--window` scored tokens, one document
(`Texts.local_text`). For every distance d of `--distance`, the context farther than d tokens
before the first scored token (everything from the text's opening token to the boundary
b = L − W − d, L the text's length; on real text b moves back to the start of the word it cuts,
so whole words move: `Texts.word_starts`) is ablated three ways, each a row of its own (the
shuffled and replaced ones written by `Texts.ablated_tokens`):

- `drop`: the far context removed — the opening token, then the text from b on (truncation: what
  a model with a context of d + W tokens sees; the scored tokens move to earlier positions);
- `shuffle`: the far context's words in a random order (the same words, the same length, every
  position from b on unchanged) — is its order used?
- `replace`: the far context replaced by as many tokens of another haystack document (or another
  synthetic text) — is its content used, beyond the length of the text?

Per text (the unit of analysis) and row: the mean NLL of the W scored tokens; the text's effect
is the ablated row's mean minus the intact text's, in nats. Bins, one per (ablation, d): the
relative change of the mean loss, 100 · mean(effect) / mean(intact NLL) over the texts (the
scale of Khandelwal et al.'s "within 1 %"; a ratio of means, as a loss over a corpus is, so a
text the model nearly copies does not swamp the rest), with its 95 % Student-t interval (the
effects' interval on the same scale, the intact mean taken as fixed), the exact Wilcoxon
signed-rank p (Holm across the bins) and the verdict against the margin of 1 % (negligible: the
whole interval inside ±1 %, i.e. that far context is not used at the 1 % level); the effect in
nats beside it. `effective`: per ablation, the
smallest d from which every larger d's mean effect stays under 1 % (Khandelwal's effective
context, for `drop`), and the smallest from which every row is negligible by its interval.

What a distance means: the first scored token sees d intact tokens before the ablated part, the
last one d + W − 1; `bins[].distance_mean` is the realised d (word starts move it back by up to a
word). The rows are read by the run's evaluator: under a cut cache (`stream`, `window` with mem +
tgt below the text's length) the far context may be out of the model's sight whatever it holds;
`--evaluator full` measures the model alone.

Default n = 16 texts of 512 + 16 tokens (less where the model's positions, the evaluator's
window or the haystack hold less); each text costs 3·K + 1 rows for K distances.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from probes import stats
from probes.api.declarations import Column
from probes.api.model import score_rows
from probes.api.params import increasing_ints, param
from probes.api.probe_base import Outcome, Probe, ProbeInputError, RunContext
from probes.api.registry import probe
from probes.api.rows import Rows, score_batches
from probes.report import plots
from probes.report.plots import line_plot

ABLATIONS = ("drop", "shuffle", "replace")
CONTEXT = 512  # the default context, when the model and the evaluator hold it
THRESHOLD = 1.0  # percent of the intact loss: Khandelwal et al.'s "within 1 %"

DISTANCE_HELP = (
    "distances d (tokens from the ablated far context to the first scored token): 'auto' "
    "(4, 8, 16, … below --context) or a comma list, e.g. 8,50,200"
)


def parse_distances(text: str, context: int | None = None) -> list[int]:
    def auto() -> list[int]:
        if context is None:
            return []
        return [d for d in (2**k for k in range(2, 20)) if d < context]

    return increasing_ints(text, "distances", "8,50,200", auto)


def check_distances(text: str) -> None:
    parse_distances(text)


@dataclass(frozen=True)
class Ablated:
    """One text and its ablations: `rows[(ablation, k)]` the tokens of the row for distance k
    (None where no draw kept the scored part unchanged); `boundary[k]` where the kept context
    starts (the intact text's index)."""

    tokens: np.ndarray
    boundary: list[int]
    rows: dict[tuple[str, int], np.ndarray | None]


@probe("context-ablation", version=1)
class ContextAblation(Probe):
    """Loss of a text's last tokens with its far context dropped, shuffled or replaced."""

    @dataclass(frozen=True)
    class Params:
        distance: str = param("auto", help=DISTANCE_HELP, check=check_distances)
        context: int = param(
            0,
            help=f"context tokens before the scored window (0: {CONTEXT}, within the model's "
            "positions, the evaluator's mem + tgt and the haystack)",
            min=0,
            max=1_000_000,
        )
        window: int = param(16, help="scored tokens at the end of each text", min=1, max=4096)

    default_n = 16
    quick_n = 4
    shards = True  # scores through score_batches only
    needs_language = True
    smoke: ClassVar[dict] = {
        "synth": {"context": 8, "window": 4, "distance": "2,4"},
        "haystack": {"context": 24, "window": 8, "distance": "2,8"},
    }
    margin = THRESHOLD
    margin_unit = "% of the intact loss"
    margin_why = (
        "Khandelwal et al.'s rule: a context whose removal moves the loss by < 1 % is unused"
    )
    columns = (
        Column("ablation", "ablation", identifies=True),
        Column("d", "distance", identifies=True),
        Column("n", "n"),
        Column("Δ %", "delta_mean", "delta"),
        Column("95% CI", "ci95", "ci"),
        Column("Δ nats", "nats_mean", "f3"),
        Column("p (Holm)", "p_value", "p"),
        Column("verdict", "verdict", "left"),
        Column("dropped", "dropped"),
    )

    def plan(self, ctx: RunContext) -> None:
        p = self.params
        g = ctx.geometry
        W = p.window
        # a replaced context is another document of the same texts: half of them at most
        limits = [(n, what) if of_model else (n // 2, f"half {what}")
                  for n, what, of_model in ctx.length_limits()]  # fmt: skip
        cut = ctx.model.info.evaluator not in ("full", None) and not ctx.horizon.state
        if cut and g.mem_len + g.tgt_len > 0:  # a cut cache: keep the whole text in its sight
            band = g.mem_len + g.tgt_len
            limits.append(
                (band, f"the {ctx.model.info.evaluator} evaluator's mem + tgt ({band:,})")
            )
        context = p.context or CONTEXT
        for top, what in limits:
            if context + W > top:
                if p.context:
                    raise ProbeInputError(
                        f"--context {context:,} + --window {W}: {what} hold texts of "
                        f"{top:,} tokens; give a shorter --context"
                    )
                context = top - W
        if context < 8:
            raise ProbeInputError(
                f"{self.name}: a context of {context} tokens leaves nothing to ablate; give a "
                "smaller --window or a model and evaluator that see further"
            )
        self.context, self.length = context, context + W
        try:
            self.distances = parse_distances(p.distance, context)
        except ValueError as e:
            raise ProbeInputError(f"--distance: {e}") from None
        if not self.distances or self.distances[-1] >= context:
            raise ProbeInputError(
                f"--distance {p.distance}: every distance must be below the context of "
                f"{context:,} tokens (something must lie beyond it to ablate); give smaller ones"
            )
        rng = ctx.rng(self.name, self.length)  # the texts: the same for any --distance
        self.texts = [self._text(ctx, rng, i) for i in range(ctx.n)]
        self.scored = np.arange(context, self.length)

    def _text(self, ctx: RunContext, rng, index: int) -> Ablated:
        """A text and its 3·K ablated rows (each distance's draws a stream of their own)."""
        first = self.context  # the first scored token
        ex = ctx.texts.local_text(rng, self.length)
        starts = ctx.texts.word_starts(ex)  # whole words move
        tokens = ex.tokens
        rows: dict[tuple[str, int], np.ndarray | None] = {}
        boundary = []
        for k, d in enumerate(self.distances):
            b = int(starts[starts <= first - d].max())  # where the kept context starts
            boundary.append(b)
            rows["drop", k] = np.concatenate([tokens[:1], tokens[b:]])
            for kind in ("shuffle", "replace"):
                own = ctx.rng(self.name, self.length, index, d, kind)
                rows[kind, k] = self._ablate(ctx, own, ex, kind, b)
        return Ablated(tokens, boundary, rows)

    def _ablate(self, ctx: RunContext, rng, ex, kind: str, b: int) -> np.ndarray | None:
        """The text with tokens [1, b) shuffled by word or replaced by foreign tokens; None when
        no draw leaves the tokens from b on as they are."""
        if b <= 1:  # nothing before the boundary but the opening token
            return ex.tokens.copy()
        return ctx.texts.ablated_tokens(rng, ex, kind, b)

    def execute(self, ctx: RunContext) -> Outcome:

        K = len(self.distances)
        records, _ = score_batches(
            ctx,
            list(range(len(self.texts))),
            1 + len(ABLATIONS) * K,
            f"{self.name}: scoring texts",
            lambda items: self._score(ctx, items),
        )
        return self.summarize(ctx, records)

    def _score(self, ctx: RunContext, items):
        """The chunk's rows in one call per length: the full-length rows (intact, shuffled,
        replaced) together, the dropped rows of each distance together (a call forwards every
        row to its longest scored position, so a short row among long ones would cost a long
        one)."""

        W = self.params.window
        calls: dict[Any, tuple[Rows, list]] = {}
        for i in items:
            t = self.texts[i]
            for key, row in [(("intact", 0), t.tokens), *t.rows.items()]:
                if row is None:
                    continue
                rows, where = calls.setdefault("full" if key[0] != "drop" else key, (Rows(), []))
                rows.add(row, np.zeros(len(row)), np.arange(len(row) - W, len(row)))
                where.append((i, key))
        means: dict[tuple[int, tuple[str, int]], float] = {}
        for rows, where in calls.values():
            tokens, docs, pos, _, _ = rows.arrays(ctx.pad_id)
            nll = score_rows(ctx.model, tokens, docs, pos, ctx.geometry).nll
            for r, at in enumerate(where):
                means[at] = _window_mean(nll[r], pos[r])
        for i in items:
            rec: dict[str, Any] = {"text": i, "nll_intact": means[i, ("intact", 0)],
                                   "boundary": self.texts[i].boundary}  # fmt: skip
            for kind in ABLATIONS:
                rec[kind] = [means.get((i, (kind, k))) for k in range(len(self.distances))]
            yield rec, None

    def summarize(self, ctx: RunContext, records: list[dict]) -> Outcome:
        intact = np.array([r["nll_intact"] for r in records], dtype=float)
        groups, nats, meta = [], [], []
        for kind in ABLATIONS:
            for k, d in enumerate(self.distances):
                keep = [j for j, r in enumerate(records) if r[kind][k] is not None]
                ablated = np.array([records[j][kind][k] for j in keep], dtype=float)
                delta = ablated - intact[keep]
                # the relative change of the mean loss (ratio of means, not mean of ratios: a
                # text that copies is nearly free, and its ratio would swamp the rest)
                scale = 100.0 / intact[keep].mean() if keep else 0.0
                groups.append(scale * delta)
                nats.append(delta)
                realised = [self.length - self.params.window - records[j]["boundary"][k]
                            for j in keep]  # fmt: skip
                meta.append((kind, d, float(np.mean(realised)) if realised else None))
        rows = stats.grouped(groups, ctx.margin)
        bins = []
        for (kind, d, realised), g, delta, row in zip(meta, groups, nats, rows, strict=True):
            nd = stats.describe(delta)
            bins.append({"ablation": kind, "distance": d, "distance_mean": realised, **row,
                         "nats_mean": nd["mean"], "nats_ci95": nd["ci95"],
                         "dropped": len(records) - len(g)})  # fmt: skip
        effective = {kind: self._effective([b for b in bins if b["ablation"] == kind])
                     for kind in ABLATIONS}  # fmt: skip
        d_intact = stats.describe(intact)
        metrics: dict[str, Any] = {
            "context": self.context,
            "window": self.params.window,
            "distances": self.distances,
            "nll_intact": {"mean": d_intact["mean"], "ci95": d_intact["ci95"], "n": d_intact["n"]},
            "effective": effective,
            "threshold_percent": THRESHOLD,
            "policy": {
                "evaluator": ctx.model.info.evaluator,
                "mem_len": ctx.geometry.mem_len,
                "tgt_len": ctx.geometry.tgt_len,
                "dtype": ctx.model.info.dtype,
            },
        }
        K = len(self.distances)
        texts: dict[str, np.ndarray] = {
            "tokens": np.stack([t.tokens for t in self.texts]).astype(np.int32),
            "boundary": np.array([t.boundary for t in self.texts], dtype=np.int32),
        }
        for kind in ("shuffle", "replace"):  # drop rows are the intact text from the boundary on
            stack = np.full((len(self.texts), K, self.length), -1, dtype=np.int32)
            for i, t in enumerate(self.texts):
                for k in range(K):
                    if t.rows[kind, k] is not None:
                        stack[i, k] = t.rows[kind, k]
            texts[kind] = stack
        outcome = Outcome(
            metrics=metrics,
            bins=bins,
            metric_docs=METRIC_DOCS,
            higher_is_better={"delta_mean": False},
            n_pairs=len(records),
            texts=texts,
        )
        parts = []
        for kind in ABLATIONS:
            e = effective[kind]
            parts.append(f"{kind} {_reach(e['by_mean'])} (interval: {_reach(e['by_interval'])})")
        outcome.verdict = (
            f"{self.name}: the loss stays within {THRESHOLD:g} % of the intact text's from "
            f"distance — {'; '.join(parts)} — over {len(records)} texts of {self.context:,} + "
            f"{self.params.window} tokens, intact NLL {_num(d_intact['mean'])}"
        )
        outcome.plots = [self._plot(ctx, bins)]
        return outcome

    def _effective(self, bins: list[dict]) -> dict[str, Any]:
        """The smallest d from which every larger d stays under the threshold: by the mean, and
        by the interval (negligible); None when the last one does not."""

        def first_of_tail(ok: list[bool]) -> int | None:
            at = None
            for b, good in zip(reversed(bins), reversed(ok), strict=True):
                if not good:
                    break
                at = b["distance"]
            return at

        means = [b["delta_mean"] is not None and abs(b["delta_mean"]) < THRESHOLD for b in bins]
        return {
            "by_mean": first_of_tail(means),
            "by_interval": first_of_tail([b["verdict"] == "negligible" for b in bins]),
        }

    def _plot(self, ctx, bins):

        series = {}
        for kind, style in zip(ABLATIONS, ("-o", "-s", "-^"), strict=True):
            mine = [b for b in bins if b["ablation"] == kind and b["delta_mean"] is not None]
            series[kind] = {"x": [b["distance"] for b in mine],
                            "y": [b["delta_mean"] for b in mine], "style": style}  # fmt: skip
        return plots.deferred(
            line_plot,
            "context_ablation.png",
            series,
            title=f"{self.name} · {ctx.model.info.id}",
            xlabel="distance d of the ablated context (tokens, log scale)",
            ylabel="loss increase (% of the intact text's)",
            logx=True,
            hline=THRESHOLD,
        )


def _window_mean(nll: np.ndarray, scored: np.ndarray) -> float:
    values = nll[scored]
    if not np.all(np.isfinite(values)):
        raise RuntimeError("context-ablation: the model returned a non-finite NLL")
    return float(values.mean())


def _reach(d: int | None) -> str:
    return "never (not within the sweep)" if d is None else f"{d:,}"


def _num(x, digits: int = 3) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


METRIC_DOCS = {
    "bins[].delta_mean": "100 · mean over texts of (NLL(ablated) − NLL(intact)) / mean over texts "
    "of NLL(intact), each NLL the mean over the text's scored window; with its 95% t interval "
    "(ci95: the differences' interval on the same scale), exact Wilcoxon p Holm-adjusted across "
    "the bins (p_value) and verdict against ±1 %",
    "bins[].nats_mean": "the same difference in nats/token (nats_ci95: its t interval)",
    "bins[].distance": "the nominal d; distance_mean: the realised d (word starts move it back)",
    "bins[].dropped": "texts without that row (no shuffle or foreign run kept the rest unchanged)",
    "effective": "per ablation: by_mean, the smallest d from which every larger d's mean effect "
    "is under 1 %; by_interval, the smallest from which every row is negligible (its interval "
    "inside ±1 %); None when the largest d is not",
    "nll_intact": "mean over texts of the intact text's window NLL, with its 95% t interval",
    "context": "context tokens before the scored window",
    "window": "scored tokens per text",
    "policy": "the evaluator, mem_len, tgt_len and dtype the rows were scored under",
}
