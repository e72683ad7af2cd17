"""`probe diagnose` with click's CliRunner on tiny untrained models made here: one table (or one
JSON document), one run directory holding every probe's run, RECL only with a model group, exit
codes 1 (a probe's own check failed) and 2 (bad input, nothing written)."""

import json

import pytest
import torch
from click.testing import CliRunner

from probes.cli import cli
from probes.testing import tiny_checkpoint

torch.set_num_threads(1)

EFFECTS = [
    "boundary repair",
    "retrieval within the horizon",
    "retrieval beyond the horizon",
    "topic adaptation",
    "stale state: previous document",
    "stale state: outdated fact",
    "effective context (truncation)",
    "RECL (r = 0.1)",
]
ONLY_FACT_SWAP = [
    "--skip", "boundary", "--skip", "topic-shift", "--skip", "cross-doc",
    "--skip", "fact-update", "--skip", "context-sweep", "--skip", "recl",
]  # fmt: skip


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {
        "m": tiny_checkpoint(root / "m", mem_len=16, tgt_len=16),
        "sibling": tiny_checkpoint(root / "m-mem0", mem_len=0, tgt_len=16, seed=1),
        "alone": tiny_checkpoint(root / "alone", mem_len=0, tgt_len=16, seed=2),
    }


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_json_is_one_document_with_every_row_and_one_run_directory(models, tmp_path):
    r = invoke("diagnose", "--model", models["m"], "--quick", "--out", tmp_path, "--json")
    assert r.exit_code == 0, r.stderr
    assert r.stderr == ""
    doc = json.loads(r.stdout)
    assert [row["effect"] for row in doc["rows"]] == EFFECTS
    for row in doc["rows"]:
        assert {"value", "ci95", "p_value", "significant", "unit", "probe", "metric"} <= set(row)
        assert row["value"] is not None and row["ci95"] is not None
    assert [g["id"] for g in doc["group"]][1].startswith("m-mem0")  # the sibling, for RECL
    run_dir = tmp_path / doc["run_dir"].split(str(tmp_path) + "/")[1]
    assert run_dir.parent.parent.name == "diagnose"
    assert {"run.json", "summary.json", "diagnose.png", "runs"} <= {
        p.name for p in run_dir.iterdir()
    }
    assert set(doc["runs"]) == {r_["probe"] for r_ in doc["rows"]}
    for probe, rel in doc["runs"].items():
        sub = run_dir / rel
        assert (sub / "summary.json").is_file() and sub.parts[-3] == probe
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "complete" and len(run["group"]) == 2
    assert json.loads((run_dir / "summary.json").read_text())["rows"] == doc["rows"]
    assert doc["passed"]
    assert all(c["passed"] for checks in doc["checks"].values() for c in checks.values())


def test_table_on_stdout_and_no_recl_without_a_group(models, tmp_path):
    r = invoke("diagnose", "--model", models["alone"], "--quick", "--out", tmp_path)
    assert r.exit_code == 0, r.stderr
    assert "probe diagnose" in r.stdout and "boundary repair" in r.stdout
    assert "RECL" not in r.stdout and "recl (no model group)" in r.stdout
    (run_dir,) = tmp_path.glob("diagnose/*/*")
    again = invoke("report", run_dir)  # `probe report` shows a diagnose run's table
    assert again.exit_code == 0 and "boundary repair" in again.stdout


def test_memory_less_model_shows_no_retrieval_beyond_its_segment(models, tmp_path):
    r = invoke(
        "diagnose", "--model", models["alone"], "--quick", "--out", tmp_path, "--json",
        *ONLY_FACT_SWAP,
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    rows = {row["effect"]: row for row in json.loads(r.stdout)["rows"]}
    beyond = rows["retrieval beyond the horizon"]
    assert beyond["value"] == 0.0 and beyond["ci95"] == [0.0, 0.0] and not beyond["significant"]


def test_a_failed_own_check_exits_1(models, tmp_path, monkeypatch):
    from probes.fact_swap import FactSwap

    def broken(self, ctx, records):
        return {"broken": {"passed": False, "doc": "planted failure"}}

    monkeypatch.setattr(FactSwap, "_checks", broken)
    r = invoke("diagnose", "--model", models["m"], "--quick", "--out", tmp_path, *ONLY_FACT_SWAP)
    assert r.exit_code == 1
    assert "checks FAILED: fact-swap" in r.stdout
    (run,) = tmp_path.glob("diagnose/*/*/run.json")
    assert json.loads(run.read_text())["status"] == "failed-check"


@pytest.mark.parametrize(
    "args",
    [
        ["--model", "/nonexistent/model"],
        ["--mem", "-1"],
        ["--skip", "speed"],
        ["--mem", "abc"],
    ],
)
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(models, tmp_path, args):
    out = tmp_path / "out"
    r = invoke(
        "diagnose",
        "--out",
        out,
        *(["--model", models["m"]] if "--model" not in args else []),
        *args,
    )
    assert r.exit_code == 2
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("error:")
    assert not out.exists()
