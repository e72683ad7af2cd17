"""probes.framework.results: run directories, atomic JSON, samples as they come, plain npz."""

import datetime as dt
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from probes.framework import results


def test_run_dir_layout(tmp_path):
    now = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    rd = results.RunDir.create(tmp_path, "fact-swap", "my model/v1", now=now)
    rel = rd.path.relative_to(tmp_path).parts
    assert rel[:2] == ("fact-swap", "my-model-v1")
    stamp, hexpart = rel[2].rsplit("-", 1)
    assert stamp == "20250102T030405Z" and len(hexpart) == 8 and int(hexpart, 16) >= 0
    other = results.RunDir.create(tmp_path, "fact-swap", "my model/v1", now=now)
    assert other.path != rd.path


def test_json_is_sorted_strict_and_atomic(tmp_path):
    p = tmp_path / "x.json"
    results.write_json(p, {"b": np.float32(1.5), "a": [np.int64(2), (3, 4)], "c": np.bool_(True)})
    text = p.read_text()
    assert text.index('"a"') < text.index('"b"')
    assert json.loads(text) == {"a": [2, [3, 4]], "b": 1.5, "c": True}
    results.write_json(p, {"none": float("nan"), "b": float("inf")})  # non-finite: no value
    assert json.loads(p.read_text()) == {"none": None, "b": None}
    with pytest.raises(TypeError):
        results.write_json(p, {"b": object()})
    assert json.loads(p.read_text())["b"] is None  # the old file survives a failed write
    assert [f for f in os.listdir(tmp_path) if f.startswith(".")] == []  # no temp file left


def test_samples_are_appended_and_readable_after_an_interruption(tmp_path):
    rd = results.RunDir.create(tmp_path, "p", "m")
    rd.append_sample({"pair": 0, "delta": 0.5})
    rd.append_sample({"pair": 1, "delta": -0.5})
    # visible before close (flushed per line)
    assert len((rd.path / "samples.jsonl").read_text().splitlines()) == 2
    with open(rd.path / "samples.jsonl", "a") as f:
        f.write('{"pair": 2, "del')  # a line cut by an interruption
    rd.close()
    assert [s["pair"] for s in results.load_samples(rd.path)] == [0, 1]


def test_a_finished_run_records_at_least_the_memory_it_held(tmp_path):
    held = np.ones(64 << 20, dtype=np.uint8)  # 64 MiB, every page touched
    rd = results.RunDir.create(tmp_path, "p", "m")
    record = {"status": "running"}
    rd.finish(record, passed=True, elapsed_s=1.0)
    written = json.loads((rd.path / "run.json").read_text())
    assert written["peak_rss_mb"] >= 64 and written["status"] == "complete"
    del held


def test_the_peak_counts_a_worker_process_that_held_more_than_this_one():
    """A diagnose's --jobs workers hold the model and its scores in their own processes: the
    recorded peak must cover the largest of them, not the parent that waited for them."""
    own = results.peak_rss_mb()
    held = own + 128  # MB, every page touched: more than this process ever held
    subprocess.run([sys.executable, "-c", f"b = b'x' * ({held} << 20)"], check=True)
    assert results.peak_rss_mb() >= held > own


def test_an_interrupted_run_records_how_long_it_ran_and_its_peak(tmp_path, monkeypatch):
    """Its time counts from `began` (a run's preparation precedes its recording) as a finished
    run's does; a clock that stands still makes the count exact."""
    monkeypatch.setattr(time, "perf_counter", lambda: 1000.0)
    rd = results.RunDir.create(tmp_path, "p", "m")
    with pytest.raises(KeyboardInterrupt), rd.recording({"status": "running"}, began=900.0):
        raise KeyboardInterrupt
    written = json.loads((rd.path / "run.json").read_text())
    assert written["status"] == "interrupted" and written["peak_rss_mb"] > 0
    assert written["elapsed_s"] == 100.0 and "sittings_s" not in written


def test_a_resumed_run_counts_each_sitting_once_and_a_lost_one_leaves_a_lower_bound():
    assert results.add_sitting({}, 2.5) == 2.5  # a run that never resumed: one sitting
    record = {"sittings_s": [10.0, None], "resumed_utc": ["first", "second"]}  # 2nd was killed
    assert results.add_sitting(record, 2.5) == 12.5
    assert record["sittings_s"] == [10.0, None, 2.5]
    assert results.add_sitting(record, 3.0) == 13.0  # its end recorded twice (a failed write,
    assert record["sittings_s"] == [10.0, None, 3.0]  # then the interruption): counted once
    assert results.larger_peak({"peak_rss_mb": 1 << 30}) == 1 << 30  # an earlier sitting's
    assert results.larger_peak({"peak_rss_mb": True}) == results.peak_rss_mb()


@pytest.mark.parametrize(
    "value, peak, seconds",
    [(2753, 2753, 2753.0), (2753.4, 2753, 2753.4), (True, None, None), (-1, None, None),
     (float("nan"), None, None), ("2753", None, None), (None, None, None)],
)  # fmt: skip
def test_only_a_finite_non_negative_number_reads_as_a_recorded_peak_or_time(value, peak, seconds):
    assert results.recorded_peak(value) == peak
    assert results.recorded_number(value) == seconds


def test_npz_loads_without_pickle(tmp_path):
    rd = results.RunDir.create(tmp_path, "p", "m")
    rd.write_npz("tokens.npz", {"nll": np.arange(3.0), "pair": np.arange(3)})
    with np.load(rd.path / "tokens.npz", allow_pickle=False) as z:
        assert z["nll"].tolist() == [0.0, 1.0, 2.0]
    with pytest.raises(TypeError):
        rd.write_npz("bad.npz", {"x": np.array([{"a": 1}], dtype=object)})


def test_unwritable_out_is_refused_without_creating_anything(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(results.RunDirError, match="is a file"):
        results.check_writable(f / "sub")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):  # running as root: permissions do not bind
            pytest.skip("permissions are not enforced for this user")
        with pytest.raises(results.RunDirError, match="not writable"):
            results.RunDir.create(ro / "deeper", "p", "m")
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o700)


def test_load_run_refuses_a_non_run_directory(tmp_path):
    with pytest.raises(results.RunDirError, match="not a run directory"):
        results.load_run(tmp_path)
