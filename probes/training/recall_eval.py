"""Held-out evaluation during training: NLL, filler NLL, and recall accuracy by distance.

`make_recall_eval` builds, once and deterministically, held-out synth text that the training
stream never shows (its own seed namespace), and returns the callback `(model, step) -> dict`
that `txl.train.train` calls every `eval_every` steps:

- `nll`: mean NLL per token of a held-out training-like stream (the stream's mixture, other seed);
- `filler_nll`: mean NLL on the filler tokens of the recall documents, beside `filler_entropy`
  (the filler language's true entropy rate: the floor of a model told the topic) and `filler_floor`
  (the Bayes-optimal NLL on the same tokens, topic inferred from the prefix: what a perfect model
  reading these documents reaches);
- `recall`: one entry per distance bucket [lo, hi): `n` queries whose fact lies a distance drawn
  uniformly from the bucket before the first answer token (docs/design.md, *Pairs, deltas and exact zeros*: from the fact's last token),
  `acc` (every answer token is the argmax under teacher forcing), its Wilson 95 % interval, the
  mean answer NLL, and where the bucket lies (`inside`: every distance of [lo, hi), up to hi − 1,
  is within the training attention span tgt + mem); `n_direct` of its queries have their fact in
  the first answer token's direct window (`probes.api.horizon`: mem_len + offset in the segment, so near
  the span's end it depends on where the answer falls in its segment) and `acc_direct` is the
  accuracy over those (None when there are none): recall of what the model can see;
- `recall_mem{M}`: the same documents with a longer evaluation memory M (`eval.mem_len`).

Scoring goes through the probes' own door (`loss_model`): `probes.adapters.txl.CachedTXL` (the
streaming evaluator) around a Transformer-XL in training, or the transformers adapter around a
transformers model (`full` for attention, `state` for a recurrent state) — no copy of the model,
its training flag left as found — with the model's own default geometry.
Configured by the training config's `eval` table: n_examples, edges, mem_len, extra_facts,
nll_rows, nll_segments, seed.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from probes.adapters.families import RECURRENT
from probes.adapters.hf_load import wrap as wrap_hf
from probes.adapters.txl import wrap
from probes.api.horizon import doc_starts
from probes.api.model import geometry as geometry_of
from probes.api.model import horizon as horizon_of
from probes.stats import wilson as wilson_interval
from synth import rng as rnd
from synth.example import Example
from synth.generate import MIN_DISTANCE, make_example
from synth.language import Language

NAMESPACE = "train-eval"  # apart from the training stream's and the probes' seeds


@dataclass(frozen=True)
class RecallEvalConfig:
    n_examples: int = 32  # queries per distance bucket
    edges: tuple[int, ...] = ()  # bucket edges; () = powers of two up to 2 × (tgt + mem)
    mem_len: int = 0  # > 0: also score with this evaluation memory (e.g. 640)
    extra_facts: int = 2  # unqueried facts in each recall document (the model must pick)
    nll_rows: int = 8  # held-out stream: rows ...
    nll_segments: int = 4  # ... × segments of tgt_len tokens
    seed: int = 0

    def __post_init__(self) -> None:
        for k in ("n_examples", "nll_rows", "nll_segments"):
            if getattr(self, k) < 1:
                raise ValueError(f"bad value for eval.{k}: {getattr(self, k)!r}; expected >= 1")
        for k in ("mem_len", "extra_facts", "seed"):
            if getattr(self, k) < 0:
                raise ValueError(f"bad value for eval.{k}: {getattr(self, k)!r}; expected >= 0")
        e = self.edges
        if e and (
            len(e) < 2 or e[0] < MIN_DISTANCE or any(a >= b for a, b in itertools.pairwise(e))
        ):
            raise ValueError(
                f"bad value for eval.edges: {list(e)!r}; expected increasing distances from "
                f"{MIN_DISTANCE}"
            )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RecallEvalConfig:
        known = {f.name: f for f in dataclasses.fields(cls)}
        for k, v in data.items():
            if k not in known:
                raise ValueError(f"unknown config key 'eval.{k}'; known: {', '.join(known)}")
            want = tuple if k == "edges" else int
            ok = (
                isinstance(v, list | tuple)
                and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
                if want is tuple
                else isinstance(v, int) and not isinstance(v, bool)
            )
            if not ok:
                right = "a list of integers" if want is tuple else "an integer"
                raise ValueError(f"bad value for eval.{k}: {v!r}; expected {right}")
        return cls(**{k: tuple(v) if k == "edges" else v for k, v in data.items()})


def default_edges(tgt_len: int, mem_len: int) -> tuple[int, ...]:
    """Powers of two from MIN_DISTANCE up to twice the training attention span, with the span
    itself as an edge, so that no bucket straddles it."""
    span = tgt_len + mem_len
    edges = {MIN_DISTANCE, span, 2 * span}
    p = 16
    while p < 2 * span:
        edges.add(p)
        p *= 2
    return tuple(sorted(edges))


def wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson score 95 % interval of a proportion k / n (`probes.stats.wilson`); with no
    observations, the whole of [0, 1]."""

    return wilson_interval(k, n) or (0.0, 1.0)


@dataclass
class _Bucket:
    lo: int
    hi: int
    tokens: np.ndarray  # (n, L)
    doc_ids: np.ndarray  # (n, L)
    answers: list[np.ndarray]  # per row: answer positions of its query
    distances: np.ndarray  # (n,) fact's last token → first answer token
    filler: np.ndarray  # (n, L) bool
    filler_floor: np.ndarray  # (n, L) Bayes-optimal NLL of each filler token (NaN elsewhere)


def _bucket(lang: Language, rng: np.random.Generator, lo: int, hi: int, cfg: RecallEvalConfig):
    length = hi + 32  # room for the longest distance of the bucket, its fact and its query
    rows: list[Example] = []
    for _ in range(cfg.n_examples):
        d = rnd.randrange(rng, lo, hi - 1)
        rows.append(make_example(lang, rng, [d], length=length, n_extra_facts=cfg.extra_facts))
    return _Bucket(
        lo,
        hi,
        np.stack([e.tokens for e in rows]),
        np.stack([e.doc_ids for e in rows]),
        [e.queries[0].answer.indices() for e in rows],
        np.array([e.distance(0) for e in rows]),
        np.stack([e.filler_mask() for e in rows]),
        np.stack([lang.filler_bayes_nll(e.tokens, e.doc_ids) for e in rows]),
    )


def _filler_scored(b: _Bucket) -> np.ndarray:
    """The filler tokens whose NLL `filler_nll` averages (not a row's first token)."""
    filler = b.filler.copy()
    filler[:, 0] = False
    return filler


def make_buckets(lang: Language, edges: tuple[int, ...], cfg: RecallEvalConfig) -> list[_Bucket]:
    """The held-out recall documents, one bucket per [edges[i], edges[i+1])."""
    rng = rnd.make_rng(cfg.seed, NAMESPACE)
    return [_bucket(lang, rng, lo, hi, cfg) for lo, hi in itertools.pairwise(edges)]


def loss_model(model: Any, model_id: str) -> Any:
    """The probes' adapter around a model in training, as it is: Transformer-XL's streaming
    evaluator, or for a transformers model (`hf_arch.SegmentLM`) its own evaluator (`full` for
    attention, `state` for a recurrent state)."""
    lm = getattr(model, "lm", None)
    if lm is None:
        return wrap(model, model_id=model_id, path="<in training>")

    raw = lm.config.to_dict()
    evaluator = "state" if raw["model_type"] in RECURRENT else "full"
    return wrap_hf(
        lm, raw, path=Path("<in training>"), sha256="", model_id=model_id, evaluator=evaluator
    )


def make_recall_eval(
    lang: Language,
    model_config: Any,  # txl.config.TXLConfig
    eval_table: Mapping[str, Any],
    heldout_stream: Callable[[int, int], Any] | None = None,
) -> Callable[[Any, int], dict[str, Any]]:
    """The evaluation callback. `heldout_stream(batch_size, seed)` builds a stream for the
    held-out NLL (None: no stream NLL). Raises ValueError on a bad `eval` table."""
    cfg = RecallEvalConfig.from_dict(eval_table)
    tgt, mem = model_config.tgt_len, model_config.mem_len
    edges = cfg.edges or default_edges(tgt, mem)
    buckets = make_buckets(lang, edges, cfg)

    held: tuple[np.ndarray, np.ndarray] | None = None
    if heldout_stream is not None:
        stream = heldout_stream(cfg.nll_rows, 1_000_003 + cfg.seed)
        parts = [stream.next_batch() for _ in range(cfg.nll_segments)]
        toks = np.concatenate([parts[0][0]] + [p[0][:, 1:] for p in parts[1:]], axis=1)
        docs = np.concatenate([parts[0][1]] + [p[1][:, 1:] for p in parts[1:]], axis=1)
        held = (toks, docs)
    entropy = float(lang.filler_entropy_rate())
    filler_masks = [_filler_scored(b) for b in buckets]  # fixed: built once, read every eval
    floor = float(
        sum(b.filler_floor[m].sum() for b, m in zip(buckets, filler_masks, strict=True))
        / max(sum(int(m.sum()) for m in filler_masks), 1)
    )

    def evaluate(model: Any, step: int) -> dict[str, Any]:

        lm = loss_model(model, f"step-{step}")
        geometry = lm.default_geometry()
        out: dict[str, Any] = {}
        if held is not None:
            scored = held[1] >= 0
            scored[:, 0] = False
            r = lm.score(held[0], held[1], scored, geometry)
            out["nll"] = float(r.nll[scored].mean())
        geometries = {"recall": geometry}
        if cfg.mem_len:
            geometries[f"recall_mem{cfg.mem_len}"] = geometry_of(lm, mem_len=cfg.mem_len)
        filler_sum, filler_n = 0.0, 0
        for name, geo in geometries.items():
            horizon = horizon_of(lm, geo)
            rows, hits, total, hits_direct, total_direct = [], 0, 0, 0, 0
            for b, filler in zip(buckets, filler_masks, strict=True):
                scored = filler.copy() if name == "recall" else np.zeros_like(filler)
                for i, a in enumerate(b.answers):
                    scored[i, a] = True
                r = lm.score(b.tokens, b.doc_ids, scored, geo)
                correct = [bool(r.correct[i, a].all()) for i, a in enumerate(b.answers)]
                nll = [float(r.nll[i, a].mean()) for i, a in enumerate(b.answers)]
                k, n = sum(correct), len(correct)
                direct = [
                    bool(d <= horizon.token(int(a[0]), int(doc_starts(b.doc_ids[i])[a[0]]))[0])
                    for i, (a, d) in enumerate(zip(b.answers, b.distances, strict=True))
                ]
                k_direct = sum(c for c, v in zip(correct, direct, strict=True) if v)
                hits, total = hits + k, total + n
                hits_direct, total_direct = hits_direct + k_direct, total_direct + sum(direct)
                rows.append(
                    {
                        "lo": b.lo,
                        "hi": b.hi,
                        "n": n,
                        "acc": k / n,
                        "acc_ci95": list(wilson(k, n)),
                        "answer_nll": float(np.mean(nll)),
                        "n_direct": sum(direct),
                        "acc_direct": k_direct / sum(direct) if any(direct) else None,
                        # distances lie in [lo, hi): the farthest is hi − 1
                        "inside": b.hi - 1 <= tgt + mem,
                    }
                )
                if name == "recall":
                    filler_sum += float(r.nll[filler].sum())
                    filler_n += int(filler.sum())
            out[name] = rows
            out[f"{name}_acc"] = hits / total
            out[f"{name}_direct_acc"] = hits_direct / total_direct if total_direct else None
            out[f"{name}_by_distance"] = " ".join(f"{r['lo']}:{r['acc']:.2f}" for r in rows)
        out["filler_nll"] = filler_sum / max(filler_n, 1)
        out["filler_entropy"] = entropy
        out["filler_floor"] = floor
        return out

    return evaluate
