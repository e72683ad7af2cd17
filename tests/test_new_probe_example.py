"""A probe for a new edit, on synth and on real text, is one probe file plus one edit
registration: both written here to a temporary directory (nothing shipped, no list edited), the
edit registered once with its synth function and its real-text realisation
(`synth.edits.register(..., real="module:function")`), and the probe run from its file in both
modes. The edit restates the fact as it was, so every pair's delta is exactly 0 whatever the
model; each realisation notes its calls, so the test sees that each mode went through its own."""

import json
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from text_helpers import require_tokenizers, text_checkpoint

from probes.cli.main import cli
from probes.testing import tiny_checkpoint

EDIT = '''
import numpy as np

from synth.edits import register
from synth.example import Pair

CALLS = []  # which realisation made each pair


def same(base):
    return Pair(base, base, np.arange(len(base), dtype=np.int64), {"edit": "restate"})


@register("restate", real="restate_edit:restate_text")
def restate(base, rng, lang, *, query=0):
    """The fact stated as it was: the variant is the base."""
    CALLS.append("synth")
    return same(base)


def restate_text(world, rng, base, *, query=0):
    CALLS.append("real text")
    return same(base)
'''

PROBE = '''
from typing import ClassVar

import restate_edit  # noqa: F401  (registers the edit)

from probes.api import PAIRED, FactParams, PairedProbe, plan_by_distance, probe


@probe("restate", version=1)
class Restate(PairedProbe):
    """The fact restated as it was: every delta exactly 0, on any text."""

    Params = FactParams
    smoke: ClassVar[dict] = {"synth": {}, "haystack": {"distance": "40-60"}}
    columns = PAIRED

    def plan(self, ctx):
        plan_by_distance(self, ctx, "restate", query=0)
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    from synth.edits import EDITS

    (tmp_path / "restate_edit.py").write_text(textwrap.dedent(EDIT))
    (tmp_path / "restate_probe.py").write_text(textwrap.dedent(PROBE))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield f"{tmp_path / 'restate_probe.py'}:Restate"
    EDITS.pop("restate", None)
    sys.modules.pop("restate_edit", None)


def run(spec, model, out, *extra):
    r = CliRunner().invoke(cli, ["run", spec, "--model", str(model), *extra, "--quick",
                                 "--out", str(out), "--quiet", "--json"], catch_exceptions=False)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    samples = [
        json.loads(x) for x in (Path(doc["run_dir"]) / "samples.jsonl").read_text().splitlines()
    ]
    return doc, samples


def exact_zero(doc, samples):
    assert doc["n_pairs"] == len(samples) > 0
    assert all(s["delta"] == 0.0 for s in samples)  # bit for bit: the texts are the same
    assert doc["checks"]["identical_prefix"]["status"] == "passed"
    assert all(c["status"] != "failed" for c in doc["checks"].values())


def test_a_new_edit_and_its_probe_run_on_synth_and_on_real_text(plugin, tmp_path):
    synth_model = tiny_checkpoint(tmp_path / "synth", mem_len=8, tgt_len=8)
    exact_zero(*run(plugin, synth_model, tmp_path / "out"))
    calls = sys.modules["restate_edit"].CALLS
    assert set(calls) == {"synth"}
    calls.clear()
    require_tokenizers()
    text_model = text_checkpoint(tmp_path / "text")
    doc, samples = run(plugin, text_model, tmp_path / "out-text", "--haystack", "default",
                       "--distance", "40-60")  # fmt: skip
    exact_zero(doc, samples)
    assert set(calls) == {"real text"} and len(calls) >= len(samples)
    assert doc["metrics"]["unmatched_pairs"] == 0
    run_json = json.loads((Path(doc["run_dir"]) / "run.json").read_text())
    assert run_json["text"]["haystack"] == "default"
