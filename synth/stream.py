"""The training stream: endless `(tokens, doc_ids)` batches, each row one contiguous text.

Row r of every batch continues row r of the previous batch, and consecutive batches overlap by one
token (the last target of a batch is the first input of the next), so a Transformer-XL's memory
carries from step to step. Every document opens with `<eod>`, which carries the new document's id.

Determinism: each row draws its documents from its own PCG64 generator, seeded by
`seed_sequence(seed, "train").spawn(world_size)[rank].spawn(batch_size)[row]`, using raw uniforms
only; so a seed gives the same stream on any machine and ranks give unrelated (disjoint) streams.
`state_dict()` is small JSON (each row's generator state at its oldest buffered document, how many
documents to regenerate and where the row stands in them); `load_state_dict()` regenerates the
buffered documents and continues exactly.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from synth import rng as rnd
from synth.documents import (
    DocPlan,
    plan_bursty,
    plan_corpus,
    plan_local,
    plan_repeat,
    plan_sparse,
    realize,
)
from synth.fields import from_fields
from synth.language import Language

STATE_VERSION = 1
_REFILL_TOKENS = (
    16384  # tokens planned per needy row per refill round (speed only; the stream is the same)
)


@dataclass(frozen=True)
class StreamConfig:
    """What the training text is made of.

    The mixture weights are shares of the stream's *tokens* (normalised; documents of each kind are
    drawn with probability ∝ weight / mean length of that kind), so p_bursty=0.5 means about half of
    every batch is bursty text whatever the document lengths."""

    # mixture of document kinds (token shares)
    p_corpus: float = 0.5  # topic filler + facts, queries, updates, distractors
    p_bursty: float = 0.25  # in-context bigrams: 8 entity→value pairs repeated in random order
    p_sparse: float = 0.25  # facts in the first half, queries in the second, random filler
    p_local: float = 0.0  # local-only sentences (no long-range dependency)
    # corpus documents
    doc_len: tuple[int, int] = (
        128,
        1024,
    )  # tokens, uniform, `<eod>` included (also for local docs)
    facts_per_doc: tuple[int, int] = (2, 8)  # uniform
    query_prob: float = 0.9  # a fact is queried later in its document
    # fact → answer distance: bins (lo, hi, weight), uniform inside a bin; distances that do not fit
    # the document are dropped (the fact then stands unqueried), so keep doc_len above the far bins
    distance_bins: tuple[tuple[int, int, float], ...] = (
        (6, 64, 0.4),
        (64, 256, 0.4),
        (256, 896, 0.2),
    )
    update_rate: float = 0.1  # a queried fact is restated with a new value before its query
    distractor_rate: float = 0.2  # a queried fact's entity gets another attribute stated
    # bursty documents
    bursty_len: tuple[int, int] = (64, 512)
    bursty_pairs: int = 8
    bursty_gap: int = 0  # up to this many random filler words between pairs
    # share of bursty documents written "ENTITY is VALUE" (the spacing of a fact)
    # instead of "ENTITY VALUE"; never during the curriculum below
    bursty_sep: float = 0.0
    # share of bursty documents whose pairs are a fact and its queries: a key's first pair reads
    # "ENTITY is VALUE", its repeats "ENTITY VALUE" (a model that stores a pair when it reads the
    # value, as a recurrent state does, learns there to store a fact's value under the key two
    # tokens back); also during the curriculum
    bursty_statement: float = 0.0
    # curriculum: every document that starts within the first `bursty_first` tokens of a row is a
    # plain bursty one (the in-context lookup forms fastest on adjacent pairs), then the mixture
    # begins; a row's step at tgt_len T is its token position / T
    bursty_first: int = 0
    # an earlier stage: every document that starts within the first `repeat_first` tokens of a row
    # repeats a random span of words (`repeat_len` tokens in all). Copying a span forms the two-layer
    # lookup (a previous-token head and a head that matches it) within ~100 updates in models whose
    # position term is rotary, where bursty pairs alone did not form it in 10,000 (presets,
    # "tiny-window"); 0 (the default) skips the stage
    repeat_first: int = 0
    repeat_len: tuple[int, int] = (64, 64)
    # sparse documents
    sparse_facts: int = 6
    sparse_len: int | None = None  # None: 2 × tgt_len (facts in segment 1, queries in segment 2)
    sparse_filler: str = "random"  # "random" (i.i.d. filler words) or "markov" (topic filler)
    # local documents
    sentence_len: tuple[int, int] = (4, 12)
    disjoint_entities: bool = False  # train on 80 % of the entities, leave 20 % to probes

    def __post_init__(self) -> None:
        for name in ("doc_len", "facts_per_doc", "bursty_len", "sentence_len", "repeat_len"):
            object.__setattr__(self, name, tuple(int(x) for x in getattr(self, name)))
        object.__setattr__(
            self,
            "distance_bins",
            tuple((int(a), int(b), float(w)) for a, b, w in self.distance_bins),
        )
        weights = (self.p_corpus, self.p_bursty, self.p_sparse, self.p_local)
        if min(weights) < 0 or sum(weights) <= 0:
            raise ValueError(f"mixture weights must be >= 0 and not all 0, got {weights}")
        for name in ("doc_len", "facts_per_doc", "bursty_len", "sentence_len", "repeat_len"):
            lo, hi = getattr(self, name)
            if not 0 <= lo <= hi:
                raise ValueError(
                    f"StreamConfig.{name} must be (lo, hi) with 0 <= lo <= hi, got {(lo, hi)}"
                )
        if self.doc_len[0] < 2 or self.bursty_len[0] < 4 or self.sentence_len[0] < 1:
            raise ValueError("documents need doc_len >= 2, bursty_len >= 4 and sentence_len >= 1")
        if self.repeat_len[0] < 3:
            raise ValueError(
                f"repeat_len must be >= 3 tokens (<eod> and a word twice), got {self.repeat_len}"
            )
        for lo, hi, w in self.distance_bins:
            if not 6 <= lo <= hi or w < 0:
                raise ValueError(f"distance bin {(lo, hi, w)}: need 6 <= lo <= hi and weight >= 0")
        if not self.distance_bins or sum(w for *_, w in self.distance_bins) <= 0:
            raise ValueError("distance_bins needs at least one bin with positive weight")
        for name in (
            "query_prob",
            "update_rate",
            "distractor_rate",
            "bursty_sep",
            "bursty_statement",
        ):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(
                    f"StreamConfig.{name} must be a probability, got {getattr(self, name)}"
                )
        if self.sparse_filler not in ("random", "markov"):
            raise ValueError(
                f"sparse_filler must be 'random' or 'markov', got {self.sparse_filler!r}"
            )
        if self.bursty_pairs < 1 or self.bursty_gap < 0 or self.sparse_facts < 0:
            raise ValueError("need bursty_pairs >= 1, bursty_gap >= 0, sparse_facts >= 0")
        for name in ("bursty_first", "repeat_first"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 tokens, got {getattr(self, name)}")
        if self.sparse_len is not None and self.sparse_len < 16:
            raise ValueError(f"sparse_len must be >= 16 or None, got {self.sparse_len}")

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        return {
            k: [list(x) for x in v]
            if k == "distance_bins"
            else (list(v) if isinstance(v, tuple) else v)
            for k, v in d.items()
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StreamConfig:
        return from_fields(cls, d)


@dataclass(frozen=True)
class StreamBatch:
    """One batch with what each token is: `target_kind` (0 none, 1 fact answer, 2 answer after an
    update, 3 bursty value, 4 sparse-fact answer; names in `synth.documents.KIND_NAMES`) and
    `target_distance` (the distance of the token's query, from the stating token to the first answer
    token; −1 elsewhere)."""

    tokens: np.ndarray  # (B, tgt_len + 1) int64
    doc_ids: np.ndarray  # (B, tgt_len + 1) int64
    target_kind: np.ndarray  # (B, tgt_len + 1) int8
    target_distance: np.ndarray  # (B, tgt_len + 1) int32


class _Row:
    __slots__ = ("dist", "doc_id", "doc_ids", "docs", "kind", "pos", "rng", "start", "tokens")

    def __init__(self, rng: np.random.Generator, doc_id: int = 0, start: int = 0):
        self.rng = rng
        self.start = start  # position in the row's whole stream of tokens[0] (earlier ones dropped)
        self.tokens = np.zeros(0, dtype=np.int64)
        self.doc_ids = np.zeros(0, dtype=np.int64)
        self.kind = np.zeros(0, dtype=np.int8)
        self.dist = np.zeros(0, dtype=np.int32)
        self.pos = 0  # first token of the next batch row
        self.docs: list[
            tuple[int, int, dict[str, Any], int]
        ] = []  # (start, end, rng state, doc id)
        self.doc_id = doc_id  # id of the next document


class TrainStream:
    """Endless training batches of (tokens, doc_ids), shape (batch_size, tgt_len + 1) each."""

    def __init__(
        self,
        lang: Language,
        config: StreamConfig | None = None,
        batch_size: int = 32,
        tgt_len: int = 64,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ):
        if batch_size < 1 or tgt_len < 1:
            raise ValueError(f"batch_size and tgt_len must be >= 1, got {batch_size}, {tgt_len}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in 0..world_size-1, got rank {rank} of {world_size}")
        self.lang = lang
        self.config = config or StreamConfig()
        self.batch_size, self.tgt_len = int(batch_size), int(tgt_len)
        self.seed, self.rank, self.world_size = int(seed), int(rank), int(world_size)
        c = self.config
        self._pool = lang.entity_pool("train", c.disjoint_entities)
        self._sparse_len = c.sparse_len or 2 * self.tgt_len
        mean_len = [sum(c.doc_len) / 2, sum(c.bursty_len) / 2, self._sparse_len, sum(c.doc_len) / 2]
        shares = [c.p_corpus, c.p_bursty, c.p_sparse, c.p_local]
        self._kind_cum = rnd.cumulative([w / m for w, m in zip(shares, mean_len, strict=True)])
        shard = rnd.seed_sequence(self.seed, "train").spawn(self.world_size)[self.rank]
        self._rows = [_Row(rnd.make_rng(ss)) for ss in shard.spawn(self.batch_size)]
        self.batches = 0

    @property
    def tokens_per_batch(self) -> int:
        """New tokens per batch (the one-token overlap not counted)."""
        return self.batch_size * self.tgt_len

    def next_batch(self) -> tuple[np.ndarray, np.ndarray]:
        """(tokens, doc_ids), each (batch_size, tgt_len + 1) int64."""
        b = self.next_annotated_batch()
        return b.tokens, b.doc_ids

    def next_annotated_batch(self) -> StreamBatch:
        """The next batch with its target annotations (same stream as `next_batch`)."""
        need = self.tgt_len + 1
        self._fill(need)
        B = self.batch_size
        tokens = np.empty((B, need), dtype=np.int64)
        doc_ids = np.empty((B, need), dtype=np.int64)
        kind = np.empty((B, need), dtype=np.int8)
        dist = np.empty((B, need), dtype=np.int32)
        for r, row in enumerate(self._rows):
            p = row.pos
            tokens[r] = row.tokens[p : p + need]
            doc_ids[r] = row.doc_ids[p : p + need]
            kind[r] = row.kind[p : p + need]
            dist[r] = row.dist[p : p + need]
            row.pos = p + self.tgt_len
        self.batches += 1
        return StreamBatch(tokens, doc_ids, kind, dist)

    # ---------------------------------------------------------------- generation

    def _plan(self, row: _Row, at: int) -> DocPlan:
        """The next document of `row`, which starts at position `at` of the row's stream."""
        g, c = row.rng, self.config
        if at < c.repeat_first:
            return plan_repeat(self.lang, g, c)
        if at < c.bursty_first:
            return plan_bursty(self.lang, g, c, self._pool, statement=self._statement(g))
        k = rnd.categorical(g, self._kind_cum)
        if k == 0:
            return plan_corpus(self.lang, g, c, self._pool)
        if k == 1:  # (no draw at share 0 or 1: streams without the option stay as they were)
            sep = c.bursty_sep == 1 or (0 < c.bursty_sep and g.random() < c.bursty_sep)
            statement = not sep and self._statement(g)
            return plan_bursty(self.lang, g, c, self._pool, sep, statement)
        if k == 2:
            return plan_sparse(self.lang, g, c, self._pool, self._sparse_len)
        return plan_local(self.lang, g, c)

    def _statement(self, g: np.random.Generator) -> bool:
        """Whether a bursty document is a fact and its queries (no draw at share 0 or 1)."""
        share = self.config.bursty_statement
        return share == 1 or (0 < share and g.random() < share)

    def _generate(self, rows: list[_Row], counts: list[int] | None = None) -> None:
        """Plan documents for `rows` (until each has _REFILL_TOKENS new tokens, or exactly counts[i]
        documents), realise their filler together, and append them to the rows' buffers."""
        plans: list[list[tuple[DocPlan, dict[str, Any]]]] = []
        for i, row in enumerate(rows):
            mine, total, at = [], 0, row.start + len(row.tokens)
            while (counts is None and total < _REFILL_TOKENS) or (
                counts is not None and len(mine) < counts[i]
            ):
                state = rnd.state_to_json(row.rng)
                plan = self._plan(row, at + total)
                mine.append((plan, state))
                total += len(plan.tokens)
            plans.append(mine)
        realize(self.lang, [p for mine in plans for p, _ in mine])
        for row, mine in zip(rows, plans, strict=True):
            # drop documents wholly before the row's position, then append the new ones
            keep = [d for d in row.docs if d[1] > row.pos]
            cut = keep[0][0] if keep else row.pos
            cut = min(cut, row.pos)
            row.tokens, row.doc_ids = row.tokens[cut:], row.doc_ids[cut:]
            row.kind, row.dist = row.kind[cut:], row.dist[cut:]
            row.pos -= cut
            row.start += cut
            row.docs = [(s - cut, e - cut, st, i) for s, e, st, i in keep]
            start = len(row.tokens)
            toks, ids, kinds, dists = [row.tokens], [row.doc_ids], [row.kind], [row.dist]
            for plan, state in mine:
                n = len(plan.tokens)
                toks.append(plan.tokens)
                ids.append(np.full(n, row.doc_id, dtype=np.int64))
                kinds.append(plan.kind)
                dists.append(plan.dist)
                row.docs.append((start, start + n, state, row.doc_id))
                start += n
                row.doc_id += 1
            row.tokens, row.doc_ids = np.concatenate(toks), np.concatenate(ids)
            row.kind, row.dist = np.concatenate(kinds), np.concatenate(dists)

    def _fill(self, need: int) -> None:
        while True:
            needy = [row for row in self._rows if len(row.tokens) - row.pos < need]
            if not needy:
                return
            self._generate(needy)

    # ---------------------------------------------------------------- state

    def _header(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "seed": self.seed,
            "rank": self.rank,
            "world_size": self.world_size,
            "batch_size": self.batch_size,
            "tgt_len": self.tgt_len,
            "config": self.config.to_dict(),
            "language": self.lang.fingerprint,
        }

    def state_dict(self) -> dict[str, Any]:
        """JSON-serialisable state: restoring it continues this stream token for token."""
        rows = []
        for row in self._rows:
            keep = [d for d in row.docs if d[1] > row.pos]
            if keep:
                s, _, state, doc_id = keep[0]
                rows.append(
                    {
                        "rng": state,
                        "docs": len(keep),
                        "offset": row.pos - s,
                        "doc_id": doc_id,
                        "start": row.start + s,
                    }
                )
            else:
                rows.append(
                    {
                        "rng": rnd.state_to_json(row.rng),
                        "docs": 0,
                        "offset": 0,
                        "doc_id": row.doc_id,
                        "start": row.start + len(row.tokens),
                    }
                )
        return {**self._header(), "batches": self.batches, "rows": rows}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from `state_dict()` output; ValueError if it belongs to another stream setup."""
        mine = self._header()
        for key, value in mine.items():
            if state.get(key) != value:
                raise ValueError(
                    f"stream state does not match this stream: {key} is {state.get(key)!r} in the state, "
                    f"{value!r} here"
                )
        if len(state["rows"]) != self.batch_size:
            raise ValueError(
                f"stream state has {len(state['rows'])} rows, expected {self.batch_size}"
            )
        self._rows = [
            _Row(rnd.rng_from_json(r["rng"]), int(r["doc_id"]), int(r.get("start", 0)))
            for r in state["rows"]
        ]  # "start" is absent from states written before the curriculum existed (then unused)
        self._generate(self._rows, [int(r["docs"]) for r in state["rows"]])
        for row, r in zip(self._rows, state["rows"], strict=True):
            row.pos = int(r["offset"])
        self.batches = int(state["batches"])
