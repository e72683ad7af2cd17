"""Models with their own tokenizer (the tokenizer bridge): a tiny random transformers model
saved with a tokenizer of its own (a byte-level BPE whose separator is its eos), probed through
the CLI with synthetic texts and with real text; and the two kinds of tokenizer.json a model
directory can hold told apart by content, overruled by --tokenizer. Needs the `hf` extra and
tokenizers: `nox -s hf` runs it (TXL_REQUIRE_HF=1 makes a missing extra a failure)."""

import json
import os
from pathlib import Path

import pytest
from text_helpers import FOREIGN_EOS, foreign_bpe, own_tokenizer_llama, require_tokenizers

REQUIRED = os.environ.get("TXL_REQUIRE_HF") == "1"
transformers = __import__("transformers") if REQUIRED else pytest.importorskip("transformers")
require_tokenizers()

from click.testing import CliRunner  # noqa: E402

from probes.cli.main import cli  # noqa: E402
from probes.testing import tiny_transformers  # noqa: E402
from synth.language import Language  # noqa: E402
from synth.text.tokenizer import json_sha256  # noqa: E402

FAST = ["--n", "3", "--quiet", "--json"]
EOS = FOREIGN_EOS


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    """A Llama-style model whose directory holds its own tokenizer (eos: <|endoftext|>)."""
    return own_tokenizer_llama(tmp_path_factory.mktemp("own") / "llama", max_positions=2048)


def invoke(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def run_json(doc):
    return json.loads((Path(doc["run_dir"]) / "run.json").read_text())


@pytest.mark.parametrize("real_text", [False, True])
def test_a_model_with_its_own_tokenizer_runs_fact_swap_through_the_cli(own, tmp_path, real_text):
    extra = ["--haystack", "default", "--distance", "40-80,120-200"] if real_text else []
    r = invoke(["run", "fact-swap", "--model", str(own), "--evaluator", "stream", "--mem", "64",
                *extra, "--out", str(tmp_path), *FAST])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {"delta_mean", "delta_ci95", "p_value", "accuracy", "unmatched_pairs"} <= set(
        doc["metrics"]
    )
    assert doc["n_pairs"] + doc["metrics"]["unmatched_pairs"] == 3 * len(doc["bins"])
    assert doc["n_pairs"] >= 3 and doc["geometry"]["mem_len"] == 64
    assert all(c["status"] != "failed" for c in doc["checks"].values())
    vocab = run_json(doc)["vocabulary"]
    tokenizer_json = json.loads((own / "tokenizer.json").read_text())
    assert vocab["reads"] == "tokenizer" and vocab["separator"] == EOS
    assert vocab["tokenizer_sha256"] == json_sha256(tokenizer_json)
    samples = [
        json.loads(x) for x in (Path(doc["run_dir"]) / "samples.jsonl").read_text().splitlines()
    ]
    for s in samples:  # distances in the model's tokens, inside their bins
        b = doc["bins"][s["group"]]
        assert b["distance_lo"] <= s["distance"] <= b["distance_hi"]
        if not real_text:
            assert s["distance"] > s["synth_distance"]  # a synth word is one or more tokens


def test_what_a_model_reads_is_told_by_its_tokenizer_json_and_said_by_tokenizer(own, tmp_path):
    # a transformers directory trained on the synthetic language keeps a synth tokenizer.json
    synth_dir = tiny_transformers(tmp_path / "synth", "llama")
    (synth_dir / "tokenizer.json").write_text(json.dumps(Language.default().to_json()))
    common = [
        "--evaluator",
        "stream",
        "--mem",
        "32",
        "--distance",
        "8-20",
        "--out",
        str(tmp_path),
        *FAST,
    ]
    r = invoke(["run", "fact-swap", "--model", str(synth_dir), *common])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (
        run_json(doc)["vocabulary"] == {"reads": "synth"}
        and "unmatched_pairs" not in doc["metrics"]
    )
    # the same ids read directly although the directory holds a tokenizer of its own
    r = invoke(["run", "fact-swap", "--model", str(own), "--tokenizer", "synth", *common])
    assert r.exit_code == 0, r.stderr
    assert run_json(json.loads(r.stdout))["vocabulary"] == {"reads": "synth"}
    # a model directory without a tokenizer, told which one it reads
    bare = tiny_transformers(tmp_path / "bare", "llama", vocab_size=foreign_bpe().get_vocab_size())
    r = invoke(["run", "fact-swap", "--model", str(bare), "--tokenizer", str(own), *common])
    assert r.exit_code == 0, r.stderr
    vocab = run_json(json.loads(r.stdout))["vocabulary"]
    assert vocab["reads"] == "tokenizer" and vocab["origin"] == str(own.resolve())
    # a synth language that is not the probe's is refused, as for a Transformer-XL checkpoint
    from synth.language import LanguageConfig

    other = Language(LanguageConfig(seed=3))
    (synth_dir / "tokenizer.json").write_text(json.dumps(other.to_json()))
    r = CliRunner().invoke(cli, ["run", "fact-swap", "--model", str(synth_dir), *common])
    assert r.exit_code == 2 and "language mismatch" in r.stderr


def test_a_model_stating_no_tokenizer_is_refused_unless_its_vocabulary_is_the_languages(tmp_path):
    """Without tokenizer.json a model would be fed synth ids: refused when its vocabulary is not
    the synth language's (one line, exit 2, nothing written), accepted and said in run.json when
    it is, and accepted when --tokenizer synth says so."""
    common = ["--evaluator", "stream", "--mem", "32", "--distance", "8-20", *FAST]
    foreign = tiny_transformers(tmp_path / "foreign", "llama", vocab_size=400)
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["run", "fact-swap", "--model", str(foreign), "--out", str(out),
                                 *common])  # fmt: skip
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "states no tokenizer" in r.stderr and "400" in r.stderr and not out.exists()
    r = invoke(["run", "fact-swap", "--model", str(foreign), "--tokenizer", "synth",
                "--out", str(out), *common])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    assert run_json(json.loads(r.stdout))["vocabulary"] == {"reads": "synth"}
    synth_sized = tiny_transformers(tmp_path / "synth-sized", "llama")
    r = invoke(["run", "fact-swap", "--model", str(synth_sized), "--out", str(out), *common])
    assert r.exit_code == 0, r.stderr
    vocab = run_json(json.loads(r.stdout))["vocabulary"]
    assert vocab["reads"] == "synth" and "states no tokenizer" in vocab["note"]


def test_the_opening_token_is_recorded_and_overridable(own, tmp_path):
    common = ["--evaluator", "stream", "--mem", "64", "--out", str(tmp_path), *FAST]
    r = invoke(["run", "fact-swap", "--model", str(own), *common])
    assert r.exit_code == 0, r.stderr
    vocab = run_json(json.loads(r.stdout))["vocabulary"]
    assert (vocab["opening_token"], vocab["opening_from"]) == (EOS, "eos")  # it names no bos
    r = CliRunner().invoke(
        cli, ["run", "fact-swap", "--model", str(own), "--opening-token", "<nope>", *common]
    )
    assert r.exit_code == 2 and "--opening-token '<nope>' is not a token" in r.stderr
    r = CliRunner().invoke(
        cli, ["run", "fact-swap", "--opening-token", EOS, "--out", str(tmp_path), *FAST]
    )
    assert r.exit_code == 2 and "reads the synth language" in r.stderr
