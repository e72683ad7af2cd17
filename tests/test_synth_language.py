"""Vocabulary, grammar and the language's JSON identity."""

import json
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from synth.language import (
    FACT_VALUE_OFFSET,
    MAX_FACT_TOKENS,
    MAX_VALUE_TOKENS,
    QUERY_ANSWER_OFFSET,
    Language,
    LanguageConfig,
)
from synth.rng import make_rng

LANG = Language.default()
SMALL = LanguageConfig(n_entities=12, n_attributes=4, n_value_words=6, n_value_prefixes=2,
                       n_filler=24, n_topics=3, topic_words=6, seed=5)  # fmt: skip


@given(st.lists(st.integers(0, LANG.vocab.size - 1), max_size=60))
def test_encode_decode_roundtrip_ids(ids):
    assert LANG.encode(LANG.decode(ids)).tolist() == ids


@given(st.lists(st.sampled_from(LANG.vocab.tokens), max_size=60))
def test_decode_encode_roundtrip_text(words):
    text = " ".join(words)
    assert LANG.decode(LANG.encode(text)) == text


def test_unknown_token_is_refused_with_one_line():
    with pytest.raises(ValueError, match="unknown token 'zzz'"):
        LANG.encode("the zzz")


def test_default_language_sizes():
    c = LANG.config
    assert (
        LANG.vocab.size
        == 8 + c.n_attributes + c.n_value_prefixes + c.n_value_words + c.n_entities + c.n_filler
    )
    assert 200 <= LANG.vocab.size <= 1000
    assert len(LANG.values) == 2 * c.n_value_words
    assert {len(v) for v in LANG.values} == {1, 2}
    assert LANG.vocab.tokens[:2] == ("<pad>", "<eod>")
    assert (LANG.vocab.pad_id, LANG.vocab.eod_id) == (0, 1)


def test_token_classes_are_disjoint():
    groups = [LANG.attribute_ids, LANG.value_token_ids, LANG.entity_ids, LANG.filler_ids]
    allids = np.concatenate(groups)
    assert len(set(allids.tolist())) == len(allids)


def test_every_value_has_a_near_miss():
    for v in LANG.values:
        near = LANG.near_misses(v)
        assert near and all(set(n) & set(v) and n != v for n in near)


def test_templates_put_value_and_answer_at_fixed_offsets():
    e, a, v = int(LANG.entity_ids[0]), int(LANG.attribute_ids[0]), LANG.values[-1]
    f, q = LANG.fact_tokens(e, a, v), LANG.query_tokens(e, a, v)
    assert tuple(f[FACT_VALUE_OFFSET : FACT_VALUE_OFFSET + len(v)]) == v
    assert tuple(q[QUERY_ANSWER_OFFSET : QUERY_ANSWER_OFFSET + len(v)]) == v
    assert LANG.decode(f).startswith("the ") and LANG.decode(q).startswith("? ")


@pytest.mark.parametrize(
    "config", [LanguageConfig(), LanguageConfig(n_value_words=3, n_value_prefixes=1, seed=5)]
)
def test_the_longest_value_and_statement(config):
    lang = Language(config)
    longest = max(lang.values, key=len)
    assert len(longest) == MAX_VALUE_TOKENS
    e, a = int(lang.entity_ids[0]), int(lang.attribute_ids[0])
    assert len(lang.fact_tokens(e, a, longest)) == MAX_FACT_TOKENS


def test_config_hash_is_the_sha256_of_its_canonical_json():
    import hashlib

    for c in (LanguageConfig(), LanguageConfig(n_topics=3, topic_weight=0.25, seed=9)):
        canon = json.dumps(c.to_dict(), sort_keys=True, separators=(",", ":"))
        assert c.sha256 == hashlib.sha256(canon.encode()).hexdigest()
    # recorded in every probe run (run.json: synth.language_config_sha256)
    assert LanguageConfig().sha256 == (
        "33126bb9b35658e7f4a17e6a7664fea46c1cf54bf5b66053810f613db5adf90c"
    )


def test_json_roundtrip_rebuilds_the_same_language():
    d = json.loads(json.dumps(LANG.to_json()))
    again = Language.from_json(d)
    assert again == LANG and again.vocab.tokens == LANG.vocab.tokens
    assert again.fingerprint == d["fingerprint"] == LANG.fingerprint


def test_from_json_refuses_a_tampered_file():
    d = LANG.to_json()
    bad = {**d, "tokens": [*d["tokens"][:-1], "zzz"]}
    with pytest.raises(ValueError, match="does not match"):
        Language.from_json(bad)
    with pytest.raises(ValueError, match="not a synth language"):
        Language.from_json({"vocab": ["a"]})
    with pytest.raises(ValueError, match="invalid synth language config"):
        Language.from_json({**d, "config": {**d["config"], "n_colours": 3}})


def test_check_compatible_refuses_another_language():
    other = Language(SMALL)
    LANG.check_compatible(LANG.to_json())
    with pytest.raises(ValueError, match="language mismatch") as e:
        LANG.check_compatible(other.to_json())
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="not a synth language"):
        LANG.check_compatible({"type": "bpe"})


def test_language_is_deterministic_from_its_config():
    a, b = Language(SMALL), Language(SMALL)
    assert a.fingerprint == b.fingerprint
    assert np.array_equal(a.grammar.P, b.grammar.P)
    assert Language(LanguageConfig(**{**SMALL.to_dict(), "seed": 6})).fingerprint != a.fingerprint


def test_the_stationary_distribution_has_the_same_bits_whatever_the_blas():
    """The sampling tables start from π: computed without BLAS, it takes no CPU-chosen kernel
    and no thread split (a LAPACK solve differs between 1 and 2 OpenBLAS threads, and between
    OpenBLAS's kernels for two CPUs), and it is stationary to rounding."""
    import subprocess
    import sys

    code = (
        "import hashlib; from synth.language import Language, LanguageConfig; "
        f"g = Language(LanguageConfig(**{SMALL.to_dict()!r})).grammar; "
        "print(hashlib.sha256(g.stationary.tobytes()).hexdigest())"
    )
    digests = set()
    for core, threads in [("", "1"), ("", "2"), ("Prescott", "1"), ("Haswell", "2")]:
        env = {**os.environ, "OPENBLAS_NUM_THREADS": threads, "OPENBLAS_CORETYPE": core}
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        digests.add(r.stdout.strip())
    assert len(digests) == 1
    g = Language(SMALL).grammar
    for t in range(g.n_topics + 1):
        pi = g.stationary[t]
        np.testing.assert_allclose(pi @ g.P[t], pi, rtol=0, atol=1e-15)
        assert abs(pi.sum() - 1.0) < 1e-15 and (pi > 0).all()


def test_transition_rows_are_distributions_and_filler_excludes_values():
    P = LANG.grammar.P
    np.testing.assert_allclose(P.sum(axis=2), 1.0, atol=1e-12)
    words = LANG.grammar.sample(
        np.arange(-1, LANG.n_topics), make_rng(0).random((LANG.n_topics + 1, 300))
    )
    toks = LANG.filler_tokens(words)
    assert not LANG.is_value_token(toks).any()
    assert np.isin(toks, LANG.filler_ids).all()


@pytest.mark.parametrize("topic", [0, 3, -1])
def test_entropy_rate_matches_the_sampled_chain(topic):
    """The exact rate equals the mean −log P(next | previous) along a long sampled chain."""
    g = LANG.grammar
    t = g.n_topics if topic < 0 else topic
    w = g.sample(np.full(64, topic), make_rng(1).random((64, 400)))
    nll = -np.log(g.P[t][w[:, :-1], w[:, 1:]])
    assert abs(nll.mean() - LANG.filler_entropy_rate(topic)) < 0.03


def test_knowing_the_topic_lowers_the_floor():
    rate, blind = LANG.filler_entropy_rate(), LANG.filler_bigram_entropy()
    assert 1.0 < rate < blind < np.log(LANG.config.n_filler)


def test_bayes_filler_nll_is_the_topic_posterior_predictive():
    """Word by word: −log Σ_t p(t | words so far) P_t(word | previous word), uniform prior."""
    g = LANG.grammar
    w = g.sample(np.array([5]), make_rng(2).random((1, 12)))[0]
    want, post = [], np.full(g.n_topics, 1.0 / g.n_topics)
    for k, x in enumerate(w):
        p = g.stationary[: g.n_topics, x] if k == 0 else g.P[: g.n_topics, w[k - 1], x]
        want.append(-np.log(post @ p))
        post = post * p / (post @ p)
    np.testing.assert_allclose(g.bayes_nll(w), want, rtol=1e-10)


def test_bayes_filler_floor_lies_between_the_known_and_the_blind_floors():
    """Long chains reveal their topic: the Bayes floor approaches the entropy rate from above."""
    g = LANG.grammar
    w = g.sample(np.arange(g.n_topics), make_rng(3).random((g.n_topics, 600)))
    floor = np.mean([g.bayes_nll(row)[1:].mean() for row in w])
    assert LANG.filler_entropy_rate() - 0.03 < floor < LANG.filler_bigram_entropy()
    assert np.mean([g.bayes_nll(row)[1:40].mean() for row in w]) > floor  # the prefix helps


def test_filler_bayes_nll_reads_each_document_as_its_own_chain():
    g = LANG.grammar
    a, b = g.sample(np.array([1, 2]), make_rng(4).random((2, 6)))
    fact = LANG.fact_tokens(int(LANG.entity_ids[0]), int(LANG.attribute_ids[0]), LANG.values[0])
    toks = np.concatenate(
        [LANG.filler_tokens(a[:3]), fact, LANG.filler_tokens(a[3:]), LANG.filler_tokens(b)]
    )
    docs = np.array([0] * (6 + len(fact)) + [1] * 6)
    got = LANG.filler_bayes_nll(toks, docs)
    assert np.isnan(got[3 : 3 + len(fact)]).all()
    np.testing.assert_allclose(got[~np.isnan(got)][:6], g.bayes_nll(a))
    np.testing.assert_allclose(got[-6:], g.bayes_nll(b))


def test_topic_clusters_dominate_their_topics():
    """A topic's own cluster is about topic_weight of its stationary mass: the topic is visible."""
    g = LANG.grammar
    for t in range(g.n_topics):
        assert g.stationary[t][g.clusters[t]].sum() > LANG.config.topic_weight


def test_disjoint_entity_pools():
    train = LANG.entity_pool("train", disjoint=True)
    probe = LANG.entity_pool("probe", disjoint=True)
    assert not set(train.tolist()) & set(probe.tolist())
    assert len(train) + len(probe) == len(LANG.entity_ids)
    assert np.array_equal(LANG.entity_pool("probe"), LANG.entity_ids)
