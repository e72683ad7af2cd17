"""Property 7: save/load identity, and every corrupt checkpoint refused with a one-line error."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import txl.checkpoint as ckpt
from txl.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from txl.config import TXLConfig
from txl.memory import Memory
from txl.model import TransformerXL

TOKENIZER = {"kind": "test", "vocab": ["<pad>", "<eod>", *(f"w{i}" for i in range(21))]}

CONFIGS = {
    "tied-post-ln": dict(tie_weight=True, untie_r=False, pre_lnorm=False),
    "untied-pre-ln-untie-r": dict(tie_weight=False, untie_r=True, pre_lnorm=True),
    "shaw": dict(pos_enc="shaw"),
    "learned": dict(pos_enc="learned"),
}


def tiny_config(**overrides) -> TXLConfig:
    base = dict(
        vocab_size=23, n_layer=2, d_model=16, n_head=2, d_head=8, d_inner=32, tgt_len=5, mem_len=5
    )
    base.update(overrides)
    return TXLConfig(**base)


def tiny_model(**overrides) -> TransformerXL:
    torch.manual_seed(0)
    model = TransformerXL(tiny_config(**overrides))
    with torch.no_grad():  # make every tensor (biases, LayerNorm, u, v too) matter
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model.eval()


def stream_nll(model: TransformerXL) -> torch.Tensor:
    """NLL of three segments carried through memory, (B, 3·T)."""
    g = torch.Generator().manual_seed(1)
    T = model.config.tgt_len
    tokens = torch.randint(0, model.config.vocab_size, (2, 3 * T + 1), generator=g)
    memory, out = None, []
    with torch.no_grad():
        for s in range(3):
            seg = tokens[:, s * T : (s + 1) * T + 1]
            o = model(seg[:, :-1], memory=memory, targets=seg[:, 1:])
            memory = o.memory
            out.append(o.nll)
    return torch.cat(out, dim=1)


def alias_groups(model: torch.nn.Module) -> list[list[str]]:
    return sorted(ckpt._alias_groups(model.state_dict()))


@pytest.fixture(scope="module")
def model() -> TransformerXL:
    return tiny_model()


@pytest.fixture
def saved(tmp_path: Path, model: TransformerXL) -> Path:
    path = tmp_path / "ckpt"
    save_checkpoint(path, model, tokenizer=TOKENIZER, training={"steps": 3})
    return path


def assert_one_line_error(path: Path, match: str) -> str:
    with pytest.raises(CheckpointError, match=match) as info:
        load_checkpoint(path)
    message = str(info.value)
    assert "\n" not in message and message.strip() == message and message
    return message


# --- identity ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_reload_gives_bitwise_identical_nll(tmp_path: Path, name: str) -> None:
    model = tiny_model(**CONFIGS[name])
    sha = save_checkpoint(tmp_path / "c", model, tokenizer=TOKENIZER)
    loaded = load_checkpoint(tmp_path / "c")
    assert loaded.sha256 == sha and len(sha) == 64
    assert loaded.config == model.config
    assert not loaded.model.training
    assert torch.equal(stream_nll(loaded.model), stream_nll(model))
    # tied tensors are tied again (not two copies), untied ones stay apart
    assert alias_groups(loaded.model) == alias_groups(model)


class SharedTensorTXL(TransformerXL):
    """A TransformerXL whose state_dict names one tensor twice (as an nn.Linear head tied to the
    embedding would): safetensors refuses shared tensors, so the checkpoint must store it once and
    tie it again on load."""

    def __init__(self, config: TXLConfig, **kwargs):
        super().__init__(config, **kwargs)
        self.lm_head = torch.nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.lm_head.weight = self.word_emb.weight


def test_shared_tensor_is_stored_once_and_tied_again_on_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ckpt, "TransformerXL", SharedTensorTXL)
    torch.manual_seed(0)
    model = SharedTensorTXL(tiny_config())
    assert ["word_emb.weight", "lm_head.weight"] in ckpt._alias_groups(model.state_dict())
    save_checkpoint(tmp_path / "c", model, tokenizer=TOKENIZER)
    stored = load_file(str(tmp_path / "c" / "model.safetensors"))
    assert "word_emb.weight" in stored and "lm_head.weight" not in stored
    loaded = load_checkpoint(tmp_path / "c").model
    assert loaded.lm_head.weight is loaded.word_emb.weight
    assert torch.equal(loaded.word_emb.weight, model.word_emb.weight)


def test_tied_output_layer_has_no_weight_of_its_own(tmp_path: Path) -> None:
    save_checkpoint(tmp_path / "c", tiny_model(tie_weight=True), tokenizer=TOKENIZER)
    tied = set(load_file(str(tmp_path / "c" / "model.safetensors")))
    save_checkpoint(tmp_path / "d", tiny_model(tie_weight=False), tokenizer=TOKENIZER)
    untied = set(load_file(str(tmp_path / "d" / "model.safetensors")))
    assert untied - tied == {"out_weight"} and "out_bias" in tied


def test_everything_saved_comes_back(tmp_path: Path) -> None:
    model = tiny_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    out = model(torch.zeros(1, 5, dtype=torch.long), targets=torch.ones(1, 5, dtype=torch.long))
    out.nll.mean().backward()
    opt.step()
    opt.zero_grad()
    model.eval()
    memory = Memory.empty(2, 1, 16)
    train_state = {
        "optimizer": opt.state_dict(),
        "step": 1,
        "memory": list(memory.states),
        "doc_ids": memory.doc_ids,
    }
    rng = {"torch": [1, 2, 3], "numpy": {"state": "abc"}}
    extra = {"metrics.jsonl": '{"step": 1, "loss": 3.1}\n', "COMMAND": "probe train --steps 1\n"}
    path = tmp_path / "c"
    save_checkpoint(
        path,
        model,
        tokenizer=TOKENIZER,
        training={"tgt_len": 5, "mem_len": 5, "lr": 1e-3},
        train_state=train_state,
        rng=rng,
        extra_files=extra,
    )
    c = load_checkpoint(path)
    assert c.tokenizer == TOKENIZER and c.rng == rng and c.extra_files == extra
    assert c.training == {"tgt_len": 5, "mem_len": 5, "lr": 1e-3}
    assert c.train_state["step"] == 1
    opt2 = torch.optim.AdamW(c.model.parameters(), lr=1e-3)
    opt2.load_state_dict(c.train_state["optimizer"])
    s1 = opt.state_dict()["state"][0]["exp_avg"]
    assert torch.equal(opt2.state_dict()["state"][0]["exp_avg"], s1)
    assert json.loads((path / "config.json").read_text())["schema_version"] == 1


def test_save_replaces_an_existing_checkpoint_and_leaves_no_siblings(
    tmp_path: Path, model: TransformerXL
) -> None:
    path = tmp_path / "c"
    save_checkpoint(path, model, tokenizer=TOKENIZER, rng={"a": 1})
    other = tiny_model(tie_weight=False)
    sha = save_checkpoint(path, other, tokenizer=TOKENIZER)
    c = load_checkpoint(path)
    assert c.sha256 == sha and c.rng is None and not c.model.config.tie_weight
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_save_refuses_to_replace_something_that_is_not_a_checkpoint(
    tmp_path: Path, model: TransformerXL
) -> None:
    (tmp_path / "notes.txt").write_text("precious")
    with pytest.raises(CheckpointError, match="not a checkpoint directory"):
        save_checkpoint(tmp_path, model, tokenizer=TOKENIZER)
    assert (tmp_path / "notes.txt").read_text() == "precious"


def test_save_refuses_non_json_training_and_unknown_extra_files(
    tmp_path: Path, model: TransformerXL
) -> None:
    with pytest.raises(CheckpointError, match="not JSON-serialisable"):
        save_checkpoint(tmp_path / "c", model, tokenizer=TOKENIZER, training={"x": float("nan")})
    with pytest.raises(CheckpointError, match="unknown extra file"):
        save_checkpoint(tmp_path / "c", model, tokenizer=TOKENIZER, extra_files={"x.txt": ""})
    assert list(tmp_path.iterdir()) == []


# --- atomicity -----------------------------------------------------------------------------------


def test_failed_save_leaves_no_partial_directory(
    tmp_path: Path, model: TransformerXL, monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(ckpt, "save_file", crash)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path / "c", model, tokenizer=TOKENIZER)
    assert list(tmp_path.iterdir()) == []


def test_failed_save_keeps_the_old_checkpoint(
    tmp_path: Path, model: TransformerXL, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c"
    sha = save_checkpoint(path, model, tokenizer=TOKENIZER)

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(ckpt.torch, "save", crash)  # fails late: after the weights are written
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, tiny_model(tie_weight=False), tokenizer=TOKENIZER, train_state={})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]
    assert load_checkpoint(path).sha256 == sha


def test_failed_swap_restores_the_old_checkpoint(
    tmp_path: Path, model: TransformerXL, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c"
    sha = save_checkpoint(path, model, tokenizer=TOKENIZER)
    real_rename = os.rename
    calls = []

    def rename(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:  # old → aside succeeded; new → target fails
            raise OSError("rename failed")
        real_rename(src, dst)

    monkeypatch.setattr(ckpt.os, "rename", rename)
    with pytest.raises(OSError, match="rename failed"):
        save_checkpoint(path, tiny_model(tie_weight=False), tokenizer=TOKENIZER)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]
    assert load_checkpoint(path).sha256 == sha


# --- corruption: each refused with one line ------------------------------------------------------


@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "tokenizer.json"])
def test_missing_required_file_is_refused(saved: Path, name: str) -> None:
    (saved / name).unlink()
    msg = assert_one_line_error(saved, f"missing {name}")
    assert "a checkpoint holds config.json, model.safetensors, tokenizer.json" in msg


def test_unknown_file_is_refused(saved: Path) -> None:
    (saved / "optimizer.pkl").write_bytes(b"x")
    assert_one_line_error(saved, "unknown file.*optimizer.pkl.*allowed")


def test_subdirectory_is_refused(saved: Path) -> None:
    (saved / "extra").mkdir()
    assert_one_line_error(saved, "unknown file.*extra")


def test_not_a_directory_is_refused(tmp_path: Path) -> None:
    assert_one_line_error(tmp_path / "nowhere", "no checkpoint directory")


@pytest.mark.parametrize("keep", [0, 4, 40, 0.5])
def test_truncated_safetensors_is_refused(saved: Path, keep: float) -> None:
    f = saved / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[: int(len(data) * keep) if isinstance(keep, float) else keep])
    assert_one_line_error(saved, "not a readable safetensors file")


@pytest.mark.parametrize(
    "text, match",
    [
        ('{"schema_version": 1, "model": {', "not valid JSON"),
        ("[1, 2]", "JSON list"),
        ("\xff\xfe", "not valid JSON"),
        ('{"schema_version": NaN}', "not valid JSON"),
    ],
)
def test_tampered_config_json_is_refused(saved: Path, text: str, match: str) -> None:
    (saved / "config.json").write_text(text, encoding="latin-1")
    assert_one_line_error(saved, match)


def _edit_config(path: Path, edit) -> None:
    data = json.loads((path / "config.json").read_text())
    edit(data)
    (path / "config.json").write_text(json.dumps(data))


@pytest.mark.parametrize("version", [2, 0, "1", None, True])
def test_unknown_schema_version_is_refused(saved: Path, version) -> None:
    _edit_config(saved, lambda d: d.update(schema_version=version))
    assert_one_line_error(saved, "unknown schema_version.*reads schema_version 1")


def test_missing_schema_version_is_refused(saved: Path) -> None:
    _edit_config(saved, lambda d: d.pop("schema_version"))
    assert_one_line_error(saved, "unknown schema_version None")


def test_unknown_top_level_key_is_refused(saved: Path) -> None:
    _edit_config(saved, lambda d: d.update(notes="hi"))
    assert_one_line_error(saved, "expected exactly")


def test_unknown_model_config_key_is_refused(saved: Path) -> None:
    _edit_config(saved, lambda d: d["model"].update(n_experts=4))
    assert_one_line_error(saved, "unknown model config key.*n_experts")


def test_invalid_model_config_value_is_refused(saved: Path) -> None:
    _edit_config(saved, lambda d: d["model"].update(n_layer=0))
    assert_one_line_error(saved, "bad model config.*n_layer")


def test_missing_model_config_key_is_refused(saved: Path) -> None:
    _edit_config(saved, lambda d: d["model"].pop("vocab_size"))
    assert_one_line_error(saved, "bad model config.*vocab_size")


def test_config_that_does_not_match_the_weights_is_refused(saved: Path) -> None:
    _edit_config(saved, lambda d: d["model"].update(d_inner=48))
    assert_one_line_error(saved, r"has shape \[.*config.json implies \[")


def test_config_with_more_layers_than_the_weights_is_refused(saved: Path) -> None:
    _edit_config(saved, lambda d: d["model"].update(n_layer=3))
    assert_one_line_error(saved, "missing tensor")


def test_wrong_tensor_shape_is_refused(saved: Path) -> None:
    f = saved / "model.safetensors"
    tensors = load_file(str(f))
    name = sorted(tensors)[0]
    tensors[name] = torch.zeros(*tensors[name].shape[:-1], tensors[name].shape[-1] + 1)
    save_file(tensors, str(f))
    assert_one_line_error(saved, f"tensor {name} has shape")


def test_renamed_tensor_is_refused(saved: Path) -> None:
    f = saved / "model.safetensors"
    tensors = load_file(str(f))
    name = sorted(tensors)[0]
    tensors["renamed." + name] = tensors.pop(name)
    save_file(tensors, str(f))
    assert_one_line_error(saved, "missing tensor.*unexpected tensor.*renamed")


def test_tokenizer_that_is_not_an_object_is_refused(saved: Path) -> None:
    (saved / "tokenizer.json").write_text("[]")
    assert_one_line_error(saved, "tokenizer.json holds a JSON list")


def test_pickled_object_in_train_state_is_refused(saved: Path) -> None:
    torch.save({"model": torch.nn.Linear(2, 2)}, saved / "train_state.pt")  # a pickled module
    assert_one_line_error(saved, "cannot be loaded with weights_only=True")


def test_garbage_train_state_is_refused(saved: Path) -> None:
    (saved / "train_state.pt").write_bytes(b"\x00garbage\nmore")
    assert_one_line_error(saved, "not a torch.save archive")


def test_bad_rng_json_is_refused(saved: Path) -> None:
    (saved / "rng.json").write_text("{")
    assert_one_line_error(saved, "rng.json' is not valid JSON")


def test_atomic_write_that_fails_keeps_the_old_file_and_leaves_no_temp(tmp_path: Path) -> None:
    from txl.io import atomic_write

    target = tmp_path / "run.json"
    atomic_write(target, "old\n")
    with pytest.raises(UnicodeEncodeError):
        atomic_write(target, "half \ud800")  # a lone surrogate cannot be written as UTF-8
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
