"""Training documents, planned in Python and filled with Markov filler in one vectorised pass.

A `DocPlan` is one document with −1 where topic filler still has to go, the uniforms that filler
will be sampled from, and per-token target annotations. `realize(lang, plans)` samples the filler of
many plans at once; each plan's filler depends only on its own uniforms, so a document comes out the
same whether it is realised alone or in a crowd (what exact stream resumption relies on).

Kinds of document (StreamConfig weights the mixture):

- corpus: topic filler with facts, their queries at sampled distances, updates and distractors;
- bursty: ~8 random entity→value pairs repeated in random order (in-context bigrams);
- sparse: facts in the first half, their queries in the second, i.i.d. random filler;
- local: independent short sentences (no dependency beyond a sentence);
- repeat: a random span of words, then the same span again (a curriculum stage only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synth import rng as rnd
from synth.generate import disjoint_values, local_sentences
from synth.language import QUERY_ANSWER_OFFSET, Language

# target kinds (per token)
NONE, FACT, UPDATED, BURSTY, SPARSE = 0, 1, 2, 3, 4
KIND_NAMES = {NONE: "none", FACT: "fact", UPDATED: "updated", BURSTY: "bursty", SPARSE: "sparse"}


@dataclass
class DocPlan:
    tokens: np.ndarray  # (L,) int64, −1 where topic filler goes
    kind: np.ndarray  # (L,) int8 target kind of each token (NONE elsewhere)
    dist: np.ndarray  # (L,) int32 distance of each target token's query (−1 elsewhere)
    topic: int
    u: np.ndarray  # (n_free,) uniforms for the filler


def realize(lang: Language, plans: list[DocPlan]) -> None:
    """Sample the topic filler of every plan in place (vectorised across plans)."""
    todo = [p for p in plans if len(p.u)]
    if not todo:
        return
    width = max(len(p.u) for p in todo)
    U = np.zeros((len(todo), width))
    for i, p in enumerate(todo):
        U[i, : len(p.u)] = p.u
    words = lang.grammar.sample(np.array([p.topic for p in todo]), U)
    toks = lang.filler_ids[words]
    for i, p in enumerate(todo):
        p.tokens[p.tokens < 0] = toks[i, : len(p.u)]


def _new(L: int, eod: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    tokens = np.full(L, -1, dtype=np.int64)
    tokens[0] = eod
    return tokens, np.zeros(L, dtype=np.int8), np.full(L, -1, dtype=np.int32)


def _finish(tokens, kind, dist, topic, rng) -> DocPlan:
    n_free = int((tokens < 0).sum())
    return DocPlan(tokens, kind, dist, topic, rng.random(n_free))


def _slot(
    rng: np.random.Generator, occ: np.ndarray, size: int, lo: int, hi: int, tries: int = 12
) -> int | None:
    """A random free start in [lo, hi − size] (a few tries, then give up)."""
    if hi - size < lo:
        return None
    for _ in range(tries):
        s = lo + int(rng.random() * (hi - size - lo + 1))
        if not occ[s : s + size].any():
            return s
    return None


def _put(tokens, occ, s, toks) -> None:
    tokens[s : s + len(toks)] = toks
    occ[s : s + len(toks)] = True


def plan_corpus(lang: Language, rng: np.random.Generator, cfg, pool: np.ndarray) -> DocPlan:
    """Topic filler with facts; most facts are queried at a sampled distance; some are updated
    before their query (the answer is then the new value), some get a same-entity distractor."""
    L = rnd.randrange(rng, *cfg.doc_len)
    topic = rnd.randint(rng, lang.n_topics)
    tokens, kind, dist = _new(L, lang.vocab.eod_id)
    occ = np.zeros(L, dtype=bool)
    occ[0] = True
    n_facts = rnd.randrange(rng, *cfg.facts_per_doc)
    n_facts = min(n_facts, len(pool))
    ents = rnd.sample(rng, pool, n_facts)
    vals = disjoint_values(lang, rng, 3 * n_facts)  # fact, update, distractor value for each
    attrs = lang.attribute_ids
    bins = cfg.distance_bins
    cum = rnd.cumulative([b[2] for b in bins])
    for i in range(n_facts):
        e, a = int(ents[i]), int(attrs[rnd.randint(rng, len(attrs))])
        v = vals[3 * i]
        ft = lang.fact_tokens(e, a, v)
        placed = False
        if rng.random() < cfg.query_prob:
            lo_d, hi_d, _ = bins[rnd.categorical(rng, cum)]
            d = rnd.randrange(rng, lo_d, hi_d)
            new = vals[3 * i + 1] if rng.random() < cfg.update_rate else None
            qs = _place_query(lang, rng, tokens, occ, kind, dist, e, a, v, new, d)
            placed = qs > 0
            if placed and rng.random() < cfg.distractor_rate:  # same entity, another attribute
                a2 = int(attrs[rnd.randint(rng, len(attrs))])
                dt = lang.fact_tokens(e, a2, vals[3 * i + 2])
                ds = _slot(rng, occ, len(dt), 1, qs) if a2 != a else None
                if ds is not None:
                    _put(tokens, occ, ds, dt)
        if not placed:
            s = _slot(rng, occ, len(ft), 1, L)
            if s is not None:
                _put(tokens, occ, s, ft)
    return _finish(tokens, kind, dist, topic, rng)


def _place_query(lang, rng, tokens, occ, kind, dist, e, a, v, new, d) -> int:
    """Place a fact (value v) and its query with the answer exactly d tokens after the fact's last
    token; with `new`, also an update to value `new` in between, and the query answers `new` (its
    distance then counts from the update). A few random tries. Returns the query's start, or −1."""
    L = len(tokens)
    ft = lang.fact_tokens(e, a, v)
    for _ in range(6):
        answer = v if new is None else new
        qt = lang.query_tokens(e, a, answer)
        lo = d + len(ft)  # earliest answer start with the fact inside the document
        hi = L - len(qt) + QUERY_ANSWER_OFFSET
        if lo > hi:
            return -1
        ans = lo + int(rng.random() * (hi - lo + 1))
        fs, qs = ans - d - len(ft) + 1, ans - QUERY_ANSWER_OFFSET
        if occ[fs : fs + len(ft)].any() or occ[qs : qs + len(qt)].any():
            continue
        _put(tokens, occ, fs, ft)
        _put(tokens, occ, qs, qt)
        k, dd = FACT, d
        if new is not None:
            ut = lang.fact_tokens(e, a, new)
            us = _slot(rng, occ, len(ut), fs + len(ft), qs)
            if us is None:  # no room for the update: undo, try again without it
                occ[fs : fs + len(ft)] = occ[qs : qs + len(qt)] = False
                tokens[fs : fs + len(ft)] = tokens[qs : qs + len(qt)] = -1
                new = None
                continue
            _put(tokens, occ, us, ut)
            k, dd = UPDATED, ans - (us + len(ut) - 1)
        kind[ans : ans + len(answer)] = k
        dist[ans : ans + len(answer)] = dd
        return qs
    return -1


def _pack(rng: np.random.Generator, sizes: list[int], lo: int, hi: int) -> list[int] | None:
    """Starts for blocks of `sizes`, in order, inside [lo, hi) with random gaps (None if too big)."""
    free = (hi - lo) - sum(sizes)
    if free < 0:
        return None
    cuts = sorted(min(int(x * (free + 1)), free) for x in rng.random(len(sizes)).tolist())
    starts, pos, prev = [], lo, 0
    for size, cut in zip(sizes, cuts, strict=True):
        pos += cut - prev
        prev = cut
        starts.append(pos)
        pos += size
    return starts


def plan_sparse(
    lang: Language, rng: np.random.Generator, cfg, pool: np.ndarray, length: int
) -> DocPlan:
    """Facts in the first half, their queries (shuffled) in the second, random i.i.d. filler (or the
    topic's Markov filler with `sparse_filler="markov"`): the prototype's recall curriculum."""
    L = max(length, 16)
    topic = rnd.randint(rng, lang.n_topics)
    n = min(cfg.sparse_facts, len(pool))
    ents = rnd.sample(rng, pool, n)
    vals = disjoint_values(lang, rng, n)
    n_attr = len(lang.attribute_ids)
    attrs = [
        int(lang.attribute_ids[min(int(x * n_attr), n_attr - 1)]) for x in rng.random(n).tolist()
    ]
    half = L // 2
    while n:
        fts = [lang.fact_tokens(int(ents[i]), attrs[i], vals[i]).tolist() for i in range(n)]
        qts = [lang.query_tokens(int(ents[i]), attrs[i], vals[i]).tolist() for i in range(n)]
        order = rnd.permutation(rng, n).tolist()
        fs = _pack(rng, [len(t) for t in fts], 1, half)
        qs = _pack(rng, [len(qts[i]) for i in order], half, L)
        if fs is not None and qs is not None:
            break
        n -= 1
    tokens = [-1] * L
    tokens[0] = lang.vocab.eod_id
    kind = [0] * L
    dist = [-1] * L
    for i in range(n):
        tokens[fs[i] : fs[i] + len(fts[i])] = fts[i]
    for j, i in enumerate(order[:n] if n else ()):
        s, q, m = qs[j], qts[i], len(vals[i])
        tokens[s : s + len(q)] = q
        a = s + QUERY_ANSWER_OFFSET
        kind[a : a + m] = [SPARSE] * m
        dist[a : a + m] = [a - (fs[i] + len(fts[i]) - 1)] * m
    tokens = np.array(tokens, dtype=np.int64)
    kind_a, dist_a = np.array(kind, dtype=np.int8), np.array(dist, dtype=np.int32)
    if cfg.sparse_filler == "random":
        free = tokens < 0
        tokens[free] = lang.filler_ids[lang.grammar.sample_uniform(rng.random(int(free.sum())))]
    return _finish(tokens, kind_a, dist_a, topic, rng)


def plan_bursty(
    lang: Language,
    rng: np.random.Generator,
    cfg,
    pool: np.ndarray,
    sep: bool = False,
    statement: bool = False,
) -> DocPlan:
    """`bursty_pairs` random entity→value pairs (single-token values), repeated in random order all
    through the document, with 0..bursty_gap random filler words between pairs. Every repeat's value
    is a target (predictable only from earlier in the document). With `sep` each pair reads
    "ENTITY is VALUE": the value then sits two tokens after its key, as in a fact ("… ENTITY is
    VALUE ."), whose query ("… ENTITY VALUE .") reads it back from there. With `statement` only a
    key's first pair reads "ENTITY is VALUE" and its repeats "ENTITY VALUE": a fact and its
    queries, at bursty density."""
    L = rnd.randrange(rng, *cfg.bursty_len)
    tokens, kind, dist = _new(L, lang.vocab.eod_id)
    P = min(cfg.bursty_pairs, len(pool), len(lang.value_word_ids))
    keys = np.array(rnd.sample(rng, pool, P), dtype=np.int64)
    vals = np.array(rnd.sample(rng, lang.value_word_ids, P), dtype=np.int64)
    n = L // (3 if sep else 2)  # more pairs than can fit; cut below
    idx = np.minimum((rng.random(n) * P).astype(np.int64), P - 1)
    gaps = np.minimum((rng.random(n) * (cfg.bursty_gap + 1)).astype(np.int64), cfg.bursty_gap)
    # tokens of each pair: key [is] value
    first = np.zeros(n, dtype=bool)
    first[np.unique(idx, return_index=True)[1]] = True
    width = np.full(n, 3 if sep else 2, dtype=np.int64)
    if statement:
        width[first] = 3
    starts = 1 + np.cumsum(gaps) + np.concatenate([[0], np.cumsum(width)[:-1]])  # keys
    fit = starts + width - 1 < L
    idx, starts, width = idx[fit], starts[fit], width[fit]
    tokens[starts] = keys[idx]
    tokens[starts[width == 3] + 1] = lang.is_id
    vpos_all = starts + width - 1
    tokens[vpos_all] = vals[idx]
    # a value is a target once its key has been seen; distance from its previous occurrence
    order = np.argsort(idx, kind="stable")
    sorted_idx, sorted_vpos = idx[order], vpos_all[order]
    same = np.concatenate([[False], sorted_idx[1:] == sorted_idx[:-1]])
    prev = np.concatenate([[-1], sorted_vpos[:-1]])
    vpos = vpos_all[order[same]]
    kind[vpos] = BURSTY
    dist[vpos] = vpos - prev[same]
    free = tokens < 0
    tokens[free] = lang.filler_ids[lang.grammar.sample_uniform(rng.random(int(free.sum())))]
    return DocPlan(tokens, kind, dist, -1, np.zeros(0))


def plan_repeat(lang: Language, rng: np.random.Generator, cfg) -> DocPlan:
    """A span of (L − 1) // 2 words drawn uniformly from the whole vocabulary but `<pad>` and
    `<eod>`, written twice (a last word of odd L is drawn too). Only its second copy is
    predictable, from the first; no token is a target kind (nothing here is a fact or a pair)."""
    L = rnd.randrange(rng, *cfg.repeat_len)
    tokens, kind, dist = _new(L, lang.vocab.eod_id)
    n_words = lang.vocab.size - 2
    draw = np.minimum((rng.random(L - 1) * n_words).astype(np.int64), n_words - 1) + 2
    span = (L - 1) // 2
    draw[span : 2 * span] = draw[:span]
    tokens[1:] = draw
    return DocPlan(tokens, kind, dist, -1, np.zeros(0))


def plan_local(lang: Language, rng: np.random.Generator, cfg) -> DocPlan:
    """Independent short sentences of the topic-free grammar."""
    L = rnd.randrange(rng, *cfg.doc_len)
    tokens, kind, dist = _new(L, lang.vocab.eod_id)
    tokens[1:] = local_sentences(lang, rng, L - 1, cfg.sentence_len)
    return DocPlan(tokens, kind, dist, -1, np.zeros(0))
