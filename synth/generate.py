"""Base examples: facts and queries at exact distances in topic filler, and the local-only corpus.

`make_example` lays out one document (optionally after a neutral previous document): its queries at
the end, each query's fact exactly `distance` tokens before the query's first answer token, extra
unqueried facts anywhere, and topic filler everywhere else. Within an example, entities are distinct
and the values of all facts are token-disjoint; value tokens never occur in filler. So every answer
token occurs before its answer only inside its own fact's value (no accidental leak).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from synth import rng as rnd
from synth.example import Example, Fact, Query, Span
from synth.language import FACT_VALUE_OFFSET, QUERY_ANSWER_OFFSET, Language

MIN_DISTANCE = QUERY_ANSWER_OFFSET + 1  # a fact right before its query


def disjoint_values(
    lang: Language,
    rng: np.random.Generator,
    k: int,
    *,
    exclude: set[int] | frozenset[int] = frozenset(),
    length: int | None = None,
) -> list[tuple[int, ...]]:
    """k values sharing no token with each other nor with `exclude` (of `length` tokens if given)."""
    out: list[tuple[int, ...]] = []
    used = set(exclude)
    values = lang.values
    n = len(values)
    for _ in range(8 * k + 16):  # rejection sampling: cheap while few tokens are taken
        if len(out) == k:
            return out
        v = values[min(int(rng.random() * n), n - 1)]
        if (length is None or len(v) == length) and used.isdisjoint(v):
            out.append(v)
            used.update(v)
    if len(out) == k:
        return out
    for i in rnd.permutation(rng, n).tolist():  # then an exhaustive scan in random order
        v = values[i]
        if (length is None or len(v) == length) and used.isdisjoint(v):
            out.append(v)
            used.update(v)
            if len(out) == k:
                return out
    raise ValueError(
        f"cannot draw {k} token-disjoint values"
        + (f" of length {length}" if length is not None else "")
        + f" avoiding {len(exclude)} used tokens: the language has {len(lang.values)} values"
    )


def filler(
    lang: Language,
    rng: np.random.Generator,
    n: int,
    topic: int,
    prev_token: int | None = None,
) -> np.ndarray:
    """n filler token ids of `topic` (−1: topic-free), continuing from `prev_token` if it is filler."""
    prev = lang.filler_word(np.array([prev_token if prev_token is not None else -1]))
    words = lang.grammar.sample(np.array([topic]), rng.random((1, n)), prev)
    return lang.filler_tokens(words[0])


def assemble(
    lang: Language,
    rng: np.random.Generator,
    length: int,
    blocks: Sequence[tuple[int, np.ndarray]],
    topic: int,
) -> np.ndarray:
    """One document of `length` tokens: `<eod>`, the blocks at their starts, topic filler elsewhere.

    The filler is one Markov chain read left to right through the gaps (a block interrupts it)."""
    tokens = np.full(length, -1, dtype=np.int64)
    tokens[0] = lang.vocab.eod_id
    for start, toks in blocks:
        if (
            start < 1
            or start + len(toks) > length
            or (tokens[start : start + len(toks)] != -1).any()
        ):
            raise ValueError(
                f"block at {start} (+{len(toks)}) does not fit a {length}-token document"
            )
        tokens[start : start + len(toks)] = toks
    free = tokens == -1
    tokens[free] = filler(lang, rng, int(free.sum()), topic)
    return tokens


def make_example(
    lang: Language,
    rng: np.random.Generator,
    distances: Sequence[int] = (64,),
    *,
    length: int | None = None,
    supported: bool | Sequence[bool] = True,
    n_extra_facts: int = 0,
    topic: int | None = None,
    prev_len: int = 0,
    prev_topic: int | None = None,
    entities: np.ndarray | Sequence[int] | None = None,
    lead: int = 8,
    tail: int = 2,
    max_gap: int = 3,
) -> Example:
    """A document with one query per entry of `distances`, each answered by a fact exactly that far.

    length: tokens of the main document (its `<eod>` included); default: the least that fits, `lead`
    filler tokens after `<eod>` before the first fact, `tail` after the last query.
    supported: per query (or for all), whether its fact is in the text; an unsupported query has
    `fact=-1` and its planned fact position is filler (what `insert` fills).
    n_extra_facts: unqueried facts at random free positions.
    prev_len: if > 0, a neutral previous document of that many tokens (no facts) comes first: the base
    that `prior-doc-conflict` writes a conflicting fact into.
    entities: entity token ids to draw from (e.g. `lang.entity_pool("probe", disjoint=True)`).
    Queries sit at the end in random order with 0..max_gap filler tokens between them."""
    distances = [int(d) for d in distances]
    n = len(distances)
    sup = [bool(supported)] * n if isinstance(supported, bool) else [bool(s) for s in supported]
    if len(sup) != n:
        raise ValueError(f"supported has {len(sup)} entries for {n} distances")
    for d in distances:
        if d < MIN_DISTANCE:
            raise ValueError(
                f"distance {d} is too short: a fact ends at least {MIN_DISTANCE} tokens before its answer"
            )
    if prev_len < 0 or prev_len == 1:
        raise ValueError(f"prev_len must be 0 (no previous document) or >= 2, got {prev_len}")
    pool = lang.entity_ids if entities is None else np.asarray(entities, dtype=np.int64)
    n_facts = n + n_extra_facts
    if n_facts > len(pool):
        raise ValueError(
            f"{n_facts} facts need distinct entities, but only {len(pool)} are available"
        )
    topic = rnd.randint(rng, lang.n_topics) if topic is None else int(topic)
    ents = [int(e) for e in rnd.sample(rng, pool, n_facts)]
    attrs = [
        int(lang.attribute_ids[rnd.randint(rng, len(lang.attribute_ids))]) for _ in range(n_facts)
    ]
    vals = disjoint_values(lang, rng, n_facts)

    # Lay out queries and their facts with the last query ending at 0, then shift into place.
    for _attempt in range(100):
        order = rnd.permutation(rng, n)
        end = 0
        q_start: dict[int, int] = {}
        for k in order[::-1]:
            ql = QUERY_ANSWER_OFFSET + len(vals[k]) + 1
            q_start[int(k)] = end - ql
            end = end - ql - rnd.randint(rng, max_gap + 1)
        occupied = [
            (q_start[k], q_start[k] + QUERY_ANSWER_OFFSET + len(vals[k]) + 1) for k in range(n)
        ]
        f_start: dict[int, int] = {}
        for k in range(n):
            fl = FACT_VALUE_OFFSET + len(vals[k]) + 1
            last = q_start[k] + QUERY_ANSWER_OFFSET - distances[k]
            f_start[k] = last - fl + 1
            occupied.append((f_start[k], last + 1))  # also reserved when unsupported
        occupied.sort()
        if all(a[1] <= b[0] for a, b in itertools.pairwise(occupied)):
            break
    else:
        raise ValueError(
            f"distances {distances} cannot be laid out without facts and queries overlapping"
        )
    need = tail - occupied[0][0] + 1 + lead
    L = need if length is None else int(length)
    if L < need:
        raise ValueError(
            f"length {L} is too short for distances {distances}: need at least {need} tokens"
        )
    off = L - tail  # coordinate 0 → position off
    blocks: list[tuple[int, np.ndarray]] = []
    fact_at: dict[int, int] = {}
    for k in range(n):
        q = q_start[k] + off
        blocks.append((q, lang.query_tokens(ents[k], attrs[k], vals[k])))
        if sup[k]:
            fact_at[k] = f_start[k] + off
            blocks.append((fact_at[k], lang.fact_tokens(ents[k], attrs[k], vals[k])))
    reserved = np.zeros(L, dtype=bool)
    reserved[0] = True
    for k in range(n):
        lo, hi = (f_start[k] + off, f_start[k] + off + FACT_VALUE_OFFSET + len(vals[k]) + 1)
        reserved[lo:hi] = True  # keep an unsupported query's fact slot free for `insert`
    for s, t in blocks:
        reserved[s : s + len(t)] = True
    for k in range(n, n_facts):
        toks = lang.fact_tokens(ents[k], attrs[k], vals[k])
        s = _free_slot(rng, reserved, len(toks), 1, L - tail)
        if s is None:
            raise ValueError(
                f"no room for {n_extra_facts} extra facts in {L} tokens; pass a larger length"
            )
        reserved[s : s + len(toks)] = True
        fact_at[k] = s
        blocks.append((s, toks))

    main = assemble(lang, rng, L, blocks, topic)
    pieces, doc_ids, topics = [], [], []
    if prev_len:
        prev_topic = rnd.randint(rng, lang.n_topics) if prev_topic is None else int(prev_topic)
        pieces.append(assemble(lang, rng, prev_len, [], prev_topic))
        doc_ids.append(np.zeros(prev_len, dtype=np.int64))
        topics.append(prev_topic)
    doc = len(topics)
    pieces.append(main)
    doc_ids.append(np.full(L, doc, dtype=np.int64))
    topics.append(topic)
    base = prev_len

    fact_keys = sorted(fact_at, key=lambda k: fact_at[k])
    index = {k: i for i, k in enumerate(fact_keys)}
    facts = []
    for k in fact_keys:
        s = base + fact_at[k]
        e = s + FACT_VALUE_OFFSET + len(vals[k]) + 1
        facts.append(
            Fact(ents[k], attrs[k], vals[k], Span(s, e), Span(s + FACT_VALUE_OFFSET, e - 1), doc)
        )
    queries = []
    for k in sorted(range(n), key=lambda k: q_start[k]):
        s = base + q_start[k] + off
        e = s + QUERY_ANSWER_OFFSET + len(vals[k]) + 1
        queries.append(Query(index.get(k, -1), Span(s, e), Span(s + QUERY_ANSWER_OFFSET, e - 1)))
    return Example(
        tokens=np.concatenate(pieces),
        doc_ids=np.concatenate(doc_ids),
        facts=tuple(facts),
        queries=tuple(queries),
        topics=tuple(topics),
        meta={"kind": "facts", "distances": distances, "supported": sup},
    )


def _free_slot(
    rng: np.random.Generator, reserved: np.ndarray, size: int, lo: int, hi: int, tries: int = 200
) -> int | None:
    """A random start s in [lo, hi − size] with reserved[s : s + size] all False, or None."""
    if hi - size < lo:
        return None
    for _ in range(tries):
        s = rnd.randrange(rng, lo, hi - size)
        if not reserved[s : s + size].any():
            return s
    free = np.flatnonzero(
        ~np.convolve(
            reserved[lo:hi].astype(np.int64), np.ones(size, dtype=np.int64), "valid"
        ).astype(bool)
    )
    return None if len(free) == 0 else lo + int(rnd.choice(rng, free))


def make_local_example(
    lang: Language,
    rng: np.random.Generator,
    length: int,
    *,
    sentence_len: tuple[int, int] = (4, 12),
    n_docs: int = 1,
) -> Example:
    """Local-only text (the One Billion Word analogue): independent short sentences, each a fresh
    chain of the topic-free grammar ended by ".", so no token depends on anything beyond its own
    sentence. `n_docs` documents of `length` tokens each (every one opened by `<eod>`)."""
    lo, hi = sentence_len
    if not 1 <= lo <= hi or length < 2:
        raise ValueError(
            f"need 1 <= sentence_len[0] <= sentence_len[1] and length >= 2, got {sentence_len}, {length}"
        )
    pieces, ids = [], []
    for d in range(n_docs):
        pieces.append(np.array([lang.vocab.eod_id]))
        pieces.append(local_sentences(lang, rng, length - 1, sentence_len))
        ids.append(np.full(length, d, dtype=np.int64))
    return Example(
        tokens=np.concatenate(pieces),
        doc_ids=np.concatenate(ids),
        topics=(-1,) * n_docs,
        meta={"kind": "local", "sentence_len": [lo, hi]},
    )


def local_sentences(
    lang: Language, rng: np.random.Generator, n: int, sentence_len: tuple[int, int] = (4, 12)
) -> np.ndarray:
    """At least n tokens of independent sentences, cut to exactly n."""
    lo, hi = sentence_len
    k = n // (lo + 1) + 1  # enough sentences even if all are short
    lens = lo + np.minimum((rng.random(k) * (hi - lo + 1)).astype(np.int64), hi - lo)
    u = rng.random((k, hi))
    words = lang.grammar.sample(np.full(k, -1), u)  # (k, hi)
    toks = lang.filler_tokens(words)
    mask = np.arange(hi + 1)[None, :] <= lens[:, None]  # words plus the "."
    sent = np.concatenate([toks, np.full((k, 1), lang.period_id)], axis=1)
    sent[np.arange(k), lens] = lang.period_id
    return sent[mask][:n]
