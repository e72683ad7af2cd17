"""What context-sweep and recl share: long texts with facts at spread distances, and their
losses at a sweep of visible-history lengths.

A sweep text is one document of `max_context + window + 1` tokens (more when `max_context` is
too short for the facts) whose last `window` tokens are scored: its `facts` queries sit at the
end of that window (their answer tokens are the `answer` targets), every fact stated earlier at
a distance drawn log-uniformly from one stratum each of [8 · facts + 4, max_context − 16] (so
that every fact precedes the block of queries); filler tokens of the window, evenly spaced, are
the `ordinary` targets (local grammar and topic). Every scored token has at least `max_context` tokens of its own document before it, so
truncating its history to c ≤ max_context tokens is exact truncation, never the document start.

The texts are drawn by the run's texts (`Texts.sweep_text`, probes/texts/): synth ids, real
text, or synth text mapped to a model's own tokens, where the facts' distances are drawn in model
tokens and converted to synth words (`Texts.synth_length`), the window is the model tokens of its
words, the answer targets every model token of the answers, the ordinary targets evenly spaced
among the model tokens of the window's filler, each answer token's distance measured in model
tokens. The lead there still has `max_context` synth words, so at least as many model tokens;
texts of unequal lengths are padded to one after their last scored token (`padded`).

`truncated(model, texts, c)`: every target predicted from exactly c previous tokens (the
recompute evaluator with window c, via the LossModel's `score_window`); `streaming(model, texts,
geometry, c)`: the streaming evaluator with mem_len c (which sees further through layered reach).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from probes.api.model import score_rows, score_truncated
from probes.api.params import increasing_ints
from probes.api.probe_base import ProbeInputError, RunContext
from synth import rng as rnd

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

    texts = ctx.texts
    query = texts.query_length  # tokens of one query (on real text an English query's)
    lo = max(MIN_FACT_DISTANCE, query * facts + 4)  # every fact before the block of queries
    hi = max(lo, max_context - 16)
    length = max(max_context, hi + 16) + window + 1
    if window < query * facts + 4:
        raise ProbeInputError(
            f"--window {window} cannot hold {facts} queries ({query} tokens each) and some "
            f"filler; use --window {query * facts + 8} or fewer --facts"
        )
    out = []
    edges = np.geomspace(lo, hi + 1, facts + 1)
    for _ in range(n):
        dists = []
        for k in range(facts):
            lo_k, hi_k = math.log(edges[k]), math.log(edges[k + 1])
            d = int(math.exp(lo_k + (hi_k - lo_k) * rng.random()))
            dists.append(min(max(d, lo), hi))
        order = rnd.permutation(rng, facts)
        dists = [texts.synth_length(dists[i], lo) for i in order]
        try:
            text = texts.sweep_text(rng, dists, length, length - window, ordinary)
        except ValueError as e:
            raise ProbeInputError(f"cannot build a sweep text: {e}") from None
        if text is None:
            ctx.unmatched += 1
        else:
            out.append(text)
    ctx.require_matched("context-sweep", len(out))
    return padded(out, ctx.pad_id)


def evenly(positions: np.ndarray, k: int) -> np.ndarray:
    """`k` of the positions, evenly spaced (0, or k at least their number: all of them)."""
    if 0 < k < len(positions):
        pick = np.unique(np.linspace(0, len(positions) - 1, k).round().astype(int))
        return positions[pick]
    return positions


def example_sweep_text(ex, start: int, ordinary: int) -> SweepText:
    """A drawn example (synth.example.Example) in the model's tokens as a sweep text scored from
    `start` on: its answer tokens there, `ordinary` of its filler tokens there (`evenly`)."""
    keep = ex.targets >= start
    dist = np.concatenate([ex.distance(q) + np.arange(len(q.answer)) for q in ex.queries])
    filler = np.flatnonzero(ex.filler_mask())
    picked = evenly(filler[filler >= start], ordinary)
    return SweepText(ex.tokens, ex.doc_ids, ex.targets[keep], picked, dist[keep])


def padded(texts: list[SweepText], pad: int) -> list[SweepText]:
    """Texts of one length: each shorter one (through the bridge) ends in pad tokens (a document
    of their own, after every scored token, so no score depends on them)."""
    n = max(len(t.tokens) for t in texts)
    out = []
    for t in texts:
        k = n - len(t.tokens)
        if k == 0:
            out.append(t)
            continue
        tokens = np.r_[t.tokens, np.full(k, pad, dtype=np.int64)]
        docs = np.r_[t.doc_ids, np.full(k, int(t.doc_ids[-1]) + 1, dtype=np.int64)]
        out.append(replace(t, tokens=tokens, doc_ids=docs))
    return out


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
