"""Training transformers architectures with txl's loop (probes.training.hf_arch): what the loop
optimises is what the probes measure, resuming is exact, the saved model is what the adapter
loads, and a bad `arch` table is refused in one line. Tiny models, a few updates each. Skipped
without the `hf` extra (transformers >= 5): `nox -s hf` runs it."""

import json
import os
import shutil

import numpy as np
import pytest

REQUIRED = os.environ.get("TXL_REQUIRE_HF") == "1"
transformers = __import__("transformers") if REQUIRED else pytest.importorskip("transformers")

import torch  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from token_rows import rows  # noqa: E402

from probes.adapters import hf_load  # noqa: E402
from probes.cli.main import cli  # noqa: E402
from probes.training.hf_arch import HFArchitecture  # noqa: E402
from probes.training.presets import resolve_dict  # noqa: E402
from synth.language import Language  # noqa: E402
from txl.geometry import Geometry  # noqa: E402
from txl.train_config import TrainConfig  # noqa: E402

V = Language.default().vocab.size
WINDOW = 12
TINY = [
    "--set", "model.d_model=32", "--set", "model.d_head=8", "--set", "model.n_head=4",
    "--set", "model.d_inner=64", "--set", "model.tgt_len=24", "--set", "batch_size=2",
    "--set", "eval.n_examples=2", "--set", "eval.edges=[6,16,32]",
]  # fmt: skip
PRESET = {"mistral": "tiny-window", "mamba": "tiny-mamba", "mamba2": "tiny-mamba2"}


def invoke(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def train(out, family, *extra):
    window = ["--set", f"arch.sliding_window={WINDOW}"] if family == "mistral" else []
    args = ["train", "--preset", PRESET[family], "--out", str(out), "--threads", "1", "--quiet",
            "--set", "steps=6", "--set", "checkpoint_every=3", "--set", "eval_every=0",
            *TINY, *window, *extra]  # fmt: skip
    return invoke(args)


def losses(out):
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [(r["step"], r["loss"], r["grad_norm"]) for r in map(json.loads, lines)
            if r["kind"] == "train"]  # fmt: skip


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("arch")
    for family in PRESET:
        r = train(root / family, family)
        assert r.exit_code == 0, r.output
    return root


@pytest.mark.parametrize("family", list(PRESET))
def test_a_resumed_run_replays_the_uninterrupted_losses_bit_for_bit(trained, tmp_path, family):
    """Resuming restores weights, optimizer, scheduler, stream and RNGs of the transformers
    checkpoint: steps 4-6 replayed from the step-3 checkpoint equal the first run's exactly."""
    run = tmp_path / "run"
    shutil.copytree(trained / family, run)
    shutil.rmtree(run / "checkpoints" / "step_00000006")
    shutil.rmtree(run / "model")
    r = train(run, family, "--resume")
    assert r.exit_code == 0, r.output
    assert losses(run) == losses(trained / family)
    assert len(losses(run)) == 6


@pytest.mark.parametrize("family", list(PRESET))
def test_the_final_model_is_a_transformers_directory_the_adapter_loads(trained, family):
    model = trained / family / "model"
    config = json.loads((model / "config.json").read_text())
    assert config["model_type"] == family
    assert {"model.safetensors", "tokenizer.json", "training.json", "COMMAND",
            "metrics.jsonl"} <= {p.name for p in model.iterdir()}  # fmt: skip
    assert json.loads((model / "tokenizer.json").read_text()) == Language.default().to_json()
    training = json.loads((model / "training.json").read_text())
    assert training["architecture"] == f"transformers-{family}" and training["step"] == 6
    lm = hf_load.load(model, evaluator="stream" if family == "mistral" else "state")
    assert lm.info.extra["model_type"] == family


def test_training_scores_a_window_model_as_the_adapters_full_evaluator_does(trained):
    """The loop's mask (causal, same document, sliding window) and the adapter's are one rule:
    the NLL the model is trained on equals the one the probes measure."""
    model = trained / "mistral" / "model"
    config = TrainConfig.from_dict(
        {**resolve_dict("tiny-window"), "model": {**resolve_dict("tiny-window")["model"],
         "vocab_size": V, "d_model": 32, "d_head": 8, "d_inner": 64, "tgt_len": 24}}
    )  # fmt: skip
    arch = HFArchitecture({"family": "mistral", "sliding_window": WINDOW})
    segment = arch.load(model, "cpu").model.eval()
    tokens, docs, scored = rows(n=40, b=2, boundary=17)
    with torch.no_grad():
        out = segment(
            torch.from_numpy(tokens[:, :-1]),
            doc_ids=torch.from_numpy(docs[:, :-1]),
            targets=torch.from_numpy(tokens[:, 1:]),
        )
    lm = hf_load.load(model, evaluator="full")
    got = lm.score(tokens, docs, scored, Geometry(tgt_len=24, mem_len=0, clamp_len=None))
    np.testing.assert_allclose(out.nll.numpy(), got.nll[:, 1:], atol=2e-5)
    assert config.arch["family"] == "mistral"


def test_in_training_a_window_model_sees_neither_another_document_nor_past_its_reach():
    """Reset by the mask, and a window of W per layer: an input edit moves the NLLs of inputs up
    to n_layer × (W − 1) after it (the layered reach), none beyond and none in the next document."""
    torch.manual_seed(0)
    config = TrainConfig.from_dict(
        {"model": {"vocab_size": V, "n_layer": 2, "d_model": 32, "n_head": 4, "d_head": 8,
                   "d_inner": 64, "tgt_len": 60, "mem_len": 0, "init_std": 0.3}}
    )  # fmt: skip
    segment = HFArchitecture({"family": "mistral", "sliding_window": WINDOW}).build(config)
    tokens, docs, _ = rows(n=61, b=1, boundary=40)
    reach = 3 + 2 * (WINDOW - 1)  # the last input an edit of input 3 can reach

    def nll(toks):
        t = torch.from_numpy(toks)
        with torch.no_grad():
            return segment(t[:, :-1], doc_ids=torch.from_numpy(docs[:, :-1]), targets=t[:, 1:])

    base = nll(tokens).nll[0].numpy()
    other = tokens.copy()
    other[0, 3] = (other[0, 3] + 1) % V  # in document A
    moved = nll(other).nll[0].numpy()
    assert np.array_equal(moved[40:], base[40:])  # B (inputs 40 …) never sees A
    assert (moved[3 : reach + 1] != base[3 : reach + 1]).all()
    assert np.array_equal(moved[reach + 1 : 40], base[reach + 1 : 40])  # beyond the reach


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--set", "arch.family=gpt5"], "arch.family"),
        (["--set", "model.mem_len=16"], "model.mem_len"),
        (["--set", "arch.state_size=0"], "arch.state_size"),
        (["--set", "arch.window=3"], "arch.window"),
    ],
)
def test_a_bad_architecture_table_is_refused_in_one_line(tmp_path, extra, says):
    r = train(tmp_path / "bad", "mamba", *extra)
    assert r.exit_code == 2, r.output
    assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "bad").exists()


def test_a_mamba2_head_size_that_does_not_divide_the_inner_width_is_refused(tmp_path):
    r = train(tmp_path / "bad", "mamba2", "--set", "arch.head_dim=24")  # inner 2 × 32 = 64
    assert r.exit_code == 2, r.output
    assert "arch.head_dim" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("family", list(PRESET))
def test_a_transformers_model_trains_under_bf16_autocast(tmp_path, family):
    """The path a GPU run takes (bf16 autocast; the mask in the autocast dtype), on the CPU."""
    r = train(tmp_path / "bf16", family, "--set", "precision=bf16", "--set", "steps=2")
    assert r.exit_code == 0, r.output
    got = losses(tmp_path / "bf16")
    assert len(got) == 2 and all(np.isfinite(loss) for _, loss, _ in got)
    run = json.loads((tmp_path / "bf16" / "model" / "training.json").read_text())
    assert run["precision"] == "bf16"


@pytest.mark.slow
def test_torchrun_trains_a_transformers_model_on_two_gloo_ranks(tmp_path):
    """The same loop under torchrun: each rank its own shard, one checkpoint holding both."""
    import subprocess
    import sys

    out = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "probes.cli", "train", "--preset", "tiny-window", "--out", str(out), "--quiet",
           "--threads", "1", "--set", "steps=2", "--set", "checkpoint_every=2",
           "--set", "eval_every=0", "--set", f"arch.sliding_window={WINDOW}", *TINY]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    state = torch.load(out / "checkpoints" / "step_00000002" / "train_state.pt", weights_only=True)
    assert state["world_size"] == 2 and len(state["ranks"]) == 2
    assert state["ranks"][0]["stream"] != state["ranks"][1]["stream"]
    assert json.loads((out / "model" / "training.json").read_text())["world_size"] == 2
