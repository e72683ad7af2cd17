"""Hostile and careless input across every command, one table: each case is the argv (with files
it needs made in a fresh directory), the expected exit code and a fragment of the message. Each
runs the real CLI as a child process under a memory cap (tests/capped.py) and must answer with
one line on stderr and leave nothing behind: the directory holds exactly the files the case
made. The size limits have their own table (tests/test_size_limits.py)."""

import json
import shutil
from pathlib import Path

import pytest
from capped import probe


def _text(name, body):
    def make(d: Path):
        (d / name).write_text(body)

    return make


def _model_with(config_edit):
    """A copy of the shipped default whose config.json is edited."""

    def make(d: Path):
        from probes.framework.models import resolve_model_path

        m = d / "m"
        shutil.copytree(resolve_model_path("default"), m)
        cfg = json.loads((m / "config.json").read_text())
        (m / "config.json").write_text(json.dumps(config_edit(cfg)))

    return make


def _run_dir(run_json, summary=None):
    """A directory shaped like a finished probe run, with the given run.json / summary.json."""

    def make(d: Path):
        r = d / "r"
        r.mkdir()
        (r / "run.json").write_text(run_json if isinstance(run_json, str) else json.dumps(run_json))
        if summary is not None:
            (r / "summary.json").write_text(summary)

    return make


def _curated_with_summary(text):
    """A copy of a curated finished run whose summary.json is replaced."""

    def make(d: Path):
        src = Path(__file__).resolve().parents[1] / "results" / "curated" / "fact-swap-mem128"
        shutil.copytree(src, d / "r")
        (d / "r" / "summary.json").write_text(text)

    return make


def _no_weights(d: Path):
    from probes.framework.models import resolve_model_path

    shutil.copytree(resolve_model_path("default"), d / "m")
    (d / "m" / "model.safetensors").unlink()


def _garbage_weights(d: Path):
    from probes.framework.models import resolve_model_path

    shutil.copytree(resolve_model_path("default"), d / "m")
    (d / "m" / "model.safetensors").write_bytes(b"\x00" * 64)


def _safetensors(path: Path, shape=(2, 2)) -> None:
    """A safetensors file of one float32 tensor `w` (its header states the shape; the data is
    as long as a small one's, since only headers are read before a refusal)."""
    import struct

    n = 1
    for d in shape:
        n *= d
    header = json.dumps({"w": {"dtype": "F32", "shape": list(shape), "data_offsets": [0, 4 * n]}})
    path.write_bytes(struct.pack("<Q", len(header)) + header.encode() + b"\0" * min(4 * n, 64))


LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 8, "vocab_size": 400,
         "intermediate_size": 16}  # fmt: skip


def _hf_dir(config, *, weights_shape=(400, 8), index=None, loop=False):
    """A transformers-looking directory: config.json (any text, or a JSON value), safetensors
    weights of one tensor, or an index naming other files; `loop`: config.json a symlink loop."""

    def make(d: Path):
        m = d / "m"
        m.mkdir()
        if loop:
            (m / "config.json").symlink_to(m / "config.json")
        else:
            text = config if isinstance(config, str) else json.dumps(config)
            (m / "config.json").write_text(text)
        if index is None:
            _safetensors(m / "model.safetensors", weights_shape)
        else:
            (m / "model.safetensors.index.json").write_text(json.dumps({"weight_map": index}))
            for name in set(index.values()):
                (m / name).write_bytes(b"\x80\x04K\x01.")  # a pickle of the int 1

    return make


def _file(name: str, data: bytes):
    def make(d: Path):
        (d / name).write_bytes(data)

    return make


OUT = ("--out", "out")
CASES = [
    # probe run: options
    ("run-unknown-probe", ("run", "no-such-probe"), None, 2, "no-such-probe"),
    ("run-missing-model", ("run", "fact-swap", "--model", "nope/none", *OUT), None, 2, "does not exist"),
    ("run-negative-mem", ("run", "fact-swap", "--mem", "-1", *OUT), None, 2, "--mem"),
    ("run-zero-tgt", ("run", "fact-swap", "--tgt-len", "0", *OUT), None, 2, "--tgt-len"),
    ("run-zero-n", ("run", "fact-swap", "--n", "0", *OUT), None, 2, "--n"),
    ("run-text-mem", ("run", "fact-swap", "--mem", "lots", *OUT), None, 2, "--mem"),
    ("run-reversed-distance", ("run", "fact-swap", "--distance", "64-16", *OUT), None, 2, "LO <= HI"),
    ("run-words-distance", ("run", "fact-swap", "--distance", "far", *OUT), None, 2, "not a list of distances"),
    ("run-short-distance", ("run", "fact-swap", "--distance", "2-3", *OUT), None, 2, "distances start at"),
    ("run-negative-seed", ("run", "fact-swap", "--seed", "-1", *OUT), None, 2, "--seed"),
    ("run-bad-device", ("run", "fact-swap", "--device", "tpu", *OUT), None, 2, "--device"),
    ("run-bad-dtype", ("run", "fact-swap", "--dtype", "float16", *OUT), None, 2, "--dtype"),
    ("run-two-models", ("run", "fact-swap", "--model", "default", "--model", "default-mem0", *OUT), None, 2, "--model"),
    ("run-empty-out", ("run", "fact-swap", "--out", ""), None, 2, "--out"),
    ("run-out-is-file", ("run", "fact-swap", "--out", "f"), _text("f", "x"), 2, "f"),
    ("run-bad-planted", ("run", "fact-swap", "--model", "planted:bogus=1", *OUT), None, 2, "bogus"),
    ("run-language-not-json", ("run", "fact-swap", "--language", "lang.json", *OUT), _text("lang.json", "{not json"), 2, "lang.json"),
    ("run-language-wrong-shape", ("run", "fact-swap", "--language", "lang.json", *OUT), _text("lang.json", "[1, 2]"), 2, "lang.json"),
    ("run-negative-min-effect", ("run", "fact-swap", "--min-effect", "-1", *OUT), None, 2, "--min-effect"),
    ("run-bad-probe-param", ("run", "recl", "--r", "2.0", *OUT), None, 2, "(0, 1]"),
    ("run-file-probe-missing", ("run", "nofile.py:Probe", *OUT), None, 2, "nofile.py"),
    ("run-bad-cache", ("run", "fact-swap", "--cache", "fast", *OUT), None, 2, "--cache"),
    ("run-kv-cache-absolute", ("run", "fact-swap", "--model", "abs", "--cache", "kv", *OUT), None, 2, "not exact"),
    ("run-cache-recompute", ("run", "fact-swap", "--evaluator", "recompute", "--cache", "hidden", *OUT), None, 2, "--evaluator cached"),
    # probe run: model directories
    ("model-config-is-a-list", ("run", "fact-swap", "--model", "m", *OUT), _model_with(lambda c: [c]), 2, "config.json"),
    ("model-config-type-error", ("run", "fact-swap", "--model", "m", *OUT), _model_with(lambda c: {**c, "model": {**c["model"], "n_layer": "two"}}), 2, "n_layer"),
    ("model-without-weights", ("run", "fact-swap", "--model", "m", *OUT), _no_weights, 2, "model.safetensors"),
    ("model-garbage-weights", ("run", "fact-swap", "--model", "m", *OUT), _garbage_weights, 2, "safetensors"),
    ("model-txl-1e5-layers", ("run", "fact-swap", "--model", "m", *OUT), _model_with(lambda c: {**c, "model": {**c["model"], "n_layer": 100_000}}), 2, "implies a model of at least"),
    # probe run: transformers directories and GGUF files, checked before anything is built
    ("hf-1e5-layers", ("run", "fact-swap", "--model", "m", *OUT), _hf_dir({**LLAMA, "num_hidden_layers": 100_000}), 2, "100,000 layers"),
    ("hf-huge-hidden", ("run", "fact-swap", "--model", "m", *OUT), _hf_dir({**LLAMA, "hidden_size": 10**7}), 2, "implies a model of at least"),
    ("hf-huge-vocab", ("run", "fact-swap", "--model", "m", *OUT), _hf_dir({**LLAMA, "vocab_size": 10**9}), 2, "implies a model of at least"),
    ("hf-weights-beyond-memory", ("run", "fact-swap", "--model", "m", *OUT), _hf_dir({**LLAMA, "hidden_size": 2**20, "vocab_size": 2**20}, weights_shape=(2**20, 2**20)), 2, "needs about"),
    ("hf-garbage-config", ("run", "fact-swap", "--model", "m", *OUT), _hf_dir("{oops"), 2, "config.json is not JSON"),
    ("hf-list-config", ("run", "fact-swap", "--model", "m", *OUT), _hf_dir([LLAMA]), 2, "config.json holds a JSON list"),
    ("hf-no-model-type", ("run", "fact-swap", "--model", "m", *OUT), _hf_dir({"architectures": ["LlamaForCausalLM"]}), 2, "no model_type"),
    ("hf-config-symlink-loop", ("run", "fact-swap", "--model", "m", *OUT), _hf_dir(None, loop=True), 2, "symlink that does not resolve"),
    ("hf-index-names-a-pickle", ("run", "fact-swap", "--model", "m", *OUT), _hf_dir(LLAMA, index={"w": "pytorch_model.bin"}), 2, "pickled weights are never read"),
    ("hf-index-leaves-the-dir", ("run", "fact-swap", "--model", "m", *OUT), _hf_dir(LLAMA, index={"w": "../x.safetensors"}), 2, "not a file in the model directory"),
    ("gguf-name-not-gguf", ("run", "fact-swap", "--model", "m.gguf", *OUT), _file("m.gguf", b"PK\x03\x04 not gguf"), 2, "not a GGUF file"),
    ("model-is-a-plain-file", ("run", "fact-swap", "--model", "m.bin", *OUT), _file("m.bin", b"\x80\x04K\x01."), 2, "is a file but not a GGUF model"),
    # probe diagnose
    ("diagnose-unknown-skip", ("diagnose", "--skip", "nosuch", *OUT), None, 2, "nosuch"),
    ("diagnose-one-model", ("diagnose", "--models", "default", *OUT), None, 2, "--models"),
    ("diagnose-duplicate-models", ("diagnose", "--models", "default,default", *OUT), None, 2, "default"),
    ("diagnose-models-and-model", ("diagnose", "--models", "default,default-mem0", "--model", "default", *OUT), None, 2, "--model"),
    # probe report / rerun
    ("report-nothing", ("report", "nope/*"), None, 2, "nope"),
    ("report-run-json-list", ("report", "r"), _run_dir("[]", "{}"), 2, "run.json"),
    ("report-summary-string", ("report", "r"), _curated_with_summary('"text"'), 2, "summary.json"),
    ("rerun-missing", ("rerun", "nope"), None, 2, "nope"),
    ("rerun-run-json-empty", ("rerun", "r"), _run_dir("{}"), 2, "run.json"),
    ("rerun-not-json", ("rerun", "r"), _run_dir("{oops"), 2, "run.json"),
    ("report-summary-not-json", ("report", "r"), _curated_with_summary("{oops"), 2, "summary.json"),
    # probe train
    ("train-unknown-preset", ("train", "--preset", "huge", *OUT), None, 2, "huge"),
    ("train-missing-config", ("train", "--config", "none.toml", *OUT), None, 2, "none.toml"),
    ("train-config-not-toml", ("train", "--config", "c.toml", *OUT), _text("c.toml", "= = ="), 2, "c.toml"),
    ("train-type-error", ("train", "--set", "model.n_layer=two", *OUT), None, 2, "n_layer"),
    ("train-unknown-key", ("train", "--set", "model.colour=blue", *OUT), None, 2, "colour"),
    ("train-infinite-lr", ("train", "--set", "lr=inf", *OUT), None, 2, "lr"),
    ("train-nan-init", ("train", "--set", "model.init_std=nan", *OUT), None, 2, "init_std"),
    ("train-zero-steps", ("train", "--steps", "0", *OUT), None, 2, "steps"),
    ("train-resume-nothing", ("train", "--resume", "--out", "empty"), None, 2, "empty"),
    # probe train-compare
    ("compare-missing", ("train-compare", "nope", "default"), None, 2, "nope"),
    ("compare-garbage", ("train-compare", "default", "g.jsonl"), _text("g.jsonl", "not json\n"), 2, "g.jsonl"),
    # probe synth
    ("synth-unknown-edit", ("synth", "show", "teleport"), None, 2, "teleport"),
    ("synth-short-distance", ("synth", "show", "fact-swap", "--distance", "1"), None, 2, "too short"),
    ("synth-stream-rows", ("synth", "stream", "--rows", "100000000"), None, 2, "--rows"),
    ("synth-stream-tgt-len", ("synth", "stream", "--tgt-len", "0"), None, 2, "--tgt-len"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "args", "setup", "code", "fragment"), CASES, ids=[c[0] for c in CASES]
)
def test_bad_input_is_one_line_with_its_exit_code_and_leaves_nothing_behind(
    tmp_path, name, args, setup, code, fragment
):
    if setup is not None:
        setup(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    r = probe(*args, cwd=tmp_path)
    assert r.returncode == code, (r.returncode, r.stderr[-1500:])
    assert r.stderr.count("\n") == 1, r.stderr
    assert fragment in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert after == before, set(after) - set(before)


def test_the_table_covers_every_command_and_forty_cases():
    commands = {c[1][0] for c in CASES}
    assert {"run", "diagnose", "report", "rerun", "train", "train-compare", "synth"} <= commands
    assert len(CASES) >= 40 and len({c[0] for c in CASES}) == len(CASES)
