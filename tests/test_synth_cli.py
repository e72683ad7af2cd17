"""`probe synth show`: a pair on the terminal, no torch."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from probes.cli.synth import synth_group as synth


@pytest.mark.parametrize(
    "edit",
    ["fact-swap", "insert", "delete", "distract", "update", "topic-shift", "prior-doc-conflict"],
)
def test_show_prints_a_pair(edit):
    r = CliRunner().invoke(synth, ["show", edit, "--seed", "3"])
    assert r.exit_code == 0, r.output
    assert "base" in r.output and "variant" in r.output and "edited" in r.output


def test_show_json_is_one_document():
    r = CliRunner().invoke(synth, ["show", "replace", "--seed", "3", "--json", "--change-length"])
    assert r.exit_code == 0
    doc = json.loads(r.output)
    assert doc["meta"]["edit"] == "replace" and len(doc["alignment"]) == len(
        doc["variant"]["doc_ids"]
    )


def test_unknown_edit_is_a_one_line_usage_error():
    r = CliRunner().invoke(synth, ["show", "fact-swp"])
    assert r.exit_code == 2
    assert "did you mean 'fact-swap'" in r.output and r.output.strip().count("\n") == 0


def test_show_does_not_import_torch():
    code = (
        "import sys; from probes.cli.synth import synth_group as synth; "
        "synth(['show', 'fact-swap', '--seed', '1'], standalone_mode=False); "
        "assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=60)
