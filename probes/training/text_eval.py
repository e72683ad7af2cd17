"""Held-out evaluation of a model trained on text (`probe train --text`): NLL and recall.

The callback `(model, step) -> dict` that `txl.train.train` calls every `eval_every` steps:

- `nll`: mean NLL per token of the held-out slice (documents never in the stream), read as
  `nll_rows` rows of `nll_segments` segments of tgt_len tokens, the documents one after the
  other, each opened by `<eod>`;
- `haystack_nll` (training on `--text default` only): the same on the default corpus's
  haystack documents, the text `--haystack default` builds probes from;
- `recall` (with facts mixed in): per distance bucket [lo, hi], `n` English fact documents in
  held-out filler (`synth.text.facts.fact_text`, each query's answer a distance drawn uniformly
  from the bucket after its fact), `acc` (every answer token the argmax), its Wilson interval and
  the mean answer NLL; `recall_acc` over all of them.

Scoring goes through the probes' own door, as for the synthetic language
(`probes.training.recall_eval.loss_model`). Configured by the `eval` table: n_examples, edges,
nll_rows, nll_segments, seed.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from probes.training.recall_eval import loss_model, wilson
from synth import rng as rnd
from synth.text.facts import fact_text
from synth.text.haystack import Haystack, HaystackError
from synth.text.world import TextWorld

NAMESPACE = "text-eval"


@dataclass(frozen=True)
class TextEvalConfig:
    n_examples: int = 16
    edges: tuple[int, ...] = ()  # () = from the shortest distance the text allows, doubling
    nll_rows: int = 8
    nll_segments: int = 4
    seed: int = 0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TextEvalConfig:
        known = ("n_examples", "edges", "nll_rows", "nll_segments", "seed")
        for k, v in data.items():
            if k not in known:
                raise ValueError(
                    f"unknown config key 'eval.{k}' for text; known: {', '.join(known)}"
                )
            ok = (
                isinstance(v, list | tuple) and all(isinstance(x, int) for x in v)
                if k == "edges"
                else isinstance(v, int)
                and not isinstance(v, bool)
                and v >= (0 if k == "seed" else 1)
            )
            if not ok:
                raise ValueError(f"bad value for eval.{k}: {v!r}")
        cfg = cls(**{k: tuple(v) if k == "edges" else v for k, v in data.items()})
        e = cfg.edges
        if e and (len(e) < 2 or any(a >= b for a, b in itertools.pairwise(e))):
            raise ValueError(
                f"bad value for eval.edges: {list(e)!r}; expected increasing distances"
            )
        return cfg


def stream_rows(docs, eod: int, rows: int, length: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Up to `rows` rows of `length` tokens of the documents one after the other (each opened
    by `eod`), cut from their concatenation; None when not even one row fits."""
    parts, ids = [], []
    for i in range(len(docs)):
        body = docs.doc(i)
        parts.append(np.r_[eod, body])
        ids.append(np.full(len(body) + 1, i, dtype=np.int64))
    if not parts:
        return None
    tokens, doc_ids = np.concatenate(parts), np.concatenate(ids)
    n = min(rows, len(tokens) // length)
    if n == 0:
        return None
    return tokens[: n * length].reshape(n, length), doc_ids[: n * length].reshape(n, length)


def make_text_eval(data, model_config, eval_table: Mapping[str, Any]):
    """The evaluation callback of a run on text (module docstring); ValueError (one line) for a
    bad `eval` table or a held-out slice too small for what it must hold."""

    cfg = TextEvalConfig.from_dict(eval_table)
    tgt = model_config.tgt_len
    length = cfg.nll_segments * tgt + 1
    eod = data.vocab.eod_id
    rows = {"nll": stream_rows(data.heldout, eod, cfg.nll_rows, length)}
    if rows["nll"] is None:
        raise ValueError(
            f"the held-out slice holds fewer than {length} tokens; raise data.text.heldout or "
            "lower eval.nll_segments"
        )
    if data.haystack is not None:
        rows["haystack_nll"] = stream_rows(data.haystack, eod, cfg.nll_rows, length)
    buckets = []
    if float(data.table["facts"]) > 0:
        try:
            world = TextWorld(data.tokenizer, Haystack.build(data.heldout_corpus, data.tokenizer))
        except HaystackError as e:
            raise ValueError(f"the recall evaluation: {e}") from None
        span = tgt + model_config.mem_len
        lowest = world.min_distance
        edges = cfg.edges or tuple(
            sorted({lowest, *(d for d in (32, 64, 128, 256, 512, span) if d > lowest + 8)})
        )
        rng = rnd.make_rng(cfg.seed, NAMESPACE)
        try:
            for lo, hi in itertools.pairwise(edges):
                exs = [
                    fact_text(world, rng, [rnd.randrange(rng, lo, hi)], lead=8, length=hi + 64)
                    for _ in range(cfg.n_examples)
                ]
                buckets.append((lo, hi, exs))
        except ValueError as e:  # a held-out slice too small for the buckets' filler
            raise ValueError(
                f"the recall evaluation on the held-out slice: {e} (raise data.text.heldout, or "
                "give shorter eval.edges)"
            ) from None

    def evaluate(model, step: int) -> dict[str, Any]:
        lm = loss_model(model, f"step-{step}")
        geometry = lm.default_geometry()
        out: dict[str, Any] = {}
        for name, r in rows.items():
            if r is None:
                continue
            scored = np.ones(r[0].shape, dtype=bool)
            scored[:, 0] = False
            out[name] = float(lm.score(r[0], r[1], scored, geometry).nll[scored].mean())
        if buckets:
            table, hits, total = [], 0, 0
            for lo, hi, exs in buckets:
                tokens = np.stack([e.tokens for e in exs])
                doc_ids = np.stack([e.doc_ids for e in exs])
                scored = np.zeros(tokens.shape, dtype=bool)
                for i, e in enumerate(exs):
                    scored[i, e.targets] = True
                s = lm.score(tokens, doc_ids, scored, geometry)
                correct = [bool(s.correct[i, e.targets].all()) for i, e in enumerate(exs)]
                k, n = sum(correct), len(correct)
                hits, total = hits + k, total + n
                table.append(
                    {
                        "lo": lo,
                        "hi": hi,
                        "n": n,
                        "acc": k / n,
                        "acc_ci95": list(wilson(k, n)),
                        "answer_nll": float(
                            np.mean([s.nll[i, e.targets].mean() for i, e in enumerate(exs)])
                        ),
                    }
                )
            out["recall"] = table
            out["recall_acc"] = hits / total
            out["recall_by_distance"] = " ".join(f"{r['lo']}:{r['acc']:.2f}" for r in table)
        return out

    return evaluate
