"""The training stream: contiguity, documents, determinism, sharding, exact resumption."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synth.documents import BURSTY, FACT, SPARSE, UPDATED
from synth.language import Language
from synth.stream import StreamConfig, TrainStream

LANG = Language.default()
SMALL = StreamConfig(
    doc_len=(48, 300), distance_bins=((6, 40, 1.0), (40, 200, 1.0)), bursty_len=(16, 120)
)

# every kind of document and option switched on
FULL = StreamConfig(
    p_corpus=1, p_bursty=1, p_sparse=1, p_local=1, doc_len=(32, 200), bursty_gap=2,
    sparse_filler="markov", disjoint_entities=True, update_rate=0.5, distractor_rate=0.5,
)  # fmt: skip


# a curriculum: each row's first 300 tokens are plain bursty documents only (the switch is crossed
# early); after it, bursty documents are written "KEY is VALUE"
CURRICULUM = StreamConfig(**{**SMALL.__dict__, "bursty_first": 300, "bursty_sep": 1.0})


def stream(**kw):
    args = {"config": SMALL, "batch_size": 3, "tgt_len": 16, "seed": 0} | kw
    return TrainStream(LANG, **args)


def rows_text(s, n):
    """n batches glued back into one token stream per row (dropping the one-token overlaps)."""
    batches = [s.next_annotated_batch() for _ in range(n)]

    def glue(a):
        return np.concatenate(
            [getattr(batches[0], a)] + [getattr(b, a)[:, 1:] for b in batches[1:]], axis=1
        )

    return {k: glue(k) for k in ("tokens", "doc_ids", "target_kind", "target_distance")}, batches


def test_batches_have_the_promised_shape_and_overlap_by_one_token():
    s = stream()
    a, b = s.next_batch(), s.next_batch()
    assert a[0].shape == a[1].shape == (3, 17) and a[0].dtype == a[1].dtype == np.int64
    assert np.array_equal(a[0][:, -1], b[0][:, 0]) and np.array_equal(a[1][:, -1], b[1][:, 0])


@given(st.integers(0, 2**31), st.sampled_from([8, 16, 33]))
@settings(max_examples=10)
def test_eod_opens_each_document_and_carries_its_new_id(seed, tgt):
    rows, _ = rows_text(stream(seed=seed, tgt_len=tgt), 40)
    tok, ids = rows["tokens"], rows["doc_ids"]
    for r in range(len(tok)):
        eod = tok[r] == LANG.vocab.eod_id
        assert eod[0]  # the stream starts with a document
        step = np.diff(ids[r])
        assert np.array_equal(step != 0, eod[1:]) and (step >= 0).all() and (step <= 1).all()
        assert ids[r][0] == 0


def test_row_streams_do_not_depend_on_batch_size_or_segment_length():
    cfg = StreamConfig(**{**SMALL.__dict__, "sparse_len": 64})
    a, _ = rows_text(stream(config=cfg, batch_size=1, tgt_len=16), 30)
    b, _ = rows_text(stream(config=cfg, batch_size=4, tgt_len=7), 70)
    n = min(a["tokens"].shape[1], b["tokens"].shape[1])
    assert np.array_equal(a["tokens"][0, :n], b["tokens"][0, :n])


@given(st.integers(0, 2**31))
@settings(max_examples=8)
def test_same_seed_same_stream(seed):
    a, b = stream(seed=seed), stream(seed=seed)
    for _ in range(5):
        x, y = a.next_batch(), b.next_batch()
        assert np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])


def _windows(tokens, w=24):
    return {tuple(row[i : i + w]) for row in tokens for i in range(0, row.size - w, 4)}


def test_different_ranks_give_disjoint_streams():
    a, _ = rows_text(stream(rank=0, world_size=2, seed=3), 30)
    b, _ = rows_text(stream(rank=1, world_size=2, seed=3), 30)
    c, _ = rows_text(stream(rank=0, world_size=1, seed=4), 30)
    assert not _windows(a["tokens"]) & _windows(b["tokens"])
    assert not _windows(a["tokens"]) & _windows(c["tokens"])
    # rows of one rank are disjoint too
    assert not _windows(a["tokens"][:1]) & _windows(a["tokens"][1:])


@given(
    st.integers(0, 2**31),
    st.integers(0, 60),
    st.integers(1, 30),
    st.sampled_from([SMALL, FULL, CURRICULUM]),
)
@settings(max_examples=12)
def test_a_restored_stream_continues_identically(seed, before, after, config):
    s = stream(seed=seed, config=config)
    for _ in range(before):
        s.next_batch()
    state = json.loads(json.dumps(s.state_dict()))  # JSON-serialisable
    expected = [s.next_annotated_batch() for _ in range(after)]
    t = stream(seed=seed, config=config)
    t.next_batch()  # its own position is replaced
    t.load_state_dict(state)
    for e in expected:
        got = t.next_annotated_batch()
        for k in ("tokens", "doc_ids", "target_kind", "target_distance"):
            assert np.array_equal(getattr(e, k), getattr(got, k))
    assert t.batches == s.batches


def test_state_from_another_setup_is_refused():
    state = stream(seed=1).state_dict()
    with pytest.raises(ValueError, match="seed is 1 in the state, 2 here"):
        stream(seed=2).load_state_dict(state)
    with pytest.raises(ValueError, match="batch_size"):
        stream(seed=1, batch_size=4).load_state_dict(state)


def test_state_is_small():
    s = TrainStream(LANG, batch_size=32, tgt_len=64)
    s.next_batch()
    assert len(json.dumps(s.state_dict())) < 32 * 400


@given(st.integers(0, 2**31))
@settings(max_examples=6)
def test_stream_annotations_point_at_exact_distances(seed):
    """Every fact/sparse/updated target is an answer whose statement ends exactly `distance` earlier
    with a "." of a statement about the same entity and attribute; bursty targets repeat their pair."""
    rows, _ = rows_text(stream(seed=seed), 120)
    tok, kind, dist = rows["tokens"], rows["target_kind"], rows["target_distance"]
    period, question = LANG.period_id, LANG.question_id
    n_checked = 0
    for r in range(len(tok)):
        for t in np.flatnonzero(kind[r]):
            d = int(dist[r, t])
            if (
                kind[r, t] in (FACT, SPARSE, UPDATED) and t >= 4 and tok[r, t - 4] == question
            ):  # first answer token of "? ATTR of ENTITY VALUE ."
                if t - d - 4 < 0:
                    continue  # statement before the observed window
                assert tok[r, t - d] == period
                q_ent, q_attr = tok[r, t - 1], tok[r, t - 3]
                # the statement "the ATTR of ENTITY is VALUE ." ends at t − d
                stmt = tok[r, : t - d + 1]
                the = np.flatnonzero(stmt == LANG.the_id)[-1]
                assert (stmt[the + 1], stmt[the + 3]) == (q_attr, q_ent)
                value = stmt[the + 5 : -1]
                answer = tok[r, t : t + len(value)]  # cut at the window's end
                assert tuple(value[: len(answer)]) == tuple(answer)
                n_checked += 1
            elif kind[r, t] == BURSTY and t - d - 1 >= 0:
                assert tok[r, t - d] == tok[r, t] and tok[r, t - d - 1] == tok[r, t - 1]
    assert n_checked > 0


def test_answers_in_corpus_documents_do_not_leak():
    """In corpus documents an answer token occurs earlier in its document only in statements
    ("the … is VALUE ."), never in filler or other queries."""
    cfg = StreamConfig(**{**SMALL.__dict__, "p_bursty": 0, "p_sparse": 0})
    rows, _ = rows_text(stream(config=cfg), 100)
    tok, ids, kind = rows["tokens"], rows["doc_ids"], rows["target_kind"]
    for r in range(len(tok)):
        for t in np.flatnonzero((kind[r] == FACT) & (tok[r] != LANG.period_id)):
            same = (ids[r, :t] == ids[r, t]) & (tok[r, :t] == tok[r, t])
            for p in np.flatnonzero(same):
                k = p
                while tok[r, k] not in (LANG.is_id, LANG.question_id):
                    k -= 1
                assert tok[r, k] == LANG.is_id  # inside a statement's value


def test_mixture_weights_are_token_shares():
    cfg = StreamConfig(**{**SMALL.__dict__, "p_corpus": 0, "p_bursty": 0.5, "p_sparse": 0.5})
    rows, _ = rows_text(TrainStream(LANG, cfg, batch_size=4, tgt_len=64, seed=0), 150)
    bursty = total = 0
    for tok, ids in zip(rows["tokens"], rows["doc_ids"], strict=True):
        for d in np.unique(ids)[1:-1]:  # whole documents only
            doc = tok[ids == d]
            bursty += 0 if (doc == LANG.the_id).any() else len(doc)  # bursty text has no statements
            total += len(doc)
    assert 0.4 < bursty / total < 0.6


def test_config_round_trips_and_refuses_unknown_fields():
    d = json.loads(json.dumps(SMALL.to_dict()))
    assert StreamConfig.from_dict(d) == SMALL
    with pytest.raises(ValueError, match="unknown StreamConfig field"):
        StreamConfig.from_dict({**d, "p_bursy": 0.5})
    with pytest.raises(ValueError, match="distance bin"):
        StreamConfig(distance_bins=((2, 10, 1.0),))


@pytest.mark.parametrize("gap", [0, 2])
def test_bursty_sep_spaces_each_pair_like_a_fact(gap):
    """With bursty_sep every bursty value reads "KEY is VALUE", and its previous occurrence is the
    same key and value (so the value is predictable from the token before the separator only)."""
    cfg = StreamConfig(p_corpus=0, p_sparse=0, bursty_len=(16, 120), bursty_gap=gap, bursty_sep=1.0)
    rows, _ = rows_text(stream(config=cfg), 60)
    tok, kind, dist = rows["tokens"], rows["target_kind"], rows["target_distance"]
    n = 0
    for r, t in zip(*np.nonzero(kind == BURSTY), strict=True):
        d = int(dist[r, t])
        assert tok[r, t - 1] == LANG.is_id and tok[r, t] in LANG.value_word_ids
        if t - d - 2 >= 0:
            assert tok[r, t - d] == tok[r, t] and tok[r, t - d - 2] == tok[r, t - 2]
            assert tok[r, t - d - 1] == LANG.is_id
            n += 1
    assert n > 50


@pytest.mark.parametrize("gap", [0, 2])
def test_bursty_statement_states_each_key_once_and_reads_it_back_without_the_separator(gap):
    """With bursty_statement a key's first pair reads "KEY is VALUE" and every repeat "KEY VALUE"
    (a fact and its queries); a repeat's value is a target whose distance leads back to the same
    value, stated or read, after the same key."""
    cfg = StreamConfig(p_corpus=0, p_sparse=0, bursty_len=(16, 120), bursty_gap=gap,
                       bursty_statement=1.0, bursty_first=200)  # fmt: skip
    rows, _ = rows_text(stream(config=cfg), 60)
    tok, ids, kind, dist = (rows[k] for k in ("tokens", "doc_ids", "target_kind",
                                              "target_distance"))  # fmt: skip
    stated = read = 0
    for r, t in zip(*np.nonzero(kind == BURSTY), strict=True):
        d = int(dist[r, t])
        assert tok[r, t] in LANG.value_word_ids and tok[r, t - 1] in LANG.entity_ids
        if t - d - 1 >= 0 and ids[r, t - d - 2] == ids[r, t]:
            assert tok[r, t - d] == tok[r, t]
            before = t - d - 1
            if tok[r, before] == LANG.is_id:  # the statement: KEY is VALUE
                assert tok[r, before - 1] == tok[r, t - 1]
                stated += 1
            else:  # an earlier repeat: KEY VALUE
                assert tok[r, before] == tok[r, t - 1]
                read += 1
    assert stated > 30 and read > 30
    # a key's first pair is the only one with the separator
    for r in range(len(tok)):
        for d in np.unique(ids[r]):
            doc = tok[r, ids[r] == d]
            keys = [doc[i - 1] for i in np.flatnonzero(doc == LANG.is_id)]
            assert len(keys) == len(set(keys))


def test_bursty_first_makes_each_row_start_with_bursty_documents_only():
    """Documents that start before position `bursty_first` of a row are plain bursty ones (no
    statements, no queries, no separator); the mixture begins with the first document that starts
    at or after it, and its bursty documents take the separator."""
    rows, _ = rows_text(stream(config=CURRICULUM), 80)  # 80 × 16 tokens per row
    tok, ids = rows["tokens"], rows["doc_ids"]
    later = {"statements": 0, "separated bursty": 0}
    for r in range(len(tok)):
        for d in np.unique(ids[r]):
            at = np.flatnonzero(ids[r] == d)
            doc = tok[r, at]
            statement = (doc == LANG.the_id).any() or (doc == LANG.question_id).any()
            if at[0] < 300:
                assert not statement and not (doc == LANG.is_id).any()
            else:
                later["statements"] += int(statement)
                later["separated bursty"] += int(not statement and (doc == LANG.is_id).any())
    assert min(later.values()) > 0


def test_repeat_first_starts_each_row_with_repeated_spans_then_bursty_then_the_mixture():
    """Documents that start before `repeat_first` write a span of words twice (and carry no
    targets); then come the plain bursty documents until `bursty_first`, then the mixture."""
    config = StreamConfig(**{**CURRICULUM.__dict__, "repeat_first": 200, "repeat_len": (21, 40)})
    rows, _ = rows_text(stream(config=config), 80)
    tok, ids, kind = rows["tokens"], rows["doc_ids"], rows["target_kind"]
    seen = {"repeat": 0, "bursty": 0, "mixture": 0}
    for r in range(len(tok)):
        for d in np.unique(ids[r])[:-1]:  # the last document may be cut off
            at = np.flatnonzero(ids[r] == d)
            doc = tok[r, at]
            assert doc[0] == LANG.vocab.eod_id
            if at[0] < 200:
                span = (len(doc) - 1) // 2
                assert 21 <= len(doc) <= 40
                assert (doc[1 : 1 + span] == doc[1 + span : 1 + 2 * span]).all()
                assert (doc[1:] >= 2).all() and not kind[r, at].any()
                seen["repeat"] += 1
            elif at[0] < 300:
                assert (kind[r, at] == BURSTY).any() and not (doc == LANG.the_id).any()
                seen["bursty"] += 1
            else:
                seen["mixture"] += 1
    assert min(seen.values()) > 0


def test_repeat_stage_off_leaves_the_stream_as_it_was():
    """repeat_first 0 (the default) draws nothing more: existing presets' streams are unchanged."""
    a = rows_text(stream(config=CURRICULUM), 20)[0]
    b = rows_text(stream(config=StreamConfig(**{**CURRICULUM.__dict__, "repeat_first": 0})), 20)[0]
    assert all((a[k] == b[k]).all() for k in a)


@pytest.mark.parametrize("bad", [{"repeat_first": -1}, {"repeat_len": (2, 8)}])
def test_bad_repeat_stage_is_refused(bad):
    with pytest.raises(ValueError, match="repeat_"):
        StreamConfig(**bad)
