"""Hostile and careless input across every command, one table: each case is the argv (with files
it needs made in a fresh directory), the expected exit code and a fragment of the message. Each
runs the real CLI as a child process under a memory cap (tests/capped.py) and must answer with
one line on stderr and leave nothing behind: the directory holds exactly the files the case
made. The size limits have their own table (tests/test_size_limits.py)."""

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import capped
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


def _sparse(path: Path):
    """A 2 GiB file that takes no disk (reading it whole would allocate 2 GiB)."""
    with open(path, "wb") as f:
        f.truncate(2 * 2**30)


def _fifo(path: Path):
    os.mkfifo(path)  # opening it for reading would wait for a writer forever


def _dev_zero(path: Path):
    path.symlink_to("/dev/zero")  # endless


def _loop(path: Path):
    path.symlink_to(path.name)


def _at(name, make):
    """A file made by `make` at `name` (its directory created), nothing else."""

    def setup(d: Path):
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        make(d / name)

    return setup


def _model_file(name, make):
    """A copy of the shipped default whose `name` is replaced by what `make` makes."""

    def setup(d: Path):
        from probes.framework.models import resolve_model_path

        shutil.copytree(resolve_model_path("default"), d / "m")
        (d / "m" / name).unlink()
        make(d / "m" / name)

    return setup


def _curated_then(name, make):
    """A copy of a curated finished run whose `name` is replaced by what `make` makes."""

    def setup(d: Path):
        src = Path(__file__).resolve().parents[1] / "results" / "curated" / "fact-swap-mem128"
        shutil.copytree(src, d / "r")
        (d / "r" / name).unlink()
        make(d / "r" / name)

    return setup


def _long_word(name, n):
    """A text file of prose around one run of `n` letters without a space (and p.txt, prose)."""

    def make(d: Path):
        prose = "the quick brown fox jumps over the lazy dog. " * 200
        (d / name).write_text(prose + "a" * n + " " + prose)
        (d / "p.txt").write_text(prose)

    return make


def _bpe(name, size):
    """A tokenizers-format BPE of `size` tokens (not what the shipped synth model reads)."""

    def make(d: Path):
        from text_helpers import small_bpe

        (d / name).write_text(json.dumps(small_bpe(size).to_json()))

    return make


def _planted_run(**options):
    """A finished run of fact-swap on a planted model whose run.json options are then edited
    (a run directory may come from anyone)."""

    def make(d: Path):
        r = probe("run", "fact-swap", "--model", "planted:copy=2", "--n", "4", "--out", "tmp",
                  "--json", "--quiet", cwd=d)  # fmt: skip
        assert r.returncode in (0, 1), r.stderr
        shutil.move(d / json.loads(r.stdout)["run_dir"], d / "r")
        shutil.rmtree(d / "tmp")
        record = json.loads((d / "r" / "run.json").read_text())
        record["options"].update(options)
        (d / "r" / "run.json").write_text(json.dumps(record))  # NaN as Python writes it

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
    ("hf-garbage-config", ("run", "fact-swap", "--model", "m", *OUT), _hf_dir("{oops"), 2, "config.json' is not valid JSON"),
    ("hf-list-config", ("run", "fact-swap", "--model", "m", *OUT), _hf_dir([LLAMA]), 2, "config.json holds a JSON list"),
    ("hf-no-model-type", ("run", "fact-swap", "--model", "m", *OUT), _hf_dir({"architectures": ["LlamaForCausalLM"]}), 2, "no model_type"),
    ("hf-config-symlink-loop", ("run", "fact-swap", "--model", "m", *OUT), _hf_dir(None, loop=True), 2, "is a symlink loop"),
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
    ("synth-unknown-probe", ("synth", "show", "teleport"), None, 2, "teleport"),
    ("synth-unknown-edit", ("synth", "show", "--edit", "teleport"), None, 2, "teleport"),
    ("synth-short-distance", ("synth", "show", "--edit", "replace", "--distance", "1"), None, 2, "too short"),
    ("synth-stream-rows", ("synth", "stream", "--rows", "100000000"), None, 2, "--rows"),
    ("synth-stream-tgt-len", ("synth", "stream", "--tgt-len", "0"), None, 2, "--tgt-len"),
    # every number: finite, in its range, the same bounds from the CLI, Python and run.json
    ("run-nan-min-effect", ("run", "fact-swap", "--min-effect", "nan", *OUT), None, 2, "not a finite number"),
    ("run-inf-min-effect", ("run", "fact-swap", "--min-effect", "inf", *OUT), None, 2, "not a finite number"),
    ("rerun-nan-min-effect", ("rerun", "r", *OUT), _planted_run(min_effect=float("nan")), 2, "non-finite number NaN"),
    ("rerun-string-nan-min-effect", ("rerun", "r", *OUT), _planted_run(min_effect="nan"), 2, "--min-effect: 'nan' is not a finite number"),
    ("rerun-huge-threads", ("rerun", "r", *OUT), _planted_run(threads=100000), 2, "--threads"),
    ("run-huge-threads", ("run", "fact-swap", "--threads", "100000", *OUT), None, 2, "--threads"),
    ("train-huge-threads", ("train", "--threads", "100000", *OUT), None, 2, "--threads"),
    ("train-set-huge-threads", ("train", "--set", "threads=100000", *OUT), None, 2, "threads"),
    ("train-nan-seed", ("train", "--seed", "nan", *OUT), None, 2, "--seed"),
    ("run-huge-sinks", ("run", "fact-swap", "--sinks", "1000000000", *OUT), None, 2, "--sinks"),
    ("compare-nan-tolerance", ("train-compare", "default", "default", "--nll-tol", "nan"), None, 2, "not a finite number"),
    ("synth-negative-seed", ("synth", "show", "fact-swap", "--seed", "-1"), None, 2, "--seed"),
    ("planted-negative-sigma", ("run", "fact-swap", "--model", "planted:sigma=-1", *OUT), None, 2, "sigma"),
    ("planted-negative-quantum", ("run", "fact-swap", "--model", "planted:quantum=-1", *OUT), None, 2, "quantum"),
    ("planted-negative-seed", ("run", "fact-swap", "--model", "planted:seed=-1", *OUT), None, 2, "seed"),
    ("planted-duplicate-field", ("run", "fact-swap", "--model", "planted:copy=1,copy=2", *OUT), None, 2, "copy is given twice"),
    ("planted-nan-sigma", ("run", "fact-swap", "--model", "planted:sigma=nan", *OUT), None, 2, "not a finite number"),
    ("planted-inf-base", ("run", "fact-swap", "--model", "planted:base=inf", *OUT), None, 2, "not a finite number"),
    ("planted-inf-copy", ("run", "fact-swap", "--model", "planted:copy=inf", *OUT), None, 2, "not a finite number"),
    ("planted-zero-boundary-len", ("run", "fact-swap", "--model", "planted:boundary_len=0", *OUT), None, 2, "boundary_len"),
    ("planted-huge-tgt-len", ("run", "fact-swap", "--model", "planted:tgt_len=1000000000", *OUT), None, 2, "16384"),
    ("planted-huge-mem-len", ("run", "fact-swap", "--model", "planted:mem_len=1000000000", *OUT), None, 2, "131072"),
    ("planted-huge-n-layer", ("run", "fact-swap", "--model", "planted:n_layer=1000000000", *OUT), None, 2, "n_layer"),
    ("planted-recompute", ("run", "fact-swap", "--model", "planted:copy=2", "--evaluator", "recompute", *OUT), None, 2, "drop --evaluator"),
    ("planted-sinks", ("run", "fact-swap", "--model", "planted:copy=2", "--sinks", "4", *OUT), None, 2, "drop --sinks"),
    # every file read: a regular file within its size limit, then parsed
    ("model-config-sparse-2g", ("run", "fact-swap", "--model", "m", *OUT), _model_file("config.json", _sparse), 2, "above the limit"),
    ("model-hf-config-sparse-2g", ("run", "fact-swap", "--model", "hf:m", *OUT), _model_file("config.json", _sparse), 2, "above the limit"),
    ("model-weights-fifo", ("run", "fact-swap", "--model", "m", *OUT), _model_file("model.safetensors", _fifo), 2, "model.safetensors is not a regular file"),
    ("model-config-fifo", ("run", "fact-swap", "--model", "m", *OUT), _model_file("config.json", _fifo), 2, "is a FIFO"),
    ("model-tokenizer-dev-zero", ("run", "fact-swap", "--model", "m", *OUT), _model_file("tokenizer.json", _dev_zero), 2, "character device"),
    ("model-config-symlink-loop", ("run", "fact-swap", "--model", "m", *OUT), _model_file("config.json", _loop), 2, "symlink loop"),
    ("train-config-dev-zero", ("train", "--config", "c.toml", *OUT), _at("c.toml", _dev_zero), 2, "character device"),
    ("train-config-fifo", ("train", "--config", "c.toml", *OUT), _at("c.toml", _fifo), 2, "is a FIFO"),
    ("train-config-sparse", ("train", "--config", "c.toml", *OUT), _at("c.toml", _sparse), 2, "above the limit"),
    ("train-text-dev-zero", ("train", "--text", "/dev/zero", *OUT), None, 2, "character device"),
    ("train-text-fifo", ("train", "--text", "t.txt", *OUT), _at("t.txt", _fifo), 2, "is a FIFO"),
    ("run-tokenizer-fifo", ("run", "fact-swap", "--tokenizer", "tok.json", *OUT), _at("tok.json", _fifo), 2, "is a FIFO"),
    ("run-language-fifo", ("run", "fact-swap", "--language", "l.json", *OUT), _at("l.json", _fifo), 2, "is a FIFO"),
    ("run-language-dev-zero", ("run", "fact-swap", "--language", "l.json", *OUT), _at("l.json", _dev_zero), 2, "character device"),
    ("run-language-sparse", ("run", "fact-swap", "--language", "l.json", *OUT), _at("l.json", _sparse), 2, "above the limit"),
    ("report-run-json-fifo", ("report", "r"), _at("r/run.json", _fifo), 2, "is a FIFO"),
    ("report-run-json-sparse", ("report", "r"), _at("r/run.json", _sparse), 2, "above the limit"),
    ("rerun-run-json-dev-zero", ("rerun", "r", *OUT), _at("r/run.json", _dev_zero), 2, "character device"),
    ("report-summary-sparse", ("report", "r"), _curated_then("summary.json", _sparse), 2, "above the limit"),
    ("report-summary-fifo", ("report", "r"), _curated_then("summary.json", _fifo), 2, "is a FIFO"),
    ("compare-metrics-sparse", ("train-compare", "default", "m.jsonl"), _at("m.jsonl", _sparse), 2, "above the limit"),
    ("compare-metrics-fifo", ("train-compare", "default", "m.jsonl"), _at("m.jsonl", _fifo), 2, "is a FIFO"),
    ("run-foreign-tokenizer", ("run", "fact-swap", "--tokenizer", "tok.json", *OUT), _bpe("tok.json", 300), 2, "is not the vocabulary of model"),
    # text: a "word" of megabytes is data, refused before any tokenizer sees it
    ("train-text-40mb-word", ("train", "--text", "w.txt", *OUT), _long_word("w.txt", 40_000_000), 2, "characters without a space"),
    ("train-text-4mb-word-and-prose", ("train", "--text", "w.txt", "--text", "p.txt", *OUT), _long_word("w.txt", 4_000_000), 2, "characters without a space"),
    # messages that say what is wrong and what would be right
    ("report-finished-without-summary", ("report", "r"), _run_dir({"schema_version": 1, "status": "complete", "probe": {"name": "fact-swap"}}), 2, "summary.json is missing"),
    ("train-nan-init-says-what-is-right", ("train", "--set", "model.init_std=nan", *OUT), None, 2, "expected a finite number > 0"),
    ("planted-bfloat16", ("run", "fact-swap", "--model", "planted:copy=2", "--dtype", "bfloat16", *OUT), None, 2, "drop --dtype"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "args", "setup", "code", "fragment"), CASES, ids=[c[0] for c in CASES]
)
def test_bad_input_is_one_line_with_its_exit_code_and_leaves_nothing_behind(
    tmp_path, name, args, setup, code, fragment
):
    refused(tmp_path, setup, code, fragment, lambda: probe(*args, cwd=tmp_path))


def tree(root: Path) -> dict[str, object]:
    """Every entry under `root` with what "nothing changed" compares: a small regular file's
    bytes, a large one's size and modification time (a 2 GiB sparse file is not read), the
    kind of anything else (a FIFO is never opened)."""

    def state(p: Path) -> object:
        st = p.lstat()
        if not stat.S_ISREG(st.st_mode):
            return stat.S_IFMT(st.st_mode)
        return p.read_bytes() if st.st_size < 2**20 else (st.st_size, st.st_mtime_ns)

    return {str(p.relative_to(root)): state(p) for p in sorted(root.rglob("*"))}


def refused(tmp_path, setup, code, fragment, call):
    """Make the case's files, call the CLI, and hold it to the one-line refusal: the exit code,
    one line naming `fragment`, no traceback, every file as it was."""
    if setup is not None:
        setup(tmp_path)
    before = tree(tmp_path)
    r = call()
    assert r.returncode == code, (r.returncode, r.stderr[-1500:])
    assert r.stderr.count("\n") == 1, r.stderr
    assert fragment in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    after = tree(tmp_path)
    assert after == before, set(after) ^ set(before) or "a file changed"
    return r


def test_the_table_covers_every_command_and_forty_cases():
    commands = {c[1][0] for c in CASES}
    assert {"run", "diagnose", "report", "rerun", "train", "train-compare", "synth"} <= commands
    assert len(CASES) >= 40 and len({c[0] for c in CASES}) == len(CASES)


# --- python -m probes.paper: it replaces its --out, so only what it wrote may be there ----------


def _notes_in(name):
    def make(d: Path):
        (d / name).mkdir(parents=True, exist_ok=True)
        (d / name / "notes.txt").write_text("mine")

    return make


def _paper_dir_with_notes(d: Path):
    (d / "p").mkdir()
    for name in ("paper.json", "paper.md", "table6.md"):
        (d / "p" / name).write_text("{}")
    (d / "p" / "notes.txt").write_text("mine")


READ_ONLY = "/sys/paper" if os.geteuid() == 0 else "ro/paper"  # root writes through chmod


def _read_only(d: Path):
    if os.geteuid() != 0:
        (d / "ro").mkdir()
        (d / "ro").chmod(0o555)


PAPER_CASES = [
    ("paper-out-holds-another-file", ("--out", "d"), _notes_in("d"), 2, "did not write"),
    ("paper-out-paper-dir-with-notes", ("--out", "p"), _paper_dir_with_notes, 2, "did not write"),
    ("paper-out-parent", ("--out", ".."), _notes_in("a"), 2, "the working directory or one above"),
    ("paper-out-here", ("--out", "."), None, 2, "the working directory"),
    ("paper-out-root", ("--out", "/"), None, 2, "the working directory or one above"),
    ("paper-out-empty", ("--out", ""), None, 2, "--out '' is empty"),
    ("paper-out-a-file", ("--out", "f"), _text("f", "x"), 2, "is a file"),
    ("paper-out-read-only", ("--out", READ_ONLY), _read_only, 2, "paper"),
    ("paper-unknown-option", ("--bogus",), None, 2, "--bogus"),
    ("paper-zero-threads", ("--threads", "0"), None, 2, "--threads"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "args", "setup", "code", "fragment"), PAPER_CASES, ids=[c[0] for c in PAPER_CASES]
)
def test_the_paper_never_replaces_what_it_did_not_write_and_refuses_in_one_line(
    tmp_path, name, args, setup, code, fragment
):
    cwd = tmp_path / "a" / "b" if name == "paper-out-parent" else tmp_path
    cwd.mkdir(parents=True, exist_ok=True)
    try:
        refused(
            tmp_path, setup, code, fragment,
            lambda: probe("--quick", *args, cwd=cwd, module="probes.paper"),
        )  # fmt: skip
    finally:
        if (tmp_path / "ro").exists():
            (tmp_path / "ro").chmod(0o755)


def test_a_paper_directory_is_recognised_by_its_files_alone(tmp_path):
    from probes.paper.__main__ import is_paper_dir

    for name in ("paper.json", "paper.md", "table6.md", "layered.md", "recl_curves_r0.1.png"):
        (tmp_path / name).write_text("x")
    (tmp_path / "runs").mkdir()
    assert is_paper_dir(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    assert not is_paper_dir(tmp_path)
    (tmp_path / "notes.txt").unlink()
    (tmp_path / "paper.json").unlink()
    assert not is_paper_dir(tmp_path)


# --- probe rerun: a run directory may come from anyone ------------------------------------------


def test_a_rerun_writes_where_the_user_says_never_where_run_json_says(tmp_path):
    r = probe("run", "fact-swap", "--model", "planted:copy=2", "--n", "4", "--out", "first",
              "--json", "--quiet", cwd=tmp_path)  # fmt: skip
    assert r.returncode in (0, 1), r.stderr
    run_dir = tmp_path / json.loads(r.stdout)["run_dir"]
    record = json.loads((run_dir / "run.json").read_text())
    elsewhere = tmp_path / "elsewhere"  # say, /etc/cron.d
    record["options"]["out"] = str(elsewhere)
    (run_dir / "run.json").write_text(json.dumps(record))
    work = tmp_path / "work"
    work.mkdir()
    r = probe("rerun", str(run_dir), "--json", "--quiet", cwd=work)
    assert r.returncode == 0, r.stderr
    assert not elsewhere.exists()
    assert (work / json.loads(r.stdout)["rerun"]).is_relative_to(work / "results")
    r = probe("rerun", str(run_dir), "--json", "--quiet", "--out", "mine", cwd=work)
    assert r.returncode == 0 and (work / json.loads(r.stdout)["rerun"]).is_relative_to(
        work / "mine"
    )
    assert not elsewhere.exists()


# --- probe train --resume: damaged checkpoints are not "nothing checkpointed" --------------------

SMALL = (
    "--device", "cpu", "--threads", "1", "--quiet",
    "--set", "model.d_model=16", "--set", "model.d_head=8", "--set", "model.n_head=2",
    "--set", "model.d_inner=32", "--set", "model.tgt_len=16", "--set", "model.mem_len=16",
    "--set", "batch_size=4", "--set", "warmup_steps=1", "--set", "keep_checkpoints=2",
    "--set", "eval_every=0", "--set", "checkpoint_every=1",
)  # fmt: skip


@pytest.fixture(scope="module")
def stopped_training(tmp_path_factory):
    """A training run of 2 steps with both checkpoints, its final model gone (as if killed)."""
    root = tmp_path_factory.mktemp("trained")
    r = probe("train", "--steps", "2", "--out", "p", *SMALL, cwd=root)
    assert r.returncode == 0, r.stderr
    shutil.rmtree(root / "p" / "model")
    return root / "p"


def _each_checkpoint(damage):
    def make(p: Path):
        for c in sorted((p / "checkpoints").iterdir()):
            damage(c)

    return make


def _replace_by_fifo(path: Path):
    path.unlink()
    os.mkfifo(path)


DAMAGE = {
    "rng-deleted": (_each_checkpoint(lambda c: (c / "rng.json").unlink()), "rng.json missing"),
    "rng-a-fifo": (
        _each_checkpoint(lambda c: _replace_by_fifo(c / "rng.json")),
        "not a regular file",
    ),
    "weights-deleted": (
        _each_checkpoint(lambda c: (c / "model.safetensors").unlink()),
        "model.safetensors missing",
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_resume_over_damaged_checkpoints_is_refused_naming_them_never_restarted(
    stopped_training, tmp_path, damage
):
    make, fragment = DAMAGE[damage]
    shutil.copytree(stopped_training, tmp_path / "p")
    r = refused(
        tmp_path, lambda d: make(d / "p"), 2, fragment,
        lambda: probe("train", "--resume", "--out", "p", *SMALL, cwd=tmp_path),
    )  # fmt: skip
    assert "step_00000001" in r.stderr and "step_00000002" in r.stderr
    assert "starts the run over" not in r.stderr


# --- the environment: arguments, closed or full streams, a read-only HOME ------------------------


def run_capped(argv, cwd, *, close_stderr=False, stdout=subprocess.PIPE, env=None):
    """A child `python ARGV` under the memory cap, stdin closed (optionally stderr too)."""

    def setup():
        capped._cap()
        if close_stderr:
            os.close(2)

    return subprocess.run(
        [sys.executable, *argv], cwd=cwd, stdin=subprocess.DEVNULL, stdout=stdout,
        stderr=subprocess.DEVNULL if close_stderr else subprocess.PIPE, preexec_fn=setup,
        env={**os.environ, "PYTHONPATH": str(capped.ROOT), **(env or {})}, timeout=300,
    )  # fmt: skip


NOT_UTF8 = os.fsdecode(b"o\xff")  # a name whose byte 0xff is no UTF-8


@pytest.mark.parametrize(
    "args",
    [
        ("-m", "probes.cli", "train", "--steps", "1", "--out", NOT_UTF8, *SMALL),
        ("-m", "probes.cli", "run", "fact-swap", "--model", "planted:copy=2", "--out", NOT_UTF8),
        ("-m", "probes.paper", "--quick", "--out", NOT_UTF8),
    ],
    ids=["train", "run", "paper"],
)
def test_an_argument_that_is_not_utf8_is_refused_before_anything_is_written(tmp_path, args):
    r = run_capped(args, tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 2 and err.count("\n") == 1 and "not valid UTF-8" in err, err
    assert list(tmp_path.iterdir()) == []


def test_bad_input_with_stderr_closed_still_exits_2_and_writes_nothing(tmp_path):
    r = run_capped(("-m", "probes.cli", "run", "fact-swap", "--model", "nope", "--out", "o"),
                   tmp_path, close_stderr=True)  # fmt: skip
    assert r.returncode == 2 and list(tmp_path.iterdir()) == []


def test_stdout_on_a_full_device_is_one_line_exit_2():
    with open("/dev/full", "w") as full:
        r = run_capped(("-m", "probes.cli", "list"), None, stdout=full)
    err = r.stderr.decode()
    assert r.returncode == 2 and err.count("\n") == 1, err
    assert "cannot write to stdout" in err and "Traceback" not in err


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_into_a_closed_pipe_exits_as_sigpipe_quietly(flag):
    r = subprocess.run(
        ["bash", "-c", f"{sys.executable} -m probes.cli {flag} | true; echo ${{PIPESTATUS[0]}}"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(capped.ROOT)},
    )  # fmt: skip
    assert r.stdout.strip() in ("0", "141"), r.stdout
    assert r.stderr == ""


def test_a_read_only_home_leaves_stderr_quiet_under_quiet(tmp_path):
    # /dev/null is a file: no config or cache directory can be made under it, even by root
    env = {"HOME": "/dev/null", "MPLCONFIGDIR": "", "XDG_CONFIG_HOME": "", "XDG_CACHE_HOME": ""}
    env = {k: v for k, v in env.items() if v} | {"PYTHONWARNINGS": "default"}
    r = run_capped(("-m", "probes.cli", "run", "fact-swap", "--model", "planted:copy=2", "--n",
                    "4", "--out", "o", "--quiet"), tmp_path, env=env)  # fmt: skip
    assert r.returncode in (0, 1), r.stderr
    assert r.stderr.decode() == ""


def test_train_compare_shows_nan_as_no_value_and_huge_numbers_short(tmp_path):
    (tmp_path / "a.jsonl").write_text(
        '{"step": 1, "kind": "train", "loss": NaN}\n'
        '{"step": 1, "kind": "eval", "nll": NaN, "filler_nll": 1e308}\n'
    )
    (tmp_path / "b.jsonl").write_text(
        '{"step": 1, "kind": "train", "loss": 1.0}\n'
        '{"step": 1, "kind": "eval", "nll": 2.0, "filler_nll": 3.0}\n'
    )
    r = probe("train-compare", "a.jsonl", "b.jsonl", cwd=tmp_path)
    assert r.returncode == 1 and r.stderr == "", r.stderr
    assert "max |Δ| 0" not in r.stdout and "on one side only" in r.stdout
    assert max(len(w) for w in r.stdout.split()) < 20, r.stdout  # 1e308 is not 309 digits
    assert "nan" not in r.stdout.lower() and "1.0000e+308" in r.stdout
    doc = json.loads(probe("train-compare", "a.jsonl", "b.jsonl", "--json", cwd=tmp_path).stdout)
    assert doc["train"]["max_abs_diff"] is None  # unknown, not 0
