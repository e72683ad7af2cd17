"""TrainConfig: presets < config file < overrides; bad keys and values refused in one line."""

import itertools
import json
import math

import pytest

from probes.training.presets import PRESETS, resolve_dict
from txl.schedule import WarmupCosine
from txl.train_config import (
    ConfigError,
    TrainConfig,
    differences,
    parse_value,
)


def resolved(*overrides, preset=None, config_file=None, vocab=50) -> TrainConfig:
    data = resolve_dict(preset, config_file, overrides)
    data["model"]["vocab_size"] = vocab
    return TrainConfig.from_dict(data)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_resolves_to_a_valid_config(name):
    cfg = resolved(preset=name)
    assert cfg.model.tgt_len > 0 and cfg.steps > 0
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg
    json.dumps(cfg.to_dict(), allow_nan=False)


def test_base_preset_has_the_papers_wt103_base_shape():
    m = resolved(preset="base").model
    assert (m.n_layer, m.d_model, m.n_head, m.d_inner, m.tgt_len, m.mem_len) == (
        16,
        410,
        10,
        2100,
        150,
        150,
    )


def test_default_preset_is_tiny_and_trains_with_the_papers_clip():
    cfg = resolved()
    assert cfg == resolved(preset="tiny")
    assert cfg.grad_clip == 0.25


def test_layers_apply_in_order_preset_file_overrides(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('preset = "small"\nlr = 1e-4\nsteps = 7\n[model]\nd_model = 64\n[data]\nx = 1\n')
    cfg = resolved("steps=9", "data.y=true", config_file=f)
    assert cfg.lr == 1e-4 and cfg.steps == 9 and cfg.model.d_model == 64
    assert cfg.model.n_layer == PRESETS["small"]["model"]["n_layer"]
    assert cfg.data == {"x": 1, "y": True}
    assert resolve_dict(None, f)["preset"] == "small"
    assert resolve_dict("base", f)["preset"] == "base"  # an explicit preset wins over the file's


def test_json_config_file_is_read_like_toml(tmp_path):
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"lr": 0.01, "model": {"n_layer": 3}}))
    cfg = resolved(config_file=f)
    assert cfg.lr == 0.01 and cfg.model.n_layer == 3


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("lrr=1", "did you mean 'lr'"),
        ("model.d_modle=3", "did you mean 'd_model'"),
        ("steps=abc", "steps"),
        ("steps=0", "steps"),
        ("lr=-1", "lr"),
        ("compile=3", "compile"),
        ("device=tpu", "device"),
        ("grad_accum=3", "divisor of batch_size"),
        ("model.pos_enc=xyz", "pos_enc"),
        ("model.n_layer=0", "n_layer"),
        ("nokey", "KEY=VALUE"),
        ("lr.x=1", "no sub-keys"),
        ("data=1", "data.NAME"),
    ],
)
def test_bad_override_is_refused_with_a_one_line_message(override, needle):
    with pytest.raises(ConfigError) as e:
        resolved(override)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_unknown_preset_suggests_the_nearest():
    with pytest.raises(ConfigError, match="did you mean 'tiny'"):
        resolve_dict("tinyy")


@pytest.mark.parametrize(
    ("text", "needle"),
    [("[model]\nbogus = 1\n", "model.bogus"), ("lr = [", "does not parse"), ("x = 1", "'x'")],
)
def test_bad_config_file_is_refused(tmp_path, text, needle):
    f = tmp_path / "c.toml"
    f.write_text(text)
    with pytest.raises(ConfigError) as e:
        resolved(config_file=f)
    assert needle in str(e.value)


def test_config_file_must_be_toml_or_json(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("lr: 1")
    with pytest.raises(ConfigError, match=r"\.toml or \.json"):
        resolved(config_file=f)


def test_override_values_parse_as_toml_literals():
    assert parse_value("3") == 3 and parse_value("1e-3") == 1e-3 and parse_value("true") is True
    assert parse_value("[1, 2]") == [1, 2] and parse_value("cpu") == "cpu"
    assert resolved("peak_tflops=none").peak_tflops is None
    assert resolved("lr=1").lr == 1.0  # an int is a fine float


def test_differences_names_nested_keys():
    a = resolved().to_dict()
    b = resolved("model.d_model=64", "eval.n=3").to_dict()
    assert differences(a, b) == ["eval.n", "model.d_model"]


def test_schedule_warms_up_linearly_then_decays_by_cosine_to_the_floor():
    s = WarmupCosine(warmup_steps=4, total_steps=14, min_ratio=0.1)
    assert [s(i) for i in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert s(4) == 1.0 and math.isclose(s(13), 0.1) and math.isclose(s(100), 0.1)
    values = [s(i) for i in range(4, 14)]
    assert all(a >= b for a, b in itertools.pairwise(values))
    assert math.isclose(s(4 + 9 / 2), 0.55)  # halfway: the mean of peak and floor
    assert WarmupCosine(0, 1, 0.0)(0) == 1.0  # a single update runs at the peak, not at 0


@pytest.mark.parametrize(
    "override",
    ["lr=inf", "weight_decay=inf", "eps=inf", "grad_clip=inf", "model.init_std=nan",
     "model.init_std=-1", "model.init_std=0"],
)  # fmt: skip
def test_non_finite_or_non_positive_optimiser_and_init_values_are_refused_up_front(override):
    with pytest.raises((ConfigError, ValueError), match=override.split("=")[0].split(".")[-1]):
        resolved(override)


def test_a_resolved_config_never_aliases_the_presets_table():
    data = resolved("lr=0.01")  # an override that leaves the model table alone
    data.model  # noqa: B018
    again = resolve_dict("tiny")
    assert "vocab_size" not in again["model"]  # `resolved` set it on its own copy only
    assert PRESETS["tiny"]["model"].get("vocab_size") is None
