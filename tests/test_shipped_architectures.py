"""The shipped models of other architectures (probes/models/window: a sliding-window Mistral;
probes/models/recurrent: a Mamba-2), trained on the synthetic language by the project's own loop:
they load through the transformers adapter, read the language the probes write in, are what
their COMMAND's preset trains, carry a compact log of every step, and retrieve within their reach
at their last evaluation. Skipped without the `hf` extra or while a model is not shipped."""

import json
import os

import pytest

REQUIRED = os.environ.get("TXL_REQUIRE_HF") == "1"
transformers = __import__("transformers") if REQUIRED else pytest.importorskip("transformers")

from probes.framework.models import PACKAGE_MODELS  # noqa: E402
from synth.language import Language  # noqa: E402

PRESETS = {"window": "tiny-window", "recurrent": "tiny-mamba2"}
FAMILY = {"window": "mistral", "recurrent": "mamba2"}


def shipped(name):
    path = PACKAGE_MODELS / name
    if not path.is_dir():
        pytest.skip(f"probes/models/{name} is not shipped yet")
    return path


def training(name):
    return json.loads((shipped(name) / "training.json").read_text())


def last_eval(name):
    from txl.metrics_log import MetricsLog

    records = MetricsLog(shipped(name) / "metrics.jsonl").records()
    return [r for r in records if r["kind"] == "eval"][-1]


@pytest.mark.parametrize("name", list(PRESETS))
def test_shipped_architecture_loads_through_the_adapter_and_reads_the_default_language(name):
    from probes.adapters import hf_load

    path = shipped(name)
    lm = hf_load.load(path)
    assert lm.info.extra["model_type"] == FAMILY[name]
    assert lm.info.vocab_size == Language.default().vocab.size
    tokenizer = json.loads((path / "tokenizer.json").read_text())
    assert Language.from_json(tokenizer) == Language.default()


@pytest.mark.parametrize(("name", "preset"), PRESETS.items())
def test_shipped_architecture_is_what_its_preset_trains(name, preset):
    from probes.training.presets import resolve_dict
    from txl.train_config import TrainConfig, differences

    config = training(name)["config"]
    resolved = resolve_dict(preset, overrides=["threads=1"])
    resolved.pop("preset")
    resolved["model"]["vocab_size"] = config["model"]["vocab_size"]
    assert differences(TrainConfig.from_dict(resolved).to_dict(), config) == []
    assert training(name)["architecture"] == f"transformers-{FAMILY[name]}"


@pytest.mark.parametrize("name", list(PRESETS))
def test_shipped_architecture_names_its_command_and_carries_a_compact_log(name):
    from txl.metrics_log import COLUMNS_KIND, MetricsLog

    path = shipped(name)
    assert f"--preset {PRESETS[name]} " in (path / "COMMAND").read_text()
    raw = [json.loads(x) for x in (path / "metrics.jsonl").read_text().splitlines()]
    assert sum(r["kind"] == COLUMNS_KIND for r in raw) == 1
    steps = [
        r["step"] for r in MetricsLog(path / "metrics.jsonl").records() if r["kind"] == "train"
    ]
    assert steps == list(range(1, training(name)["config"]["steps"] + 1))
    assert sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) <= 10 * 2**20


def recall_bins(name):
    """{(lo, hi): accuracy} of the last evaluation's recall by distance (facts queried lo-hi
    tokens after they were stated, 32 queries per bin)."""
    return {(b["lo"], b["hi"]): b["acc"] for b in last_eval(name)["recall"]}


def test_the_window_model_retrieves_inside_its_window_and_not_beyond_it():
    """Inside the window (320: a query reads the fact directly) recall is far above chance; past
    it no fact is read, though two layers could carry one up to 639 tokens (the layered reach)."""
    bins = recall_bins("window")
    inside = [acc for (lo, hi), acc in bins.items() if hi <= 256]
    beyond = [acc for (lo, hi), acc in bins.items() if lo >= 384]
    assert inside and min(inside) >= 0.4, bins
    assert beyond and max(beyond) <= 0.15, bins


def test_the_recurrent_model_retrieves_through_its_state():
    """A state has no window: facts up to 128 tokens back are recalled far above chance (1.7 %:
    one of ~60 values), and some from 384-512 back, past the window model's 320."""
    bins = recall_bins("recurrent")
    near = [acc for (lo, hi), acc in bins.items() if hi <= 128]
    assert near and min(near) >= 0.3, bins
    assert bins[(384, 512)] >= 0.1, bins
