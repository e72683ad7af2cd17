"""The training stream on real text: endless `(tokens, doc_ids)` batches with the synthetic
stream's contract (`synth.stream`): each row one contiguous text, row r of a batch continuing
row r of the previous one, consecutive batches overlapping by one token, every document opened
by `<eod>` carrying its new doc id, `state_dict()` small JSON that `load_state_dict()` continues
token for token.

Sharding and order: rank k of W trains on the documents k, k + W, k + 2W, … (disjoint shards);
each row of a rank reads its shard in its own order, a fresh permutation every epoch, drawn
from `seed_sequence(seed, "text-train")` keyed by rank, row and epoch (raw uniforms only, as
everything in synth, so a seed gives the same stream on any machine). With `facts` > 0 a
document is given facts and queries (`synth.text.facts_mix`) with that probability, drawn
from its own generator keyed by (rank, row, epoch, index): a resumed stream realises every
document exactly as the first pass did. A row's state is where it stands: epoch, index in
the epoch's order, offset in the document, doc id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from synth import rng as rnd
from synth.text.facts_mix import FactMixer

STATE_VERSION = 1


@dataclass(frozen=True, eq=False)
class TokenizedDocs:
    """Documents as token ids, each word a piece tokenized on its own, and their word
    boundaries (what facts are inserted at)."""

    tokens: np.ndarray  # (total,) int32: every document's tokens, in order (no separators)
    starts: np.ndarray  # (D + 1,) offset of each document in `tokens`
    cuts: tuple[np.ndarray, ...]  # per document: token offsets of its word boundaries

    @classmethod
    def build(cls, texts: Sequence[str], tokenizer) -> TokenizedDocs:
        parts, starts, cuts = [], [0], []
        for text in texts:
            words = [" " + w for w in text.split(" ") if w]
            flat, lengths = tokenizer.encode_flat(words)  # in chunks: Encodings are heavy
            parts.append(flat)
            starts.append(starts[-1] + int(lengths.sum()))
            cuts.append(np.concatenate([[0], np.cumsum(lengths)]))
        tokens = np.concatenate(parts) if parts else np.zeros(0, np.int32)
        return cls(tokens, np.asarray(starts, dtype=np.int64), tuple(cuts))

    def __len__(self) -> int:
        return len(self.cuts)

    def doc(self, i: int) -> np.ndarray:
        return self.tokens[self.starts[i] : self.starts[i + 1]].astype(np.int64)

    @property
    def n_tokens(self) -> int:
        return int(self.starts[-1])


class _Row:
    """Where a row stands — epoch, index in that epoch's order, offset inside the document,
    its doc id — and the documents realised from there on."""

    __slots__ = ("buffer", "doc_id", "epoch", "index", "offset")

    def __init__(self, epoch: int, index: int, offset: int, doc_id: int):
        self.epoch, self.index, self.offset, self.doc_id = epoch, index, offset, doc_id
        self.buffer: list[np.ndarray] = []  # the current document and the ones after it


class TextStream:
    """Endless training batches of real text, shape (batch_size, tgt_len + 1) each."""

    def __init__(
        self,
        docs: TokenizedDocs,
        eod_id: int,
        *,
        batch_size: int = 32,
        tgt_len: int = 64,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        facts: float = 0.0,
        mixer: FactMixer | None = None,
        identity: dict[str, Any] | None = None,
    ):
        if batch_size < 1 or tgt_len < 1:
            raise ValueError(f"batch_size and tgt_len must be >= 1, got {batch_size}, {tgt_len}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in 0..world_size-1, got rank {rank} of {world_size}")
        if not 0.0 <= facts <= 1.0 or (facts > 0 and mixer is None):
            raise ValueError(f"facts is a probability (with a FactMixer when > 0), got {facts}")
        self.shard = np.arange(rank, len(docs), world_size, dtype=np.int64)
        if len(self.shard) == 0:
            raise ValueError(
                f"rank {rank} of {world_size} gets no document: the corpus has {len(docs)}"
            )
        self.docs, self.eod_id = docs, int(eod_id)
        self.batch_size, self.tgt_len = int(batch_size), int(tgt_len)
        self.seed, self.rank, self.world_size = int(seed), int(rank), int(world_size)
        self.facts, self.mixer = float(facts), mixer
        self.identity = dict(identity or {})
        self._rows = [_Row(0, 0, 0, 0) for _ in range(self.batch_size)]
        self._orders: dict[tuple[int, int], np.ndarray] = {}
        self.batches = 0

    @property
    def tokens_per_batch(self) -> int:
        return self.batch_size * self.tgt_len

    def _rng(self, *path: int | str) -> np.random.Generator:
        ss = rnd.seed_sequence(self.seed, "text-train")
        return rnd.make_rng(np.random.SeedSequence([*ss.entropy, *(rnd.key(p) for p in path)]))

    def _order(self, row: int, epoch: int) -> np.ndarray:
        """Row `row`'s order of the shard in `epoch` (the last two epochs of a row kept)."""
        key = (row, epoch)
        if key not in self._orders:
            self._orders.pop((row, epoch - 2), None)
            g = self._rng("order", self.rank, row, epoch)
            self._orders[key] = self.shard[rnd.permutation(g, len(self.shard))]
        return self._orders[key]

    def _realise(self, row: int, epoch: int, index: int) -> np.ndarray:
        """Document `index` of row `row`'s epoch `epoch`, opened by `<eod>` (facts mixed in)."""
        d = int(self._order(row, epoch)[index])
        body = self.docs.doc(d)
        if self.facts > 0:
            g = self._rng("facts", self.rank, row, epoch, index)
            if g.random() < self.facts:
                body = self.mixer.insert(g, body, self.docs.cuts[d])
        return np.concatenate([[self.eod_id], body]).astype(np.int64)

    def _next(self, epoch: int, index: int) -> tuple[int, int]:
        return (epoch + 1, 0) if index + 1 == len(self.shard) else (epoch, index + 1)

    def next_batch(self) -> tuple[np.ndarray, np.ndarray]:
        """(tokens, doc_ids), each (batch_size, tgt_len + 1) int64."""
        need = self.tgt_len + 1
        tokens = np.empty((self.batch_size, need), dtype=np.int64)
        doc_ids = np.empty((self.batch_size, need), dtype=np.int64)
        for r, row in enumerate(self._rows):
            if not row.buffer:
                row.buffer = [self._realise(r, row.epoch, row.index)]
            at = (row.epoch, row.index)
            for _ in row.buffer[1:]:
                at = self._next(*at)
            while sum(len(t) for t in row.buffer) - row.offset < need:
                at = self._next(*at)
                row.buffer.append(self._realise(r, *at))
            toks = np.concatenate(row.buffer)
            ids = np.concatenate(
                [np.full(len(t), row.doc_id + k, dtype=np.int64) for k, t in enumerate(row.buffer)]
            )
            tokens[r] = toks[row.offset : row.offset + need]
            doc_ids[r] = ids[row.offset : row.offset + need]
            row.offset += self.tgt_len
            while row.offset >= len(row.buffer[0]):  # documents wholly behind the row: dropped
                row.offset -= len(row.buffer.pop(0))
                row.doc_id += 1
                row.epoch, row.index = self._next(row.epoch, row.index)
        self.batches += 1
        return tokens, doc_ids

    # ---------------------------------------------------------------- state

    def _header(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "kind": "text",
            "seed": self.seed,
            "rank": self.rank,
            "world_size": self.world_size,
            "batch_size": self.batch_size,
            "tgt_len": self.tgt_len,
            "facts": self.facts,
            **self.identity,
        }

    def state_dict(self) -> dict[str, Any]:
        rows = [
            {"epoch": r.epoch, "index": r.index, "offset": r.offset, "doc_id": r.doc_id}
            for r in self._rows
        ]
        return {**self._header(), "batches": self.batches, "rows": rows}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key, value in self._header().items():
            if state.get(key) != value:
                raise ValueError(
                    f"stream state does not match this stream: {key} is {state.get(key)!r} in the "
                    f"state, {value!r} here"
                )
        if len(state["rows"]) != self.batch_size:
            raise ValueError(
                f"stream state has {len(state['rows'])} rows, expected {self.batch_size}"
            )
        self._rows = [
            _Row(int(r["epoch"]), int(r["index"]), int(r["offset"]), int(r["doc_id"]))
            for r in state["rows"]
        ]
        self.batches = int(state["batches"])
