"""Edits: what each one changes, and that alignment accounts for every token."""

import numpy as np
import pytest
from hypothesis import given, reject
from hypothesis import strategies as st

from synth.edits import EDITS, apply_edit, resolve
from synth.edits.common import query_key
from synth.generate import make_example
from synth.language import Language
from synth.pairs import make_pair
from synth.rng import make_rng

LANG = Language.default()
seeds = st.integers(0, 2**32 - 1)
distances = st.integers(16, 150)
ALL = [e for e in EDITS if e != "identity"]  # every edit but the control (variant = base)
LENGTH_CHANGING = [e for e in EDITS if EDITS[e].length_changing]


def base_for(seed, d, *, supported=True, prev_len=24, extra=1):
    return make_example(
        LANG, make_rng(seed), (d,), length=d + 40 + 10 * extra, supported=supported,
        n_extra_facts=extra, prev_len=prev_len, lead=12,
    )  # fmt: skip


def params_for(name, d, same_length=True):
    p = {"same_length": same_length}
    if name == "insert":
        p["distance"] = d
    if name == "topic-shift":
        p["keep"] = 8
    if name == "distract":
        p.update(k=2, kind="mixed")
    return p


def pair_for(name, seed, d, same_length=True):
    if name in ("distract", "update", "topic-shift"):
        d = max(d, 48)  # room between the fact and the query
    base = base_for(seed, d, supported=name != "insert")
    try:
        return apply_edit(name, base, make_rng(seed + 1), LANG, **params_for(name, d, same_length))
    except ValueError as e:  # a near miss needs a free value sharing a token with the answer
        if "no near-miss value" not in str(e):
            raise
        reject()


def check_consistent(ex):
    """Annotations of any example (base or variant) describe its tokens."""
    for f in ex.facts:
        assert (
            ex.tokens[f.span.start : f.span.end].tolist()
            == LANG.fact_tokens(f.entity, f.attribute, f.value).tolist()
        )
        assert (ex.doc_ids[f.span.start : f.span.end] == f.doc).all()
    for q in ex.queries:
        assert LANG.decode(ex.tokens[q.span.start : q.answer.start]).startswith("? ")
        assert ex.tokens[q.answer.end] == LANG.period_id
    assert ex.doc_starts.tolist() == np.flatnonzero(ex.tokens == LANG.vocab.eod_id).tolist()


@given(seeds, distances)
def test_replace_changes_exactly_the_value_tokens(seed, d):
    p = pair_for("replace", seed, d)
    f = p.base.facts[p.meta["fact"]]
    changed = np.flatnonzero(p.base.tokens != p.variant.tokens)
    assert changed.tolist() == list(range(f.value_span.start, f.value_span.end))
    assert p.edited().tolist() == changed.tolist()
    nf = p.variant.facts[p.meta["fact"]]
    assert nf.value == tuple(p.meta["new_value"]) != f.value and len(nf.value) == len(f.value)
    assert np.array_equal(p.variant.targets, p.base.targets)  # the answer tokens stay A
    check_consistent(p.variant)


@given(seeds, distances)
def test_replace_with_another_length_shifts_only_later_tokens(seed, d):
    base = base_for(seed, d)
    f = base.facts[base.queries[0].fact]
    other = next(v for v in LANG.values if len(v) != len(f.value) and not set(v) & set(f.value))
    p = apply_edit("replace", base, make_rng(seed), LANG, value=other, same_length=False)
    s, e = f.value_span.start, f.value_span.end
    assert p.variant.tokens.tolist() == [*base.tokens[:s], *other, *base.tokens[e:]]
    assert p.variant.distance(0) == base.distance(0)  # the fact's end and the answer move together
    check_consistent(p.variant)


@given(seeds, distances)
def test_delete_removes_exactly_the_fact_span(seed, d):
    base = base_for(seed, d)
    p = apply_edit("delete", base, make_rng(seed), LANG, same_length=False)
    s, e = p.meta["deleted"]
    assert p.variant.tokens.tolist() == np.delete(base.tokens, np.arange(s, e)).tolist()
    assert p.alignment.tolist() == np.delete(np.arange(len(base)), np.arange(s, e)).tolist()
    assert np.array_equal(base.tokens[p.alignment], p.variant.tokens)
    assert p.variant.queries[0].fact == -1 and len(p.variant.facts) == len(base.facts) - 1
    check_consistent(p.variant)


@given(seeds, distances)
def test_delete_keeping_length_fills_the_span_with_neutral_filler(seed, d):
    base = base_for(seed, d)
    p = apply_edit("delete", base, make_rng(seed), LANG)
    s, e = p.meta["deleted"]
    assert np.array_equal(
        np.delete(p.variant.tokens, np.arange(s, e)), np.delete(base.tokens, np.arange(s, e))
    )
    assert np.isin(p.variant.tokens[s:e], LANG.filler_ids).all()
    assert p.edited().tolist() == list(range(s, e))


@given(st.sampled_from([*ALL, "identity"]), seeds, distances)
def test_length_preserving_edits_keep_every_tokens_index(name, seed, d):
    p = pair_for(name, seed, d)
    assert p.preserves_length
    kept = p.alignment >= 0
    assert np.array_equal(p.alignment[kept], np.flatnonzero(kept))
    assert np.array_equal(p.variant.doc_ids, p.base.doc_ids)
    assert p.variant.topics == p.base.topics
    check_consistent(p.variant)


@given(st.sampled_from(ALL), st.booleans(), seeds, distances)
def test_aligned_tokens_are_the_same_tokens_in_order(name, same_length, seed, d):
    same_length = same_length or name not in LENGTH_CHANGING
    p = pair_for(name, seed, d, same_length)
    kept = p.alignment >= 0
    assert np.array_equal(p.variant.tokens[kept], p.base.tokens[p.alignment[kept]])
    assert (np.diff(p.alignment[kept]) > 0).all()
    b, v = p.aligned_targets()
    assert np.array_equal(p.base.tokens[b], p.variant.tokens[v])
    check_consistent(p.variant)


@given(st.booleans(), seeds, distances, st.integers(8, 120))
def test_insert_puts_the_fact_at_the_exact_distance(same_length, seed, d, want):
    base = base_for(seed, max(d, want), supported=False)
    try:
        p = apply_edit("insert", base, make_rng(seed), LANG, distance=want, same_length=same_length)
    except ValueError as e:
        assert "filler" in str(e) or "split" in str(e)  # landed on another statement: refused
        return
    assert p.variant.distance(0) == want
    f = p.variant.facts[p.variant.queries[0].fact]
    assert (f.entity, f.attribute) == query_key(base, base.queries[0])
    assert f.value == tuple(base.tokens[base.queries[0].answer.start : base.queries[0].answer.end])
    check_consistent(p.variant)


@given(st.booleans(), seeds, distances)
def test_prior_doc_conflict_puts_the_conflicting_fact_only_in_the_earlier_document(
    same_length, seed, d
):
    p = pair_for("prior-doc-conflict", seed, d, same_length)
    v = p.variant
    c = v.facts[p.meta["conflict_fact"]]
    q = v.queries[0]
    qdoc = int(v.doc_ids[q.span.start])
    assert c.doc == p.meta["conflict_doc"] < qdoc
    assert (v.doc_ids[c.span.start : c.span.end] == c.doc).all()
    assert (c.entity, c.attribute) == query_key(v, q)
    assert c.value == tuple(p.meta["new_value"]) != tuple(p.meta["old_value"])
    in_query_doc = v.tokens[v.doc_ids == qdoc]
    assert not np.isin(in_query_doc, c.value).any()
    assert [f for f in v.facts if f.doc == qdoc] == [
        f for f in p.base.facts if f.doc == int(p.base.doc_ids[p.base.queries[0].span.start])
    ] or not same_length


@given(seeds, distances, st.integers(1, 40), st.integers(0, 12))
def test_prior_doc_conflict_with_a_gap_ends_the_new_document_that_far_after_the_fact(
    seed, d, gap, lo
):
    base = base_for(seed, d, prev_len=0)
    p = apply_edit(
        "prior-doc-conflict", base, make_rng(seed), LANG, same_length=False, topic=3, gap=gap,
        start=(1 + lo, 1 + 2 * lo),
    )  # fmt: skip
    v, (s, e) = p.variant, p.meta["conflict"]
    eod = len(v) - len(base)  # the base's first token: its <eod>
    assert 1 + lo <= s <= 1 + 2 * lo and eod - (e - 1) == gap
    assert v.topics[0] == 3 and v.tokens[eod] == LANG.vocab.eod_id
    assert np.array_equal(v.tokens[eod:], base.tokens) and (p.alignment[:eod] == -1).all()
    check_consistent(v)


@given(seeds, distances, st.integers(2, 60))
def test_prepend_puts_a_neutral_document_before_the_base(seed, d, length):
    from synth.edits.prior_doc_conflict import prepend

    base = base_for(seed, d)
    p = prepend(base, make_rng(seed), LANG, length=length, topic=2)
    v = p.variant
    assert np.array_equal(v.tokens[length:], base.tokens)
    assert np.array_equal(v.doc_ids, np.r_[np.zeros(length, np.int64), base.doc_ids + 1])
    assert v.tokens[0] == LANG.vocab.eod_id and np.isin(v.tokens[1:length], LANG.filler_ids).all()
    assert v.topics == (2, *base.topics) and len(v.facts) == len(base.facts)
    assert np.array_equal(base.tokens[p.alignment[length:]], base.tokens)
    check_consistent(v)


@given(seeds, distances)
def test_delete_a_stale_statement_by_index_and_read_the_pair_reversed(seed, d):
    base = base_for(seed, max(d, 48))
    upd = apply_edit("update", base, make_rng(seed), LANG, answer="new")
    k = upd.meta["stale_fact"]
    gone = apply_edit("delete", upd.variant, make_rng(seed + 1), LANG, fact=k)
    stale = upd.variant.facts[k]
    assert gone.meta["deleted"] == [stale.span.start, stale.span.end] and gone.meta["query"] is None
    assert stale not in gone.variant.facts and len(gone.variant.facts) == len(base.facts)
    q = gone.variant.queries[0]
    assert gone.variant.facts[q.fact].value == tuple(upd.meta["new_value"])  # still the update's
    back = gone.reversed()
    assert back.base is gone.variant and back.variant is gone.base and back.meta["reversed"]
    assert np.array_equal(back.alignment, gone.inverse_alignment())
    assert np.array_equal(back.base.tokens[back.alignment[back.alignment >= 0]],
                          back.variant.tokens[back.alignment >= 0])  # fmt: skip


@given(seeds, distances, st.sampled_from(["keep", "new"]))
def test_update_restates_the_fact_later_and_the_query_follows_it(seed, d, answer):
    base = base_for(seed, max(d, 40))
    p = apply_edit("update", base, make_rng(seed), LANG, answer=answer)
    v, q = p.variant, p.variant.queries[0]
    old, new = v.facts[p.meta["stale_fact"]], v.facts[p.meta["update_fact"]]
    assert q.fact == p.meta["update_fact"]
    assert old.span.end <= new.span.start and new.span.end <= q.span.start
    assert (old.entity, old.attribute) == (new.entity, new.attribute) and old.value != new.value
    got = tuple(v.tokens[q.answer.start : q.answer.end])
    assert got == (old.value if answer == "keep" else new.value)


@given(
    seeds,
    distances,
    st.sampled_from(["same_attribute", "same_entity", "near_miss"]),
    st.integers(1, 3),
)
def test_distractors_sit_between_fact_and_query_and_are_of_their_kind(seed, d, kind, k):
    base = base_for(seed, max(d, 30 * k))
    p = apply_edit("distract", base, make_rng(seed), LANG, kind=kind, k=k)
    v, q = p.variant, p.variant.queries[0]
    fact = v.facts[q.fact]
    entity, attribute = query_key(v, q)
    answer = set(v.tokens[q.answer.start : q.answer.end].tolist())
    assert len(v.distractors) == k
    for info in p.meta["distractors"]:
        f = v.facts[info["fact"]]
        assert fact.span.end <= f.span.start and f.span.end <= q.span.start
        if kind == "same_attribute":
            assert f.attribute == attribute and f.entity != entity and not answer & set(f.value)
        elif kind == "same_entity":
            assert f.entity == entity and f.attribute != attribute and not answer & set(f.value)
        else:
            assert f.attribute == attribute and f.entity != entity and answer & set(f.value)
            assert f.value != tuple(v.tokens[q.answer.start : q.answer.end])


@given(seeds, distances)
def test_topic_shift_changes_only_distant_filler(seed, d):
    base = base_for(seed, max(d, 40), prev_len=0)
    p = apply_edit("topic-shift", base, make_rng(seed), LANG, keep=16)
    changed = np.flatnonzero(p.alignment < 0)
    lo, hi = p.meta["region"]
    assert ((changed >= lo) & (changed < hi)).all()
    assert base.filler_mask()[changed].all()
    assert np.isin(p.variant.tokens[changed], LANG.filler_ids).all()
    assert p.variant.facts == base.facts and p.variant.queries == base.queries
    assert np.array_equal(p.variant.tokens[hi:], base.tokens[hi:])
    assert p.meta["new_topic"] != p.meta["old_topic"]


@given(st.sampled_from(ALL), seeds, distances)
def test_same_seed_same_pair(name, seed, d):
    a, b = pair_for(name, seed, d), pair_for(name, seed, d)
    assert np.array_equal(a.variant.tokens, b.variant.tokens) and a.meta == b.meta
    assert np.array_equal(a.alignment, b.alignment)


def test_identity_pair_is_identical():
    p = make_pair("identity", LANG, make_rng(0))
    assert p.variant is p.base and p.edited().size == 0


def test_edits_refuse_bad_requests_with_one_line():
    base = base_for(1, 40, prev_len=0)
    orphan = base_for(1, 40, supported=False)
    cases = [
        (lambda: apply_edit("replace", orphan, make_rng(0), LANG), "supporting fact"),
        (lambda: apply_edit("prior-doc-conflict", base, make_rng(0), LANG), "no document before"),
        (lambda: apply_edit("insert", base, make_rng(0), LANG, distance=3), "inside the query"),
        (lambda: apply_edit("distract", base, make_rng(0), LANG, kind="loud"), "unknown kind"),
        (lambda: apply_edit("replace", base, make_rng(0), LANG, query=5), "does not exist"),
        (lambda: apply_edit("delete", base, make_rng(0), LANG, fact=9), "does not exist"),
        (lambda: resolve("replce"), "did you mean 'replace'"),
    ]
    for call, msg in cases:
        with pytest.raises(ValueError, match=msg) as e:
            call()
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("name", ALL)
def test_make_pair_builds_every_edits_pair(name):
    p = make_pair(name, LANG, make_rng(3, "probe"), distance=64)
    assert p.preserves_length and p.edited().size > 0
    check_consistent(p.variant)


def test_rebind_keeps_the_value_and_binds_it_to_an_entity_the_text_never_mentions():
    from synth.edits import rebind

    base = base_for(7, 40, supported=True)
    p = rebind(base, make_rng(8), LANG, query=0)
    f_base, f_var = base.facts[base.queries[0].fact], p.variant.facts[base.queries[0].fact]
    assert p.preserves_length and p.edited().tolist() == [f_base.span.start + 3]
    assert f_var.value == f_base.value and f_var.entity != f_base.entity
    assert f_var.entity not in base.tokens  # a fresh entity: the query's ENTITY has no fact now
    assert (p.variant.tokens[f_base.value_span.start : f_base.value_span.end] == f_base.value).all()
    b, v = p.aligned_targets()
    assert (p.base.tokens[b] == p.variant.tokens[v]).all()  # the answer is unchanged
    check_consistent(p.variant)


def test_each_real_text_realisation_is_registered_with_its_edit_and_importable():
    """An edit names its real-text realisation once, where it registers itself: those the
    haystack writes resolve to a function of synth.text, and an edit without one says so."""
    import importlib

    from synth.edits import NotOnRealText
    from synth.edits.registry import register

    real = {name: e.real for name, e in EDITS.items() if e.real is not None}
    assert set(real) == {"replace", "rebind", "delete"}
    for target in real.values():
        module, _, attr = target.partition(":")
        assert module.startswith("synth.text.") and callable(
            getattr(importlib.import_module(module), attr)
        )
    with pytest.raises(NotOnRealText, match="'update' is not written on real text"):
        EDITS["update"].on_real_text(None, None, None)
    with pytest.raises(ValueError, match="real must name 'module:function'"):
        register("nameless-realisation", real="synth.text.facts")
    assert "nameless-realisation" not in EDITS


def test_real_text_refuses_a_length_change_or_a_parameter_its_realisation_lacks_before_editing():
    """Real text keeps every token outside an edit in place, so `same_length=False` is refused
    by name; so is a parameter the realisation does not take (synth's `replace` takes `value`,
    the real-text one draws its own), rather than failing inside it with a TypeError."""
    from synth.edits import NotOnRealText

    with pytest.raises(NotOnRealText, match=r"'delete' keeps the token length.*same_length=False"):
        EDITS["delete"].on_real_text(None, None, None, query=0, same_length=False)
    with pytest.raises(NotOnRealText, match=r"'replace' takes no value \(it takes query\)"):
        EDITS["replace"].on_real_text(None, None, None, query=0, value=(5,))
