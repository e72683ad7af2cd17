"""A scored chunk's file gives back what the scoring call returned, bit for bit, and only for
the items it was written for; a damaged or foreign file is not taken (its chunk is scored
again)."""

import math

import numpy as np

from probes.framework import scored_chunks


def results():
    return [
        ({"pair": 3, "delta": 0.1 + 0.2, "nan": math.nan, "inf": -math.inf, "bands": [1.5, None],
          "reach": "within", "np": np.float32(0.25), "ok": True},
         {"nll": np.array([0.1, np.nan], np.float32), "labels": np.array(["a", "bc"]),
          "view": {"at": np.arange(3, dtype=np.int64)}}),
        ({"pair": 5, "delta": -1e-300}, None),
        ({"text": 7}, np.array([1.0, 2.0])),
    ]  # fmt: skip


def same(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b and type(a if not isinstance(a, np.generic) else a.item()) is type(b)


def test_a_chunk_comes_back_bit_for_bit_for_its_own_items(tmp_path):
    scored_chunks.write(tmp_path, "00-00000.npz", [3, 5, 7], results())
    kept = scored_chunks.Kept(tmp_path)
    got = kept.results("00-00000.npz", [3, 5, 7])
    assert got is not None and kept.taken == 1
    for (r0, x0), (r1, x1) in zip(results(), got, strict=True):
        assert same(r0, r1) and same(x0, x1), (r0, r1)
    assert kept.results("00-00000.npz", [3, 5]) is None  # another plan's chunk: scored again
    assert kept.results("00-00001.npz", [3, 5, 7]) is None  # never written
    assert kept.taken == 1


def test_a_damaged_or_foreign_chunk_file_is_not_taken(tmp_path):
    scored_chunks.write(tmp_path, "00-00000.npz", [3, 5, 7], results())
    file = tmp_path / scored_chunks.FOLDER / "00-00000.npz"
    raw = file.read_bytes()
    kept = scored_chunks.Kept(tmp_path)
    for damaged in (raw[: len(raw) // 2], b"", b"not a zip at all"):
        file.write_bytes(damaged)
        assert kept.results("00-00000.npz", [3, 5, 7]) is None
    np.savez(file, items=np.array([3, 5, 7]), records=np.array("[{}]"), extras=np.array("[]"))
    assert kept.results("00-00000.npz", [3, 5, 7]) is None  # counts that do not agree
    file.unlink()
    file.mkdir()  # not a regular file
    assert kept.results("00-00000.npz", [3, 5, 7]) is None


def test_a_finished_run_keeps_no_chunks(tmp_path):
    scored_chunks.write(tmp_path, "00-00000.npz", [1], [({"a": 1}, None)])
    scored_chunks.remove(tmp_path)
    assert not (tmp_path / scored_chunks.FOLDER).exists()
