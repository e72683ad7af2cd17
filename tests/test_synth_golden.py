"""Frozen outputs. The default model is trained on `Language.default()` and resumes its stream from a
state: if one of these hashes changes, checkpoints and runs made before stop matching. Change them
only on purpose (a new language version), never to make a test pass."""

import hashlib

from synth import Language, TrainStream, make_pair, make_rng
from synth.edits import EDITS

DEFAULT_FINGERPRINT = "716b02eacc594073e4b3334a8798fd5b75649bb40be33ec61fe21ac19b8783ea"
STREAM_SHA256 = "66a153f56859f4c963e63f92d503f80c83b9286c7cf9e36b79505053ddd1a8a9"
PAIRS = {
    "insert": "18950fe2736307dd",
    "replace": "b11c87f9d3aab259",
    "delete": "f6f319bb6e7f74aa",
    "distract": "f825fca5500d06e1",
    "update": "17f2f75143d14e4f",
    "topic-shift": "fe794bd60f73bb39",
    "boundary": "5156a12f9c0d7b45",
    "identity": "60e343e20a260ca8",
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
