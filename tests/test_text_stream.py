"""synth.text.train_stream: the synthetic stream's contract on real text — one-token overlap, rows
that continue, `<eod>` opening every document with a new id, disjoint rank shards, and a
resumed stream equal to the uninterrupted one token for token (facts mixed in included)."""

import itertools
import json

import numpy as np
import pytest
from text_helpers import require_tokenizers, small_bpe

require_tokenizers()

from synth.text.default_corpus import default_corpus  # noqa: E402
from synth.text.facts_mix import FactMixer  # noqa: E402
from synth.text.train_stream import TextStream, TokenizedDocs  # noqa: E402


@pytest.fixture(scope="module")
def docs():
    texts = sorted((d.text for d in default_corpus("train").documents), key=len)[:12]
    return TokenizedDocs.build(texts, small_bpe())


def stream(docs, **kw):
    kw = {"batch_size": 3, "tgt_len": 48, "seed": 5, **kw}
    return TextStream(docs, small_bpe().vocab.eod_id, **kw)


def test_batches_overlap_by_one_token_and_eod_opens_every_document_with_a_new_id(docs):
    s = stream(docs)
    n = 3 * docs.n_tokens // 48  # about three epochs of the 12-document shard
    batches = [s.next_batch() for _ in range(n)]
    for (t0, d0), (t1, d1) in itertools.pairwise(batches):
        assert np.array_equal(t0[:, -1], t1[:, 0]) and np.array_equal(d0[:, -1], d1[:, 0])
    tokens = np.concatenate([batches[0][0]] + [t[:, 1:] for t, _ in batches[1:]], axis=1)
    ids = np.concatenate([batches[0][1]] + [d[:, 1:] for _, d in batches[1:]], axis=1)
    eod = small_bpe().vocab.eod_id
    for r in range(3):
        starts = np.flatnonzero(np.r_[True, ids[r, 1:] != ids[r, :-1]])
        assert (tokens[r, starts[1:]] == eod).all() and (np.diff(ids[r, starts]) == 1).all()
        assert (tokens[r] == eod).sum() == len(starts) - (tokens[r, 0] != eod)
        # each epoch reads every document of the shard once, in its own order
        assert len(starts) > 2 * len(docs)
        lengths = np.diff(starts)[: len(docs)]
        assert sorted(lengths.tolist()) == sorted((np.diff(docs.starts) + 1).tolist())


def test_a_resumed_stream_continues_token_for_token(docs):
    mixer = FactMixer(small_bpe())
    a = stream(docs, facts=0.7, mixer=mixer)
    for _ in range(37):
        a.next_batch()
    state = json.loads(json.dumps(a.state_dict()))
    b = stream(docs, facts=0.7, mixer=FactMixer(small_bpe()))
    b.load_state_dict(state)
    for _ in range(60):
        (ta, da), (tb, db) = a.next_batch(), b.next_batch()
        assert np.array_equal(ta, tb) and np.array_equal(da, db)
    other = stream(docs, seed=6)
    with pytest.raises(ValueError, match="seed"):
        other.load_state_dict(state)


def test_facts_are_mixed_in_as_english_sentences(docs):
    tok = small_bpe()
    plain = np.concatenate([stream(docs).next_batch()[0] for _ in range(1)])
    s = stream(docs, facts=1.0, mixer=FactMixer(tok))
    text = " ".join(tok.decode(s.next_batch()[0][r]) for _ in range(30) for r in range(3))
    assert " What is the " in text and " It is " in text and " The " in text
    assert plain.shape == (3, 49)


def test_ranks_read_disjoint_shards(docs):
    seen = []
    for rank in range(3):
        s = stream(docs, rank=rank, world_size=3)
        assert set(s.shard.tolist()) == set(range(rank, len(docs), 3))
        seen.append(set(s.shard.tolist()))
    assert not (seen[0] & seen[1]) and not (seen[1] & seen[2])
    with pytest.raises(ValueError, match="gets no document"):
        stream(docs, rank=12, world_size=13)
