"""Rows to score and the batching loop every probe shares.

`Rows` collects the texts of one scoring call: each row's tokens, doc ids, the positions to
score, and optionally the row it forks from (`parent`) and how many leading tokens the two share
(`shared`), so a model with `score_shared` computes a common prefix once. `arrays()` pads them
into one (R, N) batch (padding: the pad token, doc id −1, nothing scored).

`score_batches` is the loop: items (pairs, texts) in a given order, as many per scoring call as
the model's `max_rows` allows for the rows each item needs, one sample line per item appended as
the run goes, each call's results kept in the run directory until it finishes (a resumed run
takes a kept call back instead of scoring it: probes/framework/scored_chunks.py), and the
progress bar advanced per call. Under several processes
(txl.process_rank) the calls are the same chunks, dealt out to the ranks in turn and
gathered after each round.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from probes.api.model import max_rows
from txl.process_rank import ProcessRank


@dataclass
class Rows:
    tokens: list[np.ndarray] = field(default_factory=list)
    doc_ids: list[np.ndarray] = field(default_factory=list)
    positions: list[np.ndarray] = field(default_factory=list)
    parent: list[int] = field(default_factory=list)
    shared: list[int] = field(default_factory=list)

    def mark(self, row: int, scored) -> None:
        self.positions[row][np.asarray(scored, dtype=np.int64)] = True

    def add(self, tokens, doc_ids, scored, parent=-1, shared=0) -> int:
        pos = np.zeros(len(tokens), dtype=bool)
        pos[np.asarray(scored, dtype=np.int64)] = True
        self.tokens.append(np.asarray(tokens, dtype=np.int64))
        self.doc_ids.append(np.asarray(doc_ids, dtype=np.int64))
        self.positions.append(pos)
        self.parent.append(parent)
        self.shared.append(shared)
        return len(self.tokens) - 1

    def arrays(self, pad_id: int):
        n = max(len(t) for t in self.tokens)
        R = len(self.tokens)
        tokens = np.full((R, n), pad_id, dtype=np.int64)
        docs = np.full((R, n), -1, dtype=np.int64)
        pos = np.zeros((R, n), dtype=bool)
        for r, (t, d, p) in enumerate(zip(self.tokens, self.doc_ids, self.positions, strict=True)):
            tokens[r, : len(t)] = t
            docs[r, : len(d)] = d
            pos[r, : len(p)] = p
        return tokens, docs, pos, np.array(self.parent), np.array(self.shared)


def first_difference(a_tok, a_doc, b_tok, b_doc) -> int:
    """The first position where two texts differ in a token or a doc id (the shorter length
    when one is a prefix of the other)."""
    n = min(len(a_tok), len(b_tok))
    diff = np.flatnonzero((a_tok[:n] != b_tok[:n]) | (a_doc[:n] != b_doc[:n]))
    return int(diff[0]) if diff.size else n


ScoreChunk = Callable[[Sequence[int]], Iterable[tuple[dict[str, Any], Any]]]


# Work (tokens, for the probes that state it) of one scoring call at most, unless one group of
# items alone is more: a call is what the progress display and samples.jsonl advance by, and
# sixteen pairs of 32 K-token texts in one call were an hour of silence on a CPU. Texts up to
# 8 K tokens (16 pairs a call) stay one call, as they were.
CHUNK_WORK = 2**18


def chunked(
    order: Sequence[int],
    per_call: int,
    costs: Sequence[float] | None,
    keys: Sequence[Any] | None = None,
) -> list:
    """`order` cut into scoring calls of at most `per_call` items and, given the items' costs,
    at most CHUNK_WORK of work each — a cut for work only where `keys` changes (consecutive
    items of one key, such as variants of one base that share its forward, stay together; a
    group costlier than CHUNK_WORK goes alone)."""
    chunks: list[Sequence[int]] = []
    start, held = 0, 0.0
    for k in range(len(order)):
        if k > start and k - start == per_call:
            chunks.append(order[start:k])
            start, held = k, 0.0
        if costs is None:
            continue
        if k > start and (keys is None or keys[k] != keys[k - 1]):  # a group starts at k
            group = k + 1
            while keys is not None and group < len(order) and keys[group] == keys[k]:
                group += 1
            if held + sum(costs[k:group]) > CHUNK_WORK:
                chunks.append(order[start:k])
                start, held = k, 0.0
        held += costs[k]
    if start < len(order):
        chunks.append(order[start:])
    return chunks


def score_batches(
    ctx,
    order: Sequence[int],
    rows_per_item: int,
    description: str,
    score_chunk: ScoreChunk,
    work: Callable[[int], float] | None = None,
    together: Callable[[int], Any] | None = None,
) -> tuple[list[dict], list[Any]]:
    """Score items in `order`, as many per call as fit (`rows_per_item` rows each; `work(i)`:
    what item i costs, for the progress display's time left and the size of a call, `chunked`;
    `together(i)`: consecutive items of one key are not cut apart for work):
    `score_chunk(items)` scores them and yields (record, extra) per item, in the items' order.
    Returns records and extras indexed by item; each record is appended to samples.jsonl as
    soon as its chunk is scored (its round, under several ranks: chunk c is rank c mod N's, and
    every rank gets every chunk's results, in chunk order)."""

    ranks = ctx.ranks or ProcessRank()
    per_call = max(1, max_rows(ctx.model, ctx.geometry) // rows_per_item)
    costs = [work(i) for i in order] if work is not None else None
    keys = [together(i) for i in order] if together is not None else None
    chunks = [list(c) for c in chunked(order, per_call, costs, keys)]
    call = ctx.scoring_calls
    ctx.scoring_calls += 1
    n = max(order, default=-1) + 1
    records: list[dict] = [{}] * n
    extras: list[Any] = [None] * n
    with ctx.steps(len(order), description, costs) as advance:
        for first in range(0, len(chunks), ranks.world_size):
            this_round = chunks[first : first + ranks.world_size]
            mine = this_round[ranks.rank] if ranks.rank < len(this_round) else []
            name = chunk_name(call, first + ranks.rank)
            # a resumed run takes back what the interrupted one kept; a round's chunks are kept
            # together, after the gather, so a round is taken back whole or scored whole
            kept = ctx.kept_chunk(name, mine) if mine else None
            scored = kept or (list(score_chunk(mine)) if mine else [])
            for c, (items, results) in enumerate(
                zip(this_round, ranks.gather(scored), strict=False)
            ):
                ctx.keep_chunk(chunk_name(call, first + c), items, results)
                for i, (record, extra) in zip(items, results, strict=True):
                    records[i], extras[i] = record, extra
                    ctx.sample(record)
                advance(len(items), bool(kept))
    return records, extras


def chunk_name(call: int, chunk: int) -> str:
    """The file a run keeps chunk `chunk` of its scoring call `call` in (RunContext.keep_chunk)."""
    return f"{call:02d}-{chunk:05d}.npz"
