"""`probe synth show`: a probe's first scored pair, or an edit's pair, on the terminal, no torch."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import probe_smoke
import pytest
from click.testing import CliRunner

from probes.cli.main import cli
from probes.cli.pair_view import probes_with_pairs
from probes.cli.synth import synth_group as synth
from synth.edits import EDITS

# every library probe whose synth texts are pairs (a probe in the synth smoke mode)
PAIRED = [n for n in probes_with_pairs() if n in probe_smoke.in_mode("synth")]


def test_the_paired_probes_are_found():
    assert "fact-swap" in PAIRED and "long-nll" not in PAIRED


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_show_prints_an_edits_pair(edit):
    r = CliRunner().invoke(synth, ["show", "--edit", edit, "--seed", "3"])
    assert r.exit_code == 0, r.output
    assert "base" in r.output and "variant" in r.output and "edited" in r.output


def test_show_prints_a_probes_pair():
    r = CliRunner().invoke(synth, ["show", "fact-swap", "--seed", "3"])
    assert r.exit_code == 0, r.output
    assert "fact-swap pair 0" in r.output and "targets" in r.output


def test_show_json_is_one_document():
    r = CliRunner().invoke(
        synth, ["show", "--edit", "replace", "--seed", "3", "--json", "--change-length"]
    )
    assert r.exit_code == 0
    doc = json.loads(r.output)
    assert doc["meta"]["edit"] == "replace" and len(doc["alignment"]) == len(
        doc["variant"]["doc_ids"]
    )


def scored_pair(run_dir: Path, k: int) -> dict:
    """Pair k of a run as it was scored: its rows (texts.npz) and scored positions (tokens.npz)."""
    texts, toks = np.load(run_dir / "texts.npz"), np.load(run_dir / "tokens.npz")
    out = {}
    for side in ("base", "variant"):
        a, b = texts[f"{side}_offsets"][k : k + 2]
        out[side] = {
            "tokens": texts[f"{side}_tokens"][a:b].tolist(),
            "doc_ids": texts[f"{side}_doc_ids"][a:b].tolist(),
            "targets": sorted(toks[f"position_{side}"][toks["pair"] == k].tolist()),
        }
    return out


@pytest.mark.parametrize("name", PAIRED)
def test_synth_show_prints_the_first_pair_probe_run_scores(name, tmp_path):
    seed = "5"
    shown = CliRunner().invoke(synth, ["show", name, "--seed", seed, "--quick", "--json"])
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.output)
    r = CliRunner().invoke(cli, ["run", name, "--seed", seed, "--quick", "--out", str(tmp_path),
                                 "--quiet", "--json"], catch_exceptions=False)  # fmt: skip
    assert r.exit_code in (0, 1), r.stderr  # 1: a check of the quick run failed; texts are written
    scored = scored_pair(Path(json.loads(r.stdout)["run_dir"]), 0)
    for side in ("base", "variant"):
        assert doc[side]["tokens"] == scored[side]["tokens"], side
        assert doc[side]["doc_ids"] == scored[side]["doc_ids"], side
        assert sorted(doc[side]["targets"]) == scored[side]["targets"], side


def test_synth_show_plans_for_the_checkpoint_model_names(tmp_path):
    """Another checkpoint's geometry (here mem 16, tgt 16) plans other bins and texts: the pair
    shown with --model is the one `probe run --model` scores."""
    from probes.testing import tiny_checkpoint

    model = str(tiny_checkpoint(tmp_path / "tiny", mem_len=16, tgt_len=16))
    args = ["fact-swap", "--seed", "2", "--quick"]
    shown = CliRunner().invoke(synth, ["show", *args, "--model", model, "--json"])
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.output)
    default = json.loads(CliRunner().invoke(synth, ["show", *args, "--json"]).output)
    assert doc["base"]["tokens"] != default["base"]["tokens"]  # not the default model's plan
    r = CliRunner().invoke(cli, ["run", *args, "--model", model, "--out", str(tmp_path / "o"),
                                 "--quiet", "--json"], catch_exceptions=False)  # fmt: skip
    assert r.exit_code in (0, 1), r.stderr
    scored = scored_pair(Path(json.loads(r.stdout)["run_dir"]), 0)
    for side in ("base", "variant"):
        assert doc[side]["tokens"] == scored[side]["tokens"], side
        assert sorted(doc[side]["targets"]) == scored[side]["targets"], side


def test_synth_show_refuses_a_model_it_cannot_plan_for_in_one_line(tmp_path):
    llama = tmp_path / "llama"  # a transformers directory, as its config.json says (no torch)
    llama.mkdir()
    (llama / "config.json").write_text('{"model_type": "llama"}')
    damaged = tmp_path / "damaged"  # a checkpoint's config without its tokenizer
    damaged.mkdir()
    (damaged / "config.json").write_text(
        (Path(probes_models()) / "default" / "config.json").read_text()
    )
    for args, says in [
        (["fact-swap", "--model", str(llama)], "probe show RUN_DIR --pair 0"),
        (["fact-swap", "--model", f"hf:{llama}"], "probe show RUN_DIR --pair 0"),
        (["fact-swap", "--model", str(damaged)], "tokenizer.json"),
        (["fact-swap", "--model", str(tmp_path / "nowhere")], "does not exist"),
        (["--edit", "replace", "--model", "default"], "--model applies to a PROBE"),
    ]:
        r = CliRunner().invoke(synth, ["show", *args])
        assert r.exit_code == 2 and says in r.output, r.output
        assert r.output.strip().count("\n") == 0


def probes_models() -> str:
    from probes.framework.models import PACKAGE_MODELS

    return str(PACKAGE_MODELS)


@pytest.mark.parametrize("name", [n for n in probe_smoke.names() if n not in probes_with_pairs()])
def test_a_probe_without_pairs_is_a_one_line_usage_error_naming_what_can_be_shown(name):
    r = CliRunner().invoke(synth, ["show", name])
    assert r.exit_code == 2 and r.output.strip().count("\n") == 0
    assert "fact-swap" in r.output and "--edit" in r.output and "replace" in r.output


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["fact-swp"], "did you mean 'fact-swap'"),
        (["--edit", "replce"], "did you mean 'replace'"),
        (["replace"], "give --edit replace"),
        ([], "give a PROBE"),
        (["fact-swap", "--edit", "replace"], "give a PROBE"),
        (["fact-swap", "--distance", "40"], "--distance applies to --edit"),
        (["--edit", "replace", "--quick"], "--quick applies to a PROBE"),
    ],
)
def test_a_bad_show_is_a_one_line_usage_error(args, fragment):
    r = CliRunner().invoke(synth, ["show", *args])
    assert r.exit_code == 2
    assert fragment in r.output and r.output.strip().count("\n") == 0


def test_show_does_not_import_torch():
    code = (
        "import sys; from probes.cli.synth import synth_group as synth; "
        "synth(['show', 'fact-swap', '--seed', '1'], standalone_mode=False); "
        "synth(['show', '--edit', 'replace', '--seed', '1'], standalone_mode=False); "
        "assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=60)
