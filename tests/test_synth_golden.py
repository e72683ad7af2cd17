"""Frozen outputs. The default model is trained on `Language.default()` and resumes its stream from a
state: if one of these hashes changes, checkpoints and runs made before stop matching.

`GOLDEN` is the history of `synth.GENERATOR_VERSION`: each version with the text it makes. Text that
changes on purpose gets a new row under a new version (and `GENERATOR_VERSION` moves to it); a row is
never edited, so a changed hash cannot pass under the version number of the old text."""

import hashlib
import itertools

import synth
from synth import Language, TrainStream, make_pair, make_rng
from synth.edits import EDITS

# version → (language fingerprint, training stream sha256, one pair per edit (sha256 prefix))
GOLDEN = {
    1: (  # queries "? ATTR of ENTITY : VALUE ."
        "716b02eacc594073e4b3334a8798fd5b75649bb40be33ec61fe21ac19b8783ea",
        "66a153f56859f4c963e63f92d503f80c83b9286c7cf9e36b79505053ddd1a8a9",
        {
            "insert": "18950fe2736307dd",
            "replace": "b11c87f9d3aab259",
            "delete": "f6f319bb6e7f74aa",
            "distract": "f825fca5500d06e1",
            "update": "17f2f75143d14e4f",
            "topic-shift": "fe794bd60f73bb39",
            "boundary": "5156a12f9c0d7b45",
            "identity": "60e343e20a260ca8",
        },
    ),
    2: (  # queries "? ATTR of ENTITY VALUE ." (no ":" before the answer)
        "97a7b3870dc4d8f3a25d693f9cad6a1b25ae05d20adb511a64a9766662556488",
        "1df8081bd61d975744dd3226d966f5e04f99c35f075d9b66d96c6d4aad97f16b",
        {
            "insert": "a21b4879b694517a",
            "replace": "10b3ecbeda1a6331",
            "delete": "a28752d2f7a4ff5f",
            "distract": "9cf023f368a49d0e",
            "update": "d538ec438219da0b",
            "topic-shift": "684de1099bf0829d",
            "boundary": "96c032edfd9b6949",
            "identity": "a43c2c91af7cd436",
        },
    ),
}
# 3: the rebind edit; every earlier text unchanged (the row is 2's, plus rebind's pair)
GOLDEN[3] = (*GOLDEN[2][:2], {**GOLDEN[2][2], "rebind": "6fb18fbb159a0a3f"})
# edits renamed since a row was measured (the text is the same): old name → new name
RENAMED = {"boundary": "prior-doc-conflict"}
FINGERPRINT, STREAM_SHA256, _PAIRS = GOLDEN[synth.GENERATOR_VERSION]
PAIRS = {RENAMED.get(name, name): h for name, h in _PAIRS.items()}


def _h(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(a.astype("<i8").tobytes())
    return h.hexdigest()


def test_generator_version_is_the_newest_row():
    assert sorted(GOLDEN) == list(range(1, len(GOLDEN) + 1))
    assert synth.GENERATOR_VERSION == max(GOLDEN)


def test_every_version_made_other_text():
    # a new row identical to the one before it is a version bump without a change (or a row
    # copied instead of measured): each version changed some text, or added an edit
    rows = [GOLDEN[v] for v in sorted(GOLDEN)]
    for before, after in itertools.pairwise(rows):
        assert before != after
        assert before[:2] != after[:2] or set(before[2]) < set(after[2])


def test_default_language_is_frozen():
    assert Language.default().fingerprint == FINGERPRINT


def test_training_stream_is_frozen():
    s = TrainStream(Language.default(), batch_size=2, tgt_len=16, seed=0)
    assert _h(*(a for _ in range(50) for a in s.next_batch())) == STREAM_SHA256


def test_pairs_are_frozen():
    lang = Language.default()
    assert set(PAIRS) == set(EDITS)
    for name, want in PAIRS.items():
        p = make_pair(name, lang, make_rng(0, "probe"), distance=40)
        assert _h(p.variant.tokens, p.base.tokens, p.alignment)[:16] == want, name
