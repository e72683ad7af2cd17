"""`probe train`: bad input is one line on stderr and exit 2; a short run works end to end."""

import json
import subprocess
import sys

import pytest
import torch
from click.testing import CliRunner

from probes.cli.main import cli


def invoke(*args):
    return CliRunner().invoke(cli, ["train", *args])


def assert_one_line_exit_2(result, needle):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert needle in lines[0]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--preset", "tinyy"], "did you mean 'tiny'"),
        (["--set", "lrr=1"], "did you mean 'lr'"),
        (["--set", "model.d_model=abc"], "model.d_model"),
        (["--set", "steps=0"], "steps"),
        (["--set", "novalue"], "KEY=VALUE"),
        (["--steps", "x"], "--steps"),
        (["--device", "tpu"], "--device"),
        (["--set", "eval.bogus=1"], "eval.bogus"),
        (["--set", "data.language.n_topics=x"], "n_topics"),
    ],
)
def test_bad_config_is_one_line_exit_2(tmp_path, args, needle):
    assert_one_line_exit_2(invoke(*args, "--out", str(tmp_path / "r")), needle)


def test_bad_config_file_is_one_line_exit_2(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("[model]\nd_modle = 3\n")
    assert_one_line_exit_2(invoke("--config", str(f), "--out", str(tmp_path / "r")), "d_model")
    assert_one_line_exit_2(
        invoke("--config", str(tmp_path / "none.toml"), "--out", str(tmp_path / "r")),
        "does not exist",
    )


def test_output_dir_holding_another_run_is_one_line_exit_2(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "run.json").write_text(json.dumps({"config": {}}))
    assert_one_line_exit_2(invoke("--out", str(tmp_path / "r")), "holds another run")


def test_resume_with_nothing_to_resume_is_one_line_exit_2(tmp_path):
    assert_one_line_exit_2(invoke("--resume", "--out", str(tmp_path / "r")), "nothing to resume")


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_without_cuda_is_one_line_exit_2(tmp_path):
    assert_one_line_exit_2(
        invoke("--device", "cuda", "--out", str(tmp_path / "r")), "CUDA is not available"
    )


def test_train_help_does_not_import_torch():
    code = (
        "import sys; from probes.cli.main import cli; cli(['train', '--help'], standalone_mode=False);"
        " assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


SMALL = [
    "--device", "cpu", "--threads", "1", "--quiet",
    "--set", "model.d_model=16", "--set", "model.d_head=8", "--set", "model.n_head=2",
    "--set", "model.d_inner=32", "--set", "model.tgt_len=16", "--set", "model.mem_len=16",
    "--set", "batch_size=4", "--set", "warmup_steps=1", "--set", "model.dropout=0.1",
    "--set", "eval.n_examples=4", "--set", "eval.edges=[6, 16, 40]", "--set", "eval.mem_len=32",
    "--set", "eval.nll_rows=2", "--set", "eval.nll_segments=2",
]  # fmt: skip


def train_losses(out):
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [(r["step"], r["loss"]) for r in map(json.loads, lines) if r["kind"] == "train"]


def test_short_run_trains_on_the_synth_stream_and_evaluates_recall_by_distance(tmp_path):
    out = tmp_path / "r"
    result = invoke("--steps", "3", "--out", str(out), "--json", "--set", "eval_every=2", *SMALL)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["step"] == 3 and summary["tokens_per_s"] > 0
    ev = summary["eval"]
    assert [(b["lo"], b["hi"], b["n"], b["inside"]) for b in ev["recall"]] == [
        (6, 16, 4, True),
        (16, 40, 4, False),  # beyond the training attention span tgt + mem = 32
    ]
    assert len(ev["recall_mem32"]) == 2 and 0 <= ev["recall_acc"] <= 1
    assert ev["nll"] > 0 and ev["filler_nll"] > 0 and ev["filler_entropy"] > 0
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["step"]) for r in lines] == [
        ("train", 1), ("train", 2), ("eval", 2), ("train", 3), ("eval", 3),
    ]  # fmt: skip

    from synth.language import Language
    from txl.checkpoint import load_checkpoint

    ckpt = load_checkpoint(out / "model")
    assert Language.from_json(ckpt.tokenizer) == Language.default()
    assert ckpt.config.d_model == 16 and ckpt.training["config"]["eval"]["mem_len"] == 32
    assert ckpt.extra_files["COMMAND"].startswith("probe")


def test_resume_replays_the_synth_stream_exactly(tmp_path):
    import shutil

    out = tmp_path / "r"
    args = ["--steps", "4", "--out", str(out), "--set", "checkpoint_every=2", *SMALL]
    assert invoke(*args).exit_code == 0
    before = train_losses(out)
    # as if killed during step 4: the checkpoint of step 4 and the final model never got written
    shutil.rmtree(out / "checkpoints" / "step_00000004")
    shutil.rmtree(out / "model")
    result = invoke("--resume", "--out", str(out), "--quiet")
    assert result.exit_code == 0, result.output
    assert train_losses(out) == before
    assert invoke("--resume", "--out", str(out), "--quiet", "--set", "lr=1").exit_code == 2


def test_json_summary_of_a_diverged_eval_is_strict_json_with_null(tmp_path, monkeypatch):
    import txl.train
    from txl.train import TrainResult

    def fake_train(config, stream, *, out_dir, **kwargs):
        nan = float("nan")
        return TrainResult(
            out_dir, 3, nan, out_dir / "model", None, 1.0, None, {"nll": nan, "acc": 0.5}, None
        )

    monkeypatch.setattr(txl.train, "train", fake_train)
    result = invoke("--steps", "3", "--out", str(tmp_path / "r"), "--json", *SMALL)
    assert result.exit_code == 0, result.output

    def refuse(name):
        raise ValueError(f"invalid JSON constant {name}")

    summary = json.loads(result.stdout, parse_constant=refuse)
    assert summary["loss"] is None and summary["eval"] == {"nll": None, "acc": 0.5}


def test_heldout_nll_reads_the_mixture_not_the_curriculum():
    """With a bursty curriculum the training stream starts with bursty documents only; the held-out
    stream behind the evaluation's NLL is the mixture from its first token."""
    from probes.training.presets import resolve_dict
    from probes.training.synth_data import synth_stream
    from synth.language import Language
    from txl.train_config import TrainConfig

    lang = Language.default()
    data = resolve_dict("tiny", overrides=["data.bursty_first=100000", "data.repeat_first=500"])
    data.pop("preset")
    data["model"]["vocab_size"] = lang.vocab.size
    config = TrainConfig.from_dict(data)
    train = synth_stream(lang, config, 5, 4, 0, 1)
    heldout = synth_stream(lang, config, 5, 4, 0, 1, curriculum=False)
    assert train.config.bursty_first == 100000 and heldout.config.bursty_first == 0
    assert train.config.repeat_first == 500 and heldout.config.repeat_first == 0
    statements = [int((s.next_batch()[0] == lang.the_id).sum()) for s in (train, heldout)]
    assert statements[0] == 0 and statements[1] > 0
