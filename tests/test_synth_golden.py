"""Frozen outputs. The default model is trained on `Language.default()` and resumes its stream from a
state: if one of these hashes changes, checkpoints and runs made before stop matching. Change them
only on purpose (a new language version), never to make a test pass."""

import hashlib

from synth import Language, TrainStream, make_pair, make_rng
from synth.edits import EDITS

DEFAULT_FINGERPRINT = "97a7b3870dc4d8f3a25d693f9cad6a1b25ae05d20adb511a64a9766662556488"
STREAM_SHA256 = "1df8081bd61d975744dd3226d966f5e04f99c35f075d9b66d96c6d4aad97f16b"
PAIRS = {
    "insert": "a21b4879b694517a",
    "replace": "10b3ecbeda1a6331",
    "delete": "a28752d2f7a4ff5f",
    "distract": "9cf023f368a49d0e",
    "update": "d538ec438219da0b",
    "topic-shift": "684de1099bf0829d",
    "boundary": "96c032edfd9b6949",
    "identity": "a43c2c91af7cd436",
}


def _h(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(a.astype("<i8").tobytes())
    return h.hexdigest()


def test_default_language_is_frozen():
    assert Language.default().fingerprint == DEFAULT_FINGERPRINT


def test_training_stream_is_frozen():
    s = TrainStream(Language.default(), batch_size=2, tgt_len=16, seed=0)
    assert _h(*(a for _ in range(50) for a in s.next_batch())) == STREAM_SHA256


def test_pairs_are_frozen():
    lang = Language.default()
    assert set(PAIRS) == set(EDITS)
    for name, want in PAIRS.items():
        p = make_pair(name, lang, make_rng(0, "probe"), distance=40)
        assert _h(p.variant.tokens, p.base.tokens, p.alignment)[:16] == want, name
