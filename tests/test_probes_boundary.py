"""boundary: on a synthetic LossModel with a planted boundary effect (probes.adapters.planted: extra loss
when fewer than 4 tokens are visible, noise keyed to the target only) the gain is exactly the
planted ramp in the first positions of a segment and exactly 0 elsewhere; on tiny untrained
models made here: no memory at eval means no gain at all, and the CLI writes its curve."""

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import probes
from probes.adapters.planted import PlantedModel
from probes.api import params as pm
from probes.api.model import horizon
from probes.api.probe_base import RunContext
from probes.cli.main import cli
from probes.library.boundary import Boundary
from probes.testing import tiny_checkpoint
from probes.texts.synth_ids import SynthTexts
from synth.language import Language

torch.set_num_threads(1)


def run_planted(model, n=6, **params):
    g = model.default_geometry()
    ctx = RunContext(model, g, horizon(model, g), SynthTexts(Language.default()), n=n, seed=0)
    p = Boundary(pm.build(Boundary.Params, params))
    p.plan(ctx)
    return p.execute(ctx)


def test_gain_is_confined_to_the_first_positions_of_a_segment_on_a_planted_model():
    # planted: +2 nats at 1 visible token, falling by 0.5 per token, 0 from 5 visible tokens on
    m = PlantedModel(tgt_len=16, mem_len=16, noise="token", boundary_nats=2.0, boundary_len=4)
    out = run_planted(m, n=8, first=4)  # n = 8: exact Wilcoxon p 1/128, Holm over 3
    gain = [row["nomem_mem"]["mean"] for row in out.metrics["by_position"]]
    np.testing.assert_allclose(gain[:4], [2.0, 1.5, 1.0, 0.5], atol=1e-12)
    assert all(x == 0.0 for x in gain[4:])  # exactly: the rest of the segment gains nothing
    bins = {(b["kind"], b["region"]): b for b in out.bins}
    assert bins["nomem-mem", "first"]["significant"]
    assert bins["nomem-mem", "first_minus_rest"]["significant"]
    assert bins["nomem-mem", "rest"]["delta_mean"] == 0.0
    assert not bins["nomem-mem", "rest"]["significant"]
    assert out.metrics["delta_mean"] == pytest.approx(1.25)
    # a document boundary right before the segment (reset) costs exactly what no memory costs
    doc = [row["doc_mem"]["mean"] for row in out.metrics["by_position"]]
    np.testing.assert_allclose(doc, gain, atol=1e-12)
    assert "repairs segment starts" in out.verdict
    assert out.checks["first_segment_equal"]["passed"]


def test_without_a_planted_effect_there_is_no_boundary_repair():
    m = PlantedModel(tgt_len=16, mem_len=16, noise="token", boundary_nats=0.0)
    out = run_planted(m)
    assert all(row["nomem_mem"]["mean"] == 0.0 for row in out.metrics["by_position"])
    assert not any(b["significant"] for b in out.bins)
    assert "boundary repair is negligible" in out.verdict  # exact zeros: within any margin


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_checkpoint(tmp_path_factory.mktemp("m") / "tiny", mem_len=16, tgt_len=16)


def test_memory_less_evaluation_gains_exactly_nothing(model, tmp_path):
    s = probes.run("boundary", model=model, mem=0, n=3, out=tmp_path, progress=False)
    assert all(row["nomem_mem"]["mean"] == 0.0 for row in s.metrics["by_position"])
    assert s.metrics["gain"]["first"]["mean"] == 0.0 and s.passed


def test_cli_json_documents_its_metrics_and_writes_the_curve(model, tmp_path):
    r = CliRunner().invoke(
        cli,
        ["run", "boundary", "--model", str(model), "--out", str(tmp_path), "--quick", "--json"],
        catch_exceptions=False,
    )
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    for name in doc["metrics"]:
        assert name in doc["metric_docs"], name
    assert len(doc["metrics"]["by_position"]) == 16
    assert {(b["kind"], b["region"]) for b in doc["bins"]} == {
        (k, x) for k in ("nomem-mem", "doc-mem") for x in ("first", "rest", "first_minus_rest")
    }
    assert "boundary_gain.png" in doc["plots"]
    assert (tmp_path.glob("boundary/*/*/boundary_gain.png")).__next__().stat().st_size > 0
