"""Probe texts on real text (synth.text.facts, synth.text.contexts): every annotation is the
tokens of what it names, distances are exact in the model's tokens, a text is what its tokenizer
makes of its own string, and every edit keeps the length and every token outside it."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from text_helpers import default_world, require_tokenizers

require_tokenizers()

from synth import make_rng  # noqa: E402
from synth.example import Span  # noqa: E402
from synth.text.contexts import cross_document, sentence_text, topic_shift  # noqa: E402
from synth.text.facts import delete_fact, fact_text, rebind_entity, swap_value  # noqa: E402
from synth.text.render import Misaligned  # noqa: E402


def canonical(world, tokens) -> bool:
    """The tokens are what the tokenizer makes of their own string."""
    tok = world.tokenizer
    return np.array_equal(tok.encode(tok.decode(tokens))[0], tokens)


def words(world, tokens, span) -> str:
    return world.tokenizer.decode(tokens[span.start : span.end])


@settings(max_examples=12)
@given(  # distances 60 apart: one fact and its query never overlap another pair's
    st.integers(0, 2**31),
    st.lists(st.sampled_from(range(40, 401, 60)), unique=True, min_size=1, max_size=3),
)
def test_rendered_facts_are_aligned_and_distances_exact_in_model_tokens(seed, distances):
    w = default_world()
    ex = fact_text(w, make_rng(seed), distances, lead=10, length=1400)
    assert len(ex) == 1400 and canonical(w, ex.tokens)
    assert sorted(d for d in ex.distances) == sorted(distances)
    for q in ex.queries:
        f = ex.facts[q.fact]
        value = w.value_words[w.value_index(f.value)]
        assert words(w, ex.tokens, f.value_span) == f" {value}"
        assert words(w, ex.tokens, q.answer) == f" {value}"
        assert words(w, ex.tokens, f.span).startswith(" The ") and words(
            w, ex.tokens, f.span
        ).endswith(f" is {value}.")
        assert words(w, ex.tokens, q.span).startswith(" What is the ")
        assert value not in w.haystack.vocabulary  # never a word of the filler
    assert ex.tokens[0] == w.vocab.eod_id and (ex.doc_ids == 0).all()


@settings(max_examples=12)
@given(st.integers(0, 2**31), st.integers(40, 300))
def test_swap_rebind_and_delete_keep_the_length_and_every_token_outside_the_edit(seed, d):
    w = default_world()
    rng = make_rng(seed)
    base = fact_text(w, rng, [d], lead=12)
    f = base.facts[0]
    try:
        rebind = rebind_entity(w, rng, base)
    except Misaligned:  # no other entity's statement as long (about 1 base in 200): unmatched
        rebind = None
    for pair, edit in (
        (swap_value(w, rng, base), f.value_span),
        (delete_fact(w, rng, base), f.span),
        *([(rebind, Span(f.span.start, f.value_span.start))] if rebind else []),
    ):
        v = pair.variant
        assert len(v) == len(base) and canonical(w, v.tokens)
        outside = np.ones(len(base), bool)
        outside[edit.start : edit.end] = False
        assert np.array_equal(v.tokens[outside], base.tokens[outside])
        assert np.array_equal(pair.edited(), np.arange(edit.start, edit.end))
        b, vt = pair.aligned_targets()  # the answer is kept, token for token
        assert np.array_equal(base.tokens[b], v.tokens[vt])
    if rebind is not None:  # the same value, stated of an entity the document never names
        new = rebind.variant.facts[0]
        assert new.value == f.value and new.entity != f.entity
        named = {p.block.entity for p in base.meta["placed"][0] if hasattr(p.block, "entity")}
        assert new.entity not in named and rebind.variant.queries == base.queries
    swap = swap_value(w, make_rng(seed + 1), base)
    new = swap.variant.facts[0]
    assert len(new.value) == len(f.value) and set(new.value) != set(f.value)
    assert swap.meta["new_word"] not in w.haystack.vocabulary


def test_a_distance_shorter_than_the_query_allows_is_refused():
    w = default_world()
    with pytest.raises(ValueError, match="too short"):
        fact_text(w, make_rng(0), [5], lead=8)


def test_sentence_texts_have_the_exact_length_and_are_haystack_sentences():
    w = default_world()
    ex = sentence_text(w, make_rng(3), 257)
    assert len(ex) == 257 and ex.tokens[0] == w.vocab.eod_id
    text = w.tokenizer.decode(ex.tokens[1:200])
    assert text.split(" ")[1] in {wd.strip() for wd in w.haystack.words}


def test_cross_document_b_is_the_same_after_a_and_after_the_foreign_document():
    w = default_world()
    cd = cross_document(w, make_rng(4), b_distance=50, b_lead=8, gap=20, start=(1, 8), tail=30)
    a_b, f_b = cd.conflict, cd.foreign
    assert len(a_b) == len(f_b) and np.array_equal(a_b.tokens[cd.len_a :], f_b.tokens[cd.len_a :])
    assert not np.array_equal(a_b.tokens[: cd.len_a], f_b.tokens[: cd.len_a])
    assert a_b.tokens[cd.len_a] == w.vocab.eod_id and a_b.doc_ids[cd.len_a] == 1
    q = a_b.queries[0]
    assert a_b.distance(q) == 50 and cd.len_a - cd.fact_end == 20  # A's fact `gap` before B
    assert a_b.facts[0].doc == 0 and tuple(a_b.facts[0].value) == tuple(cd.stale)
    assert tuple(a_b.tokens[q.answer.start : q.answer.end]) != tuple(cd.stale)


def test_topic_shift_replaces_only_the_distant_region_with_another_documents_text():
    w = default_world()
    pair = topic_shift(w, make_rng(5), region=48, distance=20, window=16, fact_distance=40)
    b, v = pair.base, pair.variant
    assert len(b) == len(v) and canonical(w, v.tokens)
    assert np.array_equal(b.tokens[49:], v.tokens[49:]) and (b.tokens[1:49] != v.tokens[1:49]).any()
    assert pair.meta["old_topic"] != pair.meta["new_topic"] and b.distance(0) == 40
