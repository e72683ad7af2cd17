"""What context-sweep and recl share: long texts with facts at spread distances, and their
losses at a sweep of visible-history lengths.

A sweep text is one document of `max_context + window + 1` tokens (more when `max_context` is
too short for the facts) whose last `window` tokens are scored: its `facts` queries sit at the
end of that window (their answer tokens are the `answer` targets), every fact stated earlier at
a distance drawn log-uniformly from one stratum each of [8 · facts + 4, max_context − 16] (so
that every fact precedes the block of queries); filler tokens of the window, evenly spaced, are
the `ordinary` targets (local grammar and topic). Every scored token has at least `max_context` tokens of its own document before it, so
truncating its history to c ≤ max_context tokens is exact truncation, never the document start.

Through the tokenizer bridge (a model with its own tokenizer) a text is drawn in synth words and
mapped to the model's tokens (`bridged`): the facts' distances are drawn in model tokens and
converted to synth words (`Bridge.synth_tokens`), the window is the model tokens of its words,
the answer targets every model token of the answers, the ordinary targets evenly spaced among
the model tokens of the window's filler, each answer token's distance measured in model tokens.
The lead still has `max_context` synth words, so at least as many model tokens; texts are
padded to one length after their last scored token (`padded`).

`truncated(model, texts, c)`: every target predicted from exactly c previous tokens (the
recompute evaluator with window c, via the LossModel's `score_window`); `streaming(model, texts,
geometry, c)`: the streaming evaluator with mem_len c (which sees further through layered reach).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from probes.api.params import increasing_ints
from probes.api.probe_base import ProbeInputError, RunContext

MIN_FACT_DISTANCE = 8
CONTEXTS_HELP = (
    "visible-history lengths c: 'auto' (1, 2, 4, … and the maximum) or a comma list, e.g. "
    "1,16,64,256"
)


@dataclass(frozen=True)
class SweepText:
    tokens: np.ndarray  # (L,)
    doc_ids: np.ndarray  # (L,)
    answer: np.ndarray  # positions of answer tokens (scored)
    ordinary: np.ndarray  # positions of filler tokens in the scored window
    distance: np.ndarray  # per answer token: distance from its fact's last token

    @property
    def scored(self) -> np.ndarray:
        return np.sort(np.r_[self.answer, self.ordinary])


def require_window(models, probe: str) -> None:
    """Refuse (bad input) a model that cannot score a truncated context (`score_window`)."""
    for m in models:
        if not hasattr(m, "score_window"):
            raise ProbeInputError(
                f"{probe}: model {m.info.id!r} cannot score a truncated context (its adapter has "
                "no score_window); use a Transformer-XL checkpoint"
            )


def parse_contexts(text: str, maximum: int | None = None) -> list[int]:
    """'auto' → 1, 2, 4, … < maximum, and maximum; else the given increasing list (each ≥ 1: a
    prediction needs at least its input token)."""

    def auto() -> list[int]:
        if maximum is None:
            return []
        return [*(1 << k for k in range(0, 64) if (1 << k) < maximum), maximum]

    return increasing_ints(text, "contexts", "1,16,64", auto)


def check_contexts(text: str) -> None:
    parse_contexts(text)


def make_texts(
    ctx: RunContext, rng, n: int, max_context: int, window: int, facts: int, ordinary: int = 0
) -> list[SweepText]:
    """n sweep texts; `ordinary` > 0 keeps that many of the window's filler tokens (evenly
    spaced) as ordinary targets, 0 all of them."""
    from synth import rng as rnd
    from synth.generate import make_example
    from synth.text.facts import fact_text
    from synth.text.render import Misaligned

    ordinary_k = ordinary
    # tokens of one query (on real text: the longest prefix, the value and the full stop)
    query = 8 if ctx.text is None else ctx.text.min_distance + ctx.text.value_len + 1
    lo = max(MIN_FACT_DISTANCE, query * facts + 4)  # every fact before the block of queries
    hi = max(lo, max_context - 16)
    length = max(max_context, hi + 16) + window + 1
    if window < query * facts + 4:
        raise ProbeInputError(
            f"--window {window} cannot hold {facts} queries ({query} tokens each) and some "
            f"filler; use --window {query * facts + 8} or fewer --facts"
        )
    texts = []
    edges = np.geomspace(lo, hi + 1, facts + 1)
    for _ in range(n):
        dists = []
        for k in range(facts):
            lo_k, hi_k = math.log(edges[k]), math.log(edges[k + 1])
            d = int(math.exp(lo_k + (hi_k - lo_k) * rng.random()))
            dists.append(min(max(d, lo), hi))
        order = rnd.permutation(rng, facts)
        dists = [dists[i] for i in order]
        try:
            if ctx.text is not None:
                ex = fact_text(ctx.text, rng, dists, length=length, lead=8)
            elif ctx.bridge is not None:
                synth = [ctx.bridge.synth_tokens(d, lo) for d in dists]
                ex = make_example(ctx.lang, rng, synth, length=length, lead=8)
            else:
                ex = make_example(ctx.lang, rng, dists, length=length, lead=8)
        except Misaligned:
            ctx.unmatched += 1
            continue
        except ValueError as e:
            raise ProbeInputError(f"cannot build a sweep text: {e}") from None
        start = length - window
        if ctx.bridge is not None:
            try:
                texts.append(bridged(ctx.bridge, ex, start, ordinary_k))
            except Misaligned:
                ctx.unmatched += 1
            continue
        keep = ex.targets >= start
        answer = ex.targets[keep]
        dist = np.concatenate([ex.distance(q) + np.arange(len(q.answer)) for q in ex.queries])
        dist = dist[keep]
        filler = np.flatnonzero(ex.filler_mask())
        ordinary = filler[filler >= start]
        if 0 < ordinary_k < len(ordinary):
            pick = np.unique(np.linspace(0, len(ordinary) - 1, ordinary_k).round().astype(int))
            ordinary = ordinary[pick]
        texts.append(SweepText(ex.tokens, ex.doc_ids, answer, ordinary, dist))
    ctx.require_matched("context-sweep", len(texts))
    return texts if ctx.bridge is None else padded(texts, ctx.pad_id)


def padded(texts: list[SweepText], pad: int) -> list[SweepText]:
    """Texts of one length: each bridged text ends in pad tokens (a document of their own, after
    every scored token, so no score depends on them)."""
    n = max(len(t.tokens) for t in texts)
    out = []
    for t in texts:
        k = n - len(t.tokens)
        tokens = np.r_[t.tokens, np.full(k, pad, dtype=np.int64)]
        docs = np.r_[t.doc_ids, np.full(k, int(t.doc_ids[-1]) + 1, dtype=np.int64)]
        out.append(replace(t, tokens=tokens, doc_ids=docs))
    return out


def bridged(bridge, ex, start: int, ordinary_k: int) -> SweepText:
    """A synth sweep text in the model's tokens (module docstring); `start`: the synth position
    of the window's first word."""
    r = bridge.render(ex)
    answer, dist = [], []
    for q in ex.queries:
        if q.answer.start < start:
            continue
        tokens = bridge.positions(r, q.answer.indices())
        end = int(r.spans[ex.facts[q.fact].span.end - 1, 1]) - 1  # the fact's last model token
        answer.append(tokens)
        dist.append(tokens - end)
    filler = np.flatnonzero(ex.filler_mask())
    ordinary = bridge.positions(r, filler[filler >= start])
    if 0 < ordinary_k < len(ordinary):
        pick = np.unique(np.linspace(0, len(ordinary) - 1, ordinary_k).round().astype(int))
        ordinary = ordinary[pick]
    cat = np.concatenate
    return SweepText(r.tokens, r.doc_ids, cat(answer), ordinary, cat(dist))


def _rows(texts: list[SweepText]):
    tokens = np.stack([t.tokens for t in texts])
    docs = np.stack([t.doc_ids for t in texts])
    pos = np.zeros(tokens.shape, dtype=bool)
    for i, t in enumerate(texts):
        pos[i, t.scored] = True
    return tokens, docs, pos


def truncated(model, texts: list[SweepText], c: int, geometry, *, opening: bool = False):
    """(nll, correct), each (n_texts, L): exactly c tokens of history per scored token; with
    `opening`, the text's opening token (its first) before them (`opened`)."""
    from probes.api.model import score_truncated

    tokens, docs, pos = _rows(texts)
    if not opening:
        out = score_truncated(model, tokens, docs, pos, c, geometry)
        return out.nll, out.correct
    ids, where = opened(tokens, pos, c)
    rows = np.ones(ids.shape, dtype=bool)
    rows[:, :-1] = False
    out = score_truncated(model, ids, np.zeros_like(ids), rows, c + 1, geometry)
    nll = np.full(tokens.shape, np.nan)
    correct = np.zeros(tokens.shape, dtype=bool)
    nll[where], correct[where] = out.nll[:, -1], out.correct[:, -1]
    return nll, correct


def opened(tokens: np.ndarray, pos: np.ndarray, c: int) -> tuple[np.ndarray, tuple]:
    """One row per scored token t of a text: its opening token (tokens[0]), the c tokens before
    t, then t — what a model pretrained on texts that open with their bos sees when its context
    holds c tokens (such a model has never seen a text without it; Gemma 3 reads one at c = 1
    worse than uniform). Returns the (scored, c + 2) rows and the (text, t) index of each."""
    r, t = np.nonzero(pos)
    if t.size and int(t.min()) - c < 1:
        raise ValueError(
            f"a window of {c} tokens reaches the opening token of a text; every scored token "
            f"needs at least {c + 1} tokens before it"
        )
    span = t[:, None] + np.arange(-c, 1)[None, :]  # (scored, c + 1): t − c … t
    ids = np.concatenate([tokens[r, :1], tokens[r[:, None], span]], axis=1)
    return ids, (r, t)


def streaming(model, texts: list[SweepText], c: int, geometry):
    """(nll, correct) with the model's own evaluator and mem_len c (no same_length at c = 0)."""
    from probes.api.model import score_rows

    tokens, docs, pos = _rows(texts)
    g = replace(geometry, mem_len=c, same_length=geometry.same_length and c > 0)
    out = score_rows(model, tokens, docs, pos, g)
    return out.nll, out.correct


def pair_means(nll: np.ndarray, texts: list[SweepText], which: str) -> np.ndarray:
    """(n_texts,) the mean NLL of each text's `which` targets (answer | ordinary | all)."""
    out = []
    for i, t in enumerate(texts):
        p = t.scored if which == "all" else getattr(t, which)
        out.append(float(nll[i, p].mean()))
    return np.array(out)
