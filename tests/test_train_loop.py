"""The txl training loop on a toy numpy stream (txl trains on any stream, never on synth here)."""

import json

import numpy as np
import pytest
import torch
from train_worker import VOCAB, ToyStream, tiny_config

from txl.checkpoint import load_checkpoint
from txl.metrics_log import MetricsLog
from txl.run_dir import RunDirError, latest_checkpoint
from txl.train import NonFiniteLossError, train
from txl.train_config import ConfigError


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def run(out, stream=None, eval_fn=None, resume=False, **overrides):
    cfg = tiny_config(**overrides)
    stream = stream or ToyStream(cfg.batch_size, cfg.model.tgt_len, seed=0)
    result = train(
        cfg,
        stream,
        out_dir=out,
        tokenizer={"toy": VOCAB},
        eval_fn=eval_fn,
        resume=resume,
        quiet=True,
        command="pytest",
    )
    return result, stream


def records(out, kind="train"):
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def losses(out):
    return [r["loss"] for r in records(out)]


def test_run_writes_metrics_checkpoints_and_a_final_model_with_its_config(tmp_path):
    result, _ = run(
        tmp_path / "r",
        steps=4,
        checkpoint_every=2,
        eval_every=2,
        eval_fn=lambda model, step: {"nll": 1.0 + step, "bins": [{"acc": 0.5}]},
    )
    out = tmp_path / "r"
    train_lines = records(out)
    assert [r["step"] for r in train_lines] == [1, 2, 3, 4]
    assert all(r["tokens_per_s"] > 0 and np.isfinite(r["loss"]) for r in train_lines)
    assert train_lines[-1]["tokens"] == 4 * 4 * 8
    assert [(r["step"], r["nll"]) for r in records(out, "eval")] == [(2, 3.0), (4, 5.0)]
    assert result.step == 4 and result.loss == train_lines[-1]["loss"]
    assert result.eval["bins"] == [{"acc": 0.5}]

    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        "step_00000002",
        "step_00000004",
    ]
    assert latest_checkpoint(out) == out / "checkpoints" / "step_00000004"
    final = load_checkpoint(out / "model")
    assert final.train_state is None and final.extra_files["COMMAND"] == "pytest\n"
    # the model keeps its log compact, and it reads back to every step's loss and evaluation
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "metrics.jsonl").write_text(final.extra_files["metrics.jsonl"])
    shipped = MetricsLog(tmp_path / "m" / "metrics.jsonl").records()
    assert [(r["step"], r["loss"]) for r in shipped if r["kind"] == "train"] == [
        (r["step"], r["loss"]) for r in train_lines
    ]
    assert [r for r in shipped if r["kind"] == "eval"] == records(out, "eval")
    saved = final.training["config"]
    assert saved == json.loads((out / "run.json").read_text())["config"]
    assert saved == tiny_config(steps=4, checkpoint_every=2, eval_every=2).to_dict()
    for a, b in zip(
        final.model.state_dict().values(), result.model.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_keeps_only_the_newest_checkpoints(tmp_path):
    run(tmp_path / "r", steps=4, checkpoint_every=1, keep_checkpoints=2)
    names = sorted(p.name for p in (tmp_path / "r" / "checkpoints").iterdir())
    assert names == ["step_00000003", "step_00000004"]


def test_training_lowers_the_loss_on_a_learnable_stream(tmp_path):
    run(tmp_path / "r", steps=60, lr=1e-2, warmup_steps=5, **{"model.dropout": 0.0})
    ls = losses(tmp_path / "r")
    assert np.mean(ls[-10:]) < np.mean(ls[:5]) - 0.5  # the +3 chain has ~1.1 nats of noise


def test_evaluation_never_changes_what_training_computes(tmp_path):
    def noisy_eval(model, step):  # consumes every RNG and runs the model
        torch.rand(100), np.random.rand(10)  # noqa: NPY002 (the global RNG, on purpose)
        model(torch.randint(0, VOCAB, (2, 5)))
        return {"x": float(torch.rand(()))}

    run(tmp_path / "a", steps=5)
    run(tmp_path / "b", steps=5, eval_every=1, eval_fn=noisy_eval)
    assert losses(tmp_path / "a") == losses(tmp_path / "b")


def test_eval_callback_sees_the_model_in_eval_mode_without_grad(tmp_path):
    seen = []

    def probe(model, step):
        seen.append((step, model.training, torch.is_grad_enabled()))
        return {}

    run(tmp_path / "r", steps=2, eval_every=1, eval_fn=probe)
    assert seen == [(1, False, False), (2, False, False)]


def test_gradient_accumulation_splits_rows_without_changing_the_update(tmp_path):
    run(tmp_path / "a", steps=4, **{"model.dropout": 0.0})
    run(tmp_path / "b", steps=4, grad_accum=2, **{"model.dropout": 0.0})
    torch.testing.assert_close(
        torch.tensor(losses(tmp_path / "a")),
        torch.tensor(losses(tmp_path / "b")),
        rtol=1e-5,
        atol=1e-6,
    )


def test_carried_memory_holds_the_last_mem_len_positions_of_each_row(tmp_path):
    out = tmp_path / "r"
    _, stream = run(out, steps=3, checkpoint_every=3, **{"model.mem_len": 12})
    state = torch.load(latest_checkpoint(out) / "train_state.pt", weights_only=True)
    (mem,) = state["ranks"][0]["memory"]
    # replay the stream: the memory's doc ids are the inputs' doc ids of the last 12 positions
    replay = ToyStream(4, 8, seed=0)
    docs = np.concatenate([replay.next_batch()[1][:, :-1] for _ in range(3)], axis=1)
    assert mem["doc_ids"].tolist() == docs[:, -12:].tolist()
    assert [tuple(s.shape) for s in mem["states"]] == [(4, 12, 16)] * 2
    assert json.loads(state["ranks"][0]["stream"]) == json.loads(json.dumps(stream.state_dict()))


def test_resume_in_process_continues_the_same_losses(tmp_path):
    run(tmp_path / "a", steps=6)
    run(tmp_path / "b", steps=6, checkpoint_every=3)
    # as if killed after step 4: drop the later checkpoint, leave metrics of steps 5-6 behind
    import shutil

    shutil.rmtree(tmp_path / "b" / "checkpoints" / "step_00000006")
    shutil.rmtree(tmp_path / "b" / "model")
    result, _ = run(tmp_path / "b", steps=6, checkpoint_every=3, resume=True)
    assert result.step == 6
    assert losses(tmp_path / "a") == losses(tmp_path / "b")
    assert [r["step"] for r in records(tmp_path / "b")] == [1, 2, 3, 4, 5, 6]


def test_non_finite_loss_stops_naming_the_step_and_keeps_the_last_checkpoint(tmp_path, monkeypatch):
    from txl.model import TransformerXL

    calls = {"n": 0}
    forward = TransformerXL.forward

    def poisoned(self, *args, **kwargs):
        calls["n"] += 1
        out = forward(self, *args, **kwargs)
        if calls["n"] == 3:
            out.nll = out.nll * float("nan")
        return out

    monkeypatch.setattr(TransformerXL, "forward", poisoned)
    out = tmp_path / "r"
    with pytest.raises(NonFiniteLossError, match="at step 3") as e:
        run(out, steps=6, checkpoint_every=2)
    assert "step_00000002" in str(e.value) and "\n" not in str(e.value)
    assert latest_checkpoint(out).name == "step_00000002"
    assert [r["step"] for r in records(out)] == [1, 2]
    ckpt = load_checkpoint(latest_checkpoint(out))
    assert all(torch.isfinite(p).all() for p in ckpt.model.parameters())


def strict_json(text):
    """json.loads that refuses NaN / Infinity, as every non-Python JSON parser does."""

    def refuse(name):
        raise ValueError(f"invalid JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_metrics_are_written_as_null_and_every_file_parses_strictly(tmp_path):
    out = tmp_path / "r"
    nan = float("nan")
    run(out, steps=2, eval_every=1, eval_fn=lambda model, step: {"nll": nan, "acc": [np.inf, 0.5]})
    lines = [strict_json(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in lines if r["kind"] == "eval"]
    assert [(r["step"], r["nll"], r["acc"]) for r in evals] == [
        (1, None, [None, 0.5]),
        (2, None, [None, 0.5]),
    ]
    assert strict_json((out / "run.json").read_text())["kind"] == "train"


def test_truncating_metrics_rewrites_an_old_nan_line_as_null(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        '{"kind": "train", "loss": NaN, "step": 1}\n{"kind": "train", "loss": 2.0, "step": 2}\n'
    )
    MetricsLog(path).truncate_after(1)
    assert [strict_json(x) for x in path.read_text().splitlines()] == [
        {"kind": "train", "loss": None, "step": 1}
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.jsonl"]  # no temp file left


def test_stream_of_the_wrong_shape_is_refused(tmp_path):
    with pytest.raises(ValueError, match="expected an integer array of shape"):
        run(tmp_path / "r", stream=ToyStream(3, 8))


def test_output_dir_holding_another_run_is_refused(tmp_path):
    run(tmp_path / "r", steps=1)
    with pytest.raises(RunDirError, match="holds another run"):
        run(tmp_path / "r", steps=1)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.txt").write_text("x")
    with pytest.raises(RunDirError, match="not empty"):
        run(tmp_path / "other", steps=1)


def test_resume_with_nothing_to_resume_is_refused_and_without_a_checkpoint_starts_over(tmp_path):
    with pytest.raises(RunDirError, match="nothing to resume"):
        run(tmp_path / "none", steps=1, resume=True)
    run(tmp_path / "r", steps=2, checkpoint_every=0)  # the final step saves one anyway
    (tmp_path / "r2").mkdir()
    (tmp_path / "r2" / "run.json").write_text((tmp_path / "r" / "run.json").read_text())
    with pytest.raises(
        RunDirError, match="no complete checkpoint yet; start it over with --resume"
    ):
        run(tmp_path / "r2", steps=2)
    result, _ = run(tmp_path / "r2", steps=2, resume=True)  # nothing checkpointed: starts over
    assert result.step == 2


def test_resume_with_another_config_is_refused_but_runtime_keys_may_change(tmp_path):
    run(tmp_path / "r", steps=2, checkpoint_every=1)
    with pytest.raises(ConfigError, match="lr"):
        run(tmp_path / "r", steps=2, lr=1.0, resume=True)
    result, _ = run(tmp_path / "r", steps=2, checkpoint_every=5, resume=True)  # already done
    assert result.step == 2


def test_cuda_device_without_cuda_is_refused(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(ConfigError, match="CUDA is not available"):
        run(tmp_path / "r", device="cuda")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("compiled", [False, True])
def test_cuda_bf16_run_trains_saves_and_resumes(tmp_path, compiled):
    import shutil

    out = tmp_path / "r"
    result, _ = run(out, steps=4, device="cuda", checkpoint_every=2, compile=compiled)
    assert all(np.isfinite(losses(out)))
    ckpt = load_checkpoint(out / "model")
    assert ckpt.training["precision"] == "bf16" and ckpt.training["device"] == "cuda"
    if any(k in torch.cuda.get_device_name() for k in ("H200", "H100", "A100")):
        assert result.mfu is not None and 0 < result.mfu < 1
    before = losses(out)
    shutil.rmtree(out / "checkpoints" / "step_00000004")
    shutil.rmtree(out / "model")
    run(out, steps=4, device="cuda", checkpoint_every=2, compile=compiled, resume=True)
    torch.testing.assert_close(
        torch.tensor(losses(out)), torch.tensor(before), rtol=1e-2, atol=1e-2
    )
