"""What a `--model` path is and what is checked before anything is built (no transformers needed:
every check here runs before it is imported). The bad-input table (tests/test_bad_input.py) runs
the same refusals through the CLI in a child process."""

import json
import struct
from pathlib import Path

import pytest

from probes.adapters.hf_dir import config_size, gguf_file, model_kind, read_config, stored_elements
from probes.api.errors import ModelDirError


def _weights(path: Path, shapes: dict[str, tuple[int, ...]]) -> None:
    header, offset = {}, 0
    for name, shape in shapes.items():
        n = 4
        for d in shape:
            n *= d
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"\0" * offset)


def test_error_text_keeps_whole_sentences_and_drops_pointers_to_output_not_shown():
    from probes.adapters.hf_load import error_text

    first = "Error(s) in loading state_dict for LlamaForCausalLM: size mismatch for w."
    long = RuntimeError(f"{first} {'More detail follows here. ' * 40}Look at the above report!")
    text = error_text(long)
    assert text.startswith(first) and text.endswith(".") and len(text) <= 400
    assert "above report" not in text
    one = error_text(ValueError("x" * 10 + " " + "word " * 200))
    assert one.endswith(" …") and len(one) <= 402 and "wor …" not in one


def test_the_kind_of_a_model_path_is_told_by_its_content(tmp_path):
    from probes.framework.models import resolve_model_path

    assert model_kind(resolve_model_path("default")) == "txl"
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert model_kind(hf) == "transformers"
    g = tmp_path / "g"
    g.mkdir()
    (g / "weights.bin").write_bytes(b"GGUF\x03\x00\x00\x00")
    assert model_kind(g / "weights.bin") == "gguf" and gguf_file(g) is None  # not named .gguf
    (g / "m.gguf").write_bytes(b"GGUF\x03\x00\x00\x00")
    assert model_kind(g) == "gguf" and gguf_file(g) == g / "m.gguf"
    (hf / "stray.gguf").write_bytes(b"GGUF")
    assert model_kind(hf) == "transformers"  # config.json says what the directory is


def test_a_config_claiming_far_more_than_its_weights_is_refused_before_building(tmp_path):
    config = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 8,
              "vocab_size": 50, "intermediate_size": 16}  # fmt: skip
    size = config_size(config)
    assert size["lower_bound"] == 50 * 8 + 2 * 8 * 8
    assert size["parameters"] == 50 * 8 + 2 * (4 * 64 + 3 * 8 * 16)
    m = tmp_path / "m"
    m.mkdir()
    (m / "config.json").write_text(json.dumps(config))
    _weights(m / "model.safetensors", {"embed": (50, 8), "layer": (2, 8, 8)})
    assert read_config(m) == config and stored_elements(m) == 50 * 8 + 128
    (m / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 100_000}))
    with pytest.raises(ModelDirError, match=r"at least 6,400,400 parameters \(100,000 layers"):
        read_config(m)
    nested = {"model_type": "gemma3", "text_config": {**config, "num_hidden_layers": 3}}
    assert config_size(nested)["layers"] == 3  # a multimodal config: its language model's


def test_the_transformer_xl_lower_bound_holds_for_every_shipped_checkpoint():
    import math

    from safetensors import safe_open

    from probes.framework.models import PACKAGE_MODELS
    from txl.checkpoint import load_checkpoint, parameter_lower_bound

    checked = 0
    for d in sorted(PACKAGE_MODELS.iterdir()):
        if model_kind(d) != "txl":
            continue
        ckpt = load_checkpoint(d)
        with safe_open(str(d / "model.safetensors"), framework="pt") as f:  # tied: stored once
            stored = sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())
        assert parameter_lower_bound(ckpt.config) <= stored, d.name
        checked += 1
    assert checked >= 3


def test_a_gguf_file_is_a_model_source_with_or_without_hf_prefix(tmp_path):
    from probes.api.probe_base import ProbeInputError
    from probes.framework.models import model_source

    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF\x03\x00\x00\x00")
    assert model_source(str(f)) == f and model_source(f"hf:{f}") == f
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not gguf")
    with pytest.raises(ProbeInputError, match="not a GGUF file"):
        model_source(f"hf:{bad}")


def test_a_truncated_gguf_file_is_refused_as_unreadable_not_as_a_checkpoint(tmp_path):
    pytest.importorskip("gguf")
    from probes.adapters.hf_load import gguf_header
    from probes.api.errors import AdapterError

    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    with pytest.raises(AdapterError, match=r"is not a readable GGUF file") as e:
        gguf_header(f)
    assert "\n" not in str(e.value) and "checkpoint" not in str(e.value)
