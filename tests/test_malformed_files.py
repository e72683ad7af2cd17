"""INVARIANT: a file that parses but is not what the project writes — run.json / summary.json of
the wrong JSON type or missing fields, a tampered train_state.pt or rng.json, a probe run given
to `probe train`, an --out that cannot be written, a config value of the wrong type, a non-JSON
--language — is bad input: exit 2, one line on stderr naming the file (or field) and what is
wrong, and nothing written or changed."""

import json
import os
import shutil

import pytest
import torch
from click.testing import CliRunner

from probes.cli.main import cli
from probes.testing import tiny_checkpoint


def invoke(*args):
    return CliRunner().invoke(cli, list(args))


def assert_bad_input(r, *fragments):
    assert r.exit_code == 2, (r.exit_code, r.output)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


def tree(path):
    """Every file under `path` with its bytes: what "nothing changed" compares."""
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    root = tmp_path_factory.mktemp("malformed")
    model = tiny_checkpoint(root / "tiny", mem_len=16, tgt_len=16)
    r = invoke("run", "fact-swap", "--model", str(model), "--out", str(root / "res"), "--n", "4",
               "--threads", "1", "--json")  # fmt: skip
    assert r.exit_code in (0, 1), r.output
    return model, json.loads(r.stdout)["run_dir"]


RUN_JSON = [
    ("[]", "run.json", "holds a list"),
    ("{}", "run.json", "'schema_version' is missing"),
    ('"complete"', "run.json", "holds a string"),
    ('{"schema_version": 1}', "run.json", "'status' is missing"),
]
SUMMARY_JSON = [
    ("[]", "summary.json", "holds a list"),
    ("{}", "summary.json", "'probe' is missing"),
    ('"x"', "summary.json", "holds a string"),
]


@pytest.mark.parametrize("command", ["report", "rerun"])
@pytest.mark.parametrize(("text", "file", "fragment"), RUN_JSON + SUMMARY_JSON)
def test_malformed_run_files_are_refused_naming_the_file(
    finished, tmp_path, command, text, file, fragment
):
    run_dir = tmp_path / "run"
    shutil.copytree(finished[1], run_dir)
    (run_dir / file).write_text(text)
    before = tree(tmp_path)
    extra = ["--out", str(tmp_path / "new")] if command == "rerun" else []
    assert_bad_input(invoke(command, str(run_dir), *extra), file, fragment)
    assert tree(tmp_path) == before and not (tmp_path / "new").exists()


def test_a_summary_field_of_the_wrong_type_is_refused(finished, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(finished[1], run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["bins"] = "all of them"
    (run_dir / "summary.json").write_text(json.dumps(summary))
    assert_bad_input(invoke("report", str(run_dir)), "summary.json", "'bins'", "a list")


def test_a_run_json_whose_options_are_not_an_object_is_refused_by_rerun(finished, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(finished[1], run_dir)
    record = json.loads((run_dir / "run.json").read_text())
    record["params"] = ["n", 4]
    (run_dir / "run.json").write_text(json.dumps(record))
    r = invoke("rerun", str(run_dir), "--out", str(tmp_path / "new"))
    assert_bad_input(r, "run.json", "'params'")
    assert not (tmp_path / "new").exists()


# --- probe train ---------------------------------------------------------------------------------

SMALL = [
    "--device", "cpu", "--threads", "1", "--quiet",
    "--set", "model.d_model=16", "--set", "model.d_head=8", "--set", "model.n_head=2",
    "--set", "model.d_inner=32", "--set", "model.tgt_len=16", "--set", "model.mem_len=16",
    "--set", "batch_size=4", "--set", "warmup_steps=1", "--set", "keep_checkpoints=1",
    "--set", "eval_every=0", "--set", "checkpoint_every=1",
]  # fmt: skip


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A short training run whose final model is gone (as if killed before writing it)."""
    out = tmp_path_factory.mktemp("train") / "r"
    r = invoke("train", "--steps", "2", "--out", str(out), *SMALL)
    assert r.exit_code == 0, r.output
    shutil.rmtree(out / "model")
    return out


@pytest.mark.parametrize(
    ("file", "write", "fragment"),
    [
        ("train_state.pt", lambda p: torch.save({"a": 1}, p), "is not a txl training state"),
        ("rng.json", lambda p: p.write_text("{}"), "is not a txl RNG state"),
    ],
)
def test_a_tampered_train_state_is_refused_on_resume(trained, tmp_path, file, write, fragment):
    out = tmp_path / "r"
    shutil.copytree(trained, out)
    write(out / "checkpoints" / "step_00000002" / file)
    before = tree(out)
    r = invoke("train", "--resume", "--out", str(out), "--quiet")
    assert_bad_input(r, f"step_00000002/{file}", fragment)
    assert tree(out) == before


@pytest.mark.parametrize("resume", [[], ["--resume"]])
def test_train_into_a_probe_run_directory_says_what_it_is(finished, tmp_path, resume):
    run_dir = tmp_path / "run"
    shutil.copytree(finished[1], run_dir)
    before = tree(run_dir)
    r = invoke("train", "--out", str(run_dir), *resume, "--steps", "1", *SMALL)
    assert_bad_input(r, str(run_dir), "is a probe run directory", "not a training run")
    assert "--resume" not in r.stderr and tree(run_dir) == before


def test_train_into_an_unwritable_out_is_refused(tmp_path, monkeypatch):
    locked = tmp_path / "ro"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: False if str(p) == str(locked) else real(p, mode)
    )
    r = invoke("train", "--out", str(locked / "r"), "--steps", "1", *SMALL)
    assert_bad_input(r, str(locked / "r"), "is not writable")
    assert list(locked.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="permissions are not enforced for root")
def test_train_into_a_read_only_out_is_refused(tmp_path):
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        r = invoke("train", "--out", str(locked / "r"), "--steps", "1", *SMALL)
        assert_bad_input(r, str(locked / "r"), "is not writable")
    finally:
        locked.chmod(0o755)


@pytest.mark.parametrize(
    ("args", "config"),
    [
        (["--set", "model.n_layer=two"], None),
        ([], '[model]\nn_layer = "two"\n'),
    ],
)
def test_a_config_value_of_the_wrong_type_names_the_field(tmp_path, args, config):
    if config is not None:
        (tmp_path / "c.toml").write_text(config)
        args = ["--config", str(tmp_path / "c.toml")]
    r = invoke("train", *args, "--out", str(tmp_path / "r"))
    assert_bad_input(r, "model.n_layer", "'two'", "an integer")
    assert not (tmp_path / "r").exists()


def test_a_non_json_language_file_names_the_file(finished, tmp_path):
    bad = tmp_path / "lang.json"
    bad.write_text("vocab: [a, b]\n")
    r = invoke("run", "fact-swap", "--model", str(finished[0]), "--language", str(bad), "--out",
               str(tmp_path / "res"))  # fmt: skip
    assert_bad_input(r, "--language", "lang.json")
    assert not (tmp_path / "res").exists()
