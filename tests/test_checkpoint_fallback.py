"""INVARIANT: a training run can always be continued from what it left on disk, and nothing it
writes can destroy its only good checkpoint.

- a run stopped before its first complete checkpoint is started over by --resume (saying so);
  without --resume the refusal names that way out;
- resume falls back past a damaged newest checkpoint to the previous complete one (saying so),
  and replays the same losses as an uninterrupted run;
- hidden `.step_*.tmp-*` directories left by a kill during a checkpoint write are removed on the
  next start;
- before a checkpoint is written the free space for one is checked: if short, the run stops
  with one line saying what is needed, and the last good checkpoint is kept."""

import json
import shutil
from collections import namedtuple

import pytest
import torch
from train_worker import VOCAB, ToyStream, tiny_config

from txl.checkpoint import CheckpointError, load_checkpoint
from txl.run_dir import RunDirError, latest_checkpoint
from txl.train import train


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def run(out, resume=False, **overrides):
    cfg = tiny_config(**overrides)
    stream = ToyStream(cfg.batch_size, cfg.model.tgt_len, seed=0)
    return train(
        cfg, stream, out_dir=out, tokenizer={"toy": VOCAB}, resume=resume, quiet=True,
        command="pytest",
    )  # fmt: skip


def losses(out):
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [(r["step"], r["loss"]) for r in map(json.loads, lines) if r["kind"] == "train"]


def starts(out):
    return [s["resumed_from"] for s in json.loads((out / "run.json").read_text())["starts"]]


def test_a_run_with_no_checkpoint_yet_is_started_over_by_resume(tmp_path, capsys):
    ref = tmp_path / "ref"
    run(ref, steps=3)
    out = tmp_path / "r"
    run(out, steps=3)
    # as if killed before its first checkpoint: run.json and some metrics, nothing checkpointed
    shutil.rmtree(out / "checkpoints")
    shutil.rmtree(out / "model")
    with pytest.raises(
        RunDirError, match="no complete checkpoint yet; start it over with --resume"
    ):
        run(out, steps=3)
    run(out, steps=3, resume=True)
    assert "--resume starts the run over from step 0" in capsys.readouterr().err
    assert losses(out) == losses(ref)  # no duplicated or stale lines
    assert starts(out) == [None, 0]


def test_resume_falls_back_past_a_damaged_newest_checkpoint(tmp_path, capsys):
    ref = tmp_path / "ref"
    run(ref, steps=6, checkpoint_every=2)
    out = tmp_path / "r"
    run(out, steps=6, checkpoint_every=2)
    ckpts = out / "checkpoints"
    assert sorted(p.name for p in ckpts.iterdir()) == ["step_00000004", "step_00000006"]
    torch.save({"a": 1}, ckpts / "step_00000006" / "train_state.pt")  # damaged, still complete
    shutil.rmtree(out / "model")
    run(out, steps=6, checkpoint_every=2, resume=True)
    err = capsys.readouterr().err
    assert "step_00000006/train_state.pt is not a txl training state" in err
    assert "falling back to the previous complete checkpoint" in err and "step_00000004" in err
    assert losses(out) == losses(ref)  # steps 5 and 6 replayed from step 4, bit for bit
    assert starts(out) == [None, 4]
    load_checkpoint(latest_checkpoint(out))  # the damaged one was replaced by a good one


def test_resume_with_every_checkpoint_damaged_names_the_newest(tmp_path):
    out = tmp_path / "r"
    run(out, steps=4, checkpoint_every=2)
    for name in ("step_00000002", "step_00000004"):
        (out / "checkpoints" / name / "rng.json").write_text("{}")
    shutil.rmtree(out / "model")
    with pytest.raises(CheckpointError, match=r"step_00000004/rng.json is not a txl RNG state"):
        run(out, steps=4, checkpoint_every=2, resume=True)


def test_partial_checkpoint_writes_are_cleaned_on_the_next_start(tmp_path, capsys):
    out = tmp_path / "r"
    run(out, steps=4, checkpoint_every=2)
    shutil.rmtree(out / "model")
    shutil.rmtree(out / "checkpoints" / "step_00000004")
    # what SIGKILL during the write of step 4's checkpoint and of the model leaves
    for partial in (
        out / "checkpoints" / ".step_00000004.tmp-0123abcd",
        out / ".model.tmp-89abcdef",
    ):
        partial.mkdir()
        (partial / "model.safetensors").write_bytes(b"half")
    run(out, steps=4, checkpoint_every=2, resume=True)
    assert "a checkpoint write that never finished" in capsys.readouterr().err
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        "step_00000002",
        "step_00000004",
    ]
    assert not any(p.name.startswith(".model") for p in out.iterdir())


Usage = namedtuple("Usage", "total used free")


def test_a_checkpoint_the_disk_cannot_hold_is_not_tried_and_the_last_good_one_is_kept(
    tmp_path, monkeypatch
):
    real = shutil.disk_usage
    calls = []

    def nearly_full(path):
        calls.append(path)
        u = real(path)
        return Usage(u.total, u.used, u.free if len(calls) == 1 else 1000)  # after the first

    monkeypatch.setattr(shutil, "disk_usage", nearly_full)
    out = tmp_path / "r"
    with pytest.raises(RunDirError) as e:
        run(out, steps=4, checkpoint_every=2, keep_checkpoints=1)
    msg = str(e.value)
    assert "\n" not in msg and "not enough free space" in msg and "MiB free" in msg
    assert "the last checkpoint" in msg and "step_00000002 is kept" in msg
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["step_00000002"]  # no .tmp
    load_checkpoint(out / "checkpoints" / "step_00000002")  # still whole
    monkeypatch.setattr(shutil, "disk_usage", real)
    result = run(out, steps=4, checkpoint_every=2, keep_checkpoints=1, resume=True)
    assert result.step == 4


def test_a_checkpoint_write_the_disk_refuses_stops_in_one_line_and_keeps_the_last(
    tmp_path, monkeypatch
):
    import errno

    import txl.train

    real = txl.train.save_train_state
    calls = []

    def full_on_the_second(path, **kwargs):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, **kwargs)

    monkeypatch.setattr(txl.train, "save_train_state", full_on_the_second)
    out = tmp_path / "r"
    with pytest.raises(RunDirError) as e:
        run(out, steps=4, checkpoint_every=2, keep_checkpoints=1)
    msg = str(e.value)
    assert "\n" not in msg and "cannot write the checkpoint" in msg and "step_00000004" in msg
    assert "No space left on device" in msg and "step_00000002 is kept" in msg
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["step_00000002"]
