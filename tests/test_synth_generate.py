"""Base examples: exact distances, annotations, no leaks, determinism, local-only text."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from synth.generate import MIN_DISTANCE, make_example, make_local_example
from synth.language import Language
from synth.rng import make_rng, seed_sequence

LANG = Language.default()

seeds = st.integers(0, 2**32 - 1)


@st.composite
def layouts(draw):
    n = draw(st.integers(1, 3))
    gaps = draw(st.lists(st.integers(24, 200), min_size=n, max_size=n))
    distances = list(np.cumsum(gaps) - gaps[0] + draw(st.integers(MIN_DISTANCE, 120)))
    order = draw(st.permutations(range(n)))
    return {
        "distances": [int(distances[i]) for i in order],
        "n_extra_facts": draw(st.integers(0, 3)),
        "prev_len": draw(st.sampled_from([0, 0, 16])),
        "seed": draw(seeds),
    }


def build(p, **kw):
    extra = 12 * p["n_extra_facts"]
    length = max(p["distances"]) + 60 + extra
    return make_example(
        LANG, make_rng(p["seed"]), p["distances"], length=length, n_extra_facts=p["n_extra_facts"],
        prev_len=p["prev_len"], **kw,
    )  # fmt: skip


@given(layouts())
def test_requested_distances_are_exact(p):
    ex = build(p)
    planned = {tuple(ex.facts[q.fact].value): None for q in ex.queries}
    assert len(planned) == len(p["distances"])
    assert sorted(ex.distances) == sorted(p["distances"])
    for q in ex.queries:
        f = ex.facts[q.fact]
        assert ex.distance(q) == q.answer.start - (f.span.end - 1)
        assert LANG.decode(ex.tokens[f.span.end - 1 : f.span.end]) == "."


@given(layouts())
def test_annotations_match_the_tokens(p):
    ex = build(p)
    for f in ex.facts:
        assert (
            ex.tokens[f.span.start : f.span.end].tolist()
            == LANG.fact_tokens(f.entity, f.attribute, f.value).tolist()
        )
        assert tuple(ex.tokens[f.value_span.start : f.value_span.end]) == f.value
        assert (ex.doc_ids[f.span.start : f.span.end] == f.doc).all()
    for q in ex.queries:
        f = ex.facts[q.fact]
        assert (
            ex.tokens[q.span.start : q.span.end].tolist()
            == LANG.query_tokens(f.entity, f.attribute, f.value).tolist()
        )
    assert ex.targets.tolist() == [
        i for q in ex.queries for i in range(q.answer.start, q.answer.end)
    ]
    assert len(ex.facts) == len(p["distances"]) + p["n_extra_facts"]
    assert len({f.entity for f in ex.facts}) == len(ex.facts)


@given(layouts())
def test_no_accidental_answer_leak(p):
    """An answer token occurs before its answer only inside its own fact's value; value tokens occur
    nowhere but in values and answers."""
    ex = build(p)
    for q in ex.queries:
        f = ex.facts[q.fact]
        before = ex.tokens[: q.answer.start]
        for t in ex.tokens[q.answer.start : q.answer.end]:
            where = set(np.flatnonzero(before == t).tolist())
            assert where <= set(range(f.value_span.start, f.value_span.end)), LANG.decode([t])
    allowed = np.zeros(len(ex), dtype=bool)
    for f in ex.facts:
        allowed[f.value_span.start : f.value_span.end] = True
    for q in ex.queries:
        allowed[q.answer.start : q.answer.end] = True
    assert not LANG.is_value_token(ex.tokens[~allowed]).any()


@given(layouts())
def test_eod_opens_every_document_with_its_id(p):
    ex = build(p)
    eod = np.flatnonzero(ex.tokens == LANG.vocab.eod_id)
    assert eod.tolist() == ex.doc_starts.tolist()
    assert ex.doc_starts[0] == 0
    assert ex.doc_ids[eod].tolist() == list(range(len(eod)))
    assert len(ex.topics) == len(eod)


@given(layouts())
def test_same_seed_same_example(p):
    a, b = build(p), build(p)
    assert np.array_equal(a.tokens, b.tokens) and a.facts == b.facts and a.queries == b.queries


def test_unsupported_query_leaves_its_fact_slot_as_filler():
    ex = make_example(LANG, make_rng(4), (40,), supported=False, length=80)
    (q,) = ex.queries
    assert q.fact == -1 and ex.facts == ()
    assert ex.filler_mask()[q.answer.start - 40 - 6 : q.answer.start - 39].all()
    with pytest.raises(ValueError, match="no supporting fact"):
        ex.distance(0)


def test_impossible_layouts_are_refused_clearly():
    with pytest.raises(ValueError, match="too short"):
        make_example(LANG, make_rng(0), (3,))
    with pytest.raises(ValueError, match="length 30 is too short"):
        make_example(LANG, make_rng(0), (64,), length=30)


def test_probe_and_train_namespaces_differ():
    a = make_example(LANG, make_rng(7, "probe"), (30,))
    b = make_example(LANG, make_rng(7, "train"), (30,))
    assert not np.array_equal(a.tokens, b.tokens)
    assert seed_sequence(7, "probe").entropy != seed_sequence(7, "train").entropy


@given(seeds, st.integers(2, 300))
def test_local_text_is_independent_short_sentences(seed, length):
    ex = make_local_example(LANG, make_rng(seed), length, sentence_len=(3, 9), n_docs=2)
    assert len(ex) == 2 * length and ex.facts == () and ex.topics == (-1, -1)
    for d in (0, 1):
        toks = ex.tokens[ex.doc_ids == d]
        assert toks[0] == LANG.vocab.eod_id
        body = toks[1:]
        assert np.isin(body, [*LANG.filler_ids, LANG.period_id]).all()
        ends = np.flatnonzero(body == LANG.period_id)
        runs = np.diff(np.r_[-1, ends])[:] - 1  # words per complete sentence
        assert ((runs >= 3) & (runs <= 9)).all()
