"""`probe diagnose --models A,B,…` on planted models (no torch, seconds): each model's column is
the row a single-model diagnose of it gives, RECL runs once over the models as its group, one run
directory with one table, one JSON document and one plot; bad input is one line, exit 2 and no
directory."""

import io
import json
import shutil
from pathlib import Path

import probe_smoke
import pytest
from click.testing import CliRunner

from probes.cli.main import cli
from probes.framework.models import PACKAGE_MODELS

# distinct seeds: a planted model's id is `planted-<seed>`
A = "planted:seed=1,copy=2,boundary_nats=1"
B = "planted:seed=2"
QUICK = ["--quick", "--n", "4", "--threads", "1"]
# every probe left out but fact-swap and recl (the group probe)
FACT_SWAP_AND_RECL = probe_smoke.skip_all_but("fact-swap", "recl")
CELL = ("metric", "value", "ci95", "p_value", "verdict", "significant", "margin", "n", "detail")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def diagnose_json(out, *args):
    r = invoke("diagnose", "--out", out, "--json", *QUICK, *args)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """One `--models A,B` run, and the single-model runs each column must equal."""
    out = tmp_path_factory.mktemp("out")
    return {
        "models": diagnose_json(out, "--models", f"{A},{B}"),
        "A in group A,B": diagnose_json(out, "--model", A, "--model", B),
        "B": diagnose_json(out, "--model", B),
        "out": out,
    }


def column(doc, model_id):
    return {e["effect"]: e["values"][model_id] for e in doc["effects"] if model_id in e["values"]}


def test_each_models_column_equals_its_single_model_diagnose(both):
    doc = both["models"]
    # A first, with B as RECL's group: the single run with --model A --model B, RECL included
    single_a = both["A in group A,B"]["rows"]
    assert list(column(doc, "planted-1")) == [r["effect"] for r in single_a]
    for row in single_a:
        assert column(doc, "planted-1")[row["effect"]] == {k: row[k] for k in (*CELL, "censored")}
    # B alone has no group (no RECL); every other row is bitwise the same
    single_b = both["B"]["rows"]
    cells_b = column(doc, "planted-2")
    assert list(cells_b)[:-1] == [r["effect"] for r in single_b]
    for row in single_b:
        assert cells_b[row["effect"]] == {k: row[k] for k in (*CELL, "censored")}
    units = {e["effect"]: (e["unit"], e["measure"]) for e in doc["effects"]}
    assert all(units[r["effect"]] == (r["unit"], r["measure"]) for r in single_a)


def test_recl_runs_once_and_each_members_row_is_the_group_runs(both):
    doc = both["models"]
    run_dir = Path(doc["run_dir"])
    (recl_dir,) = run_dir.glob("runs/recl/*/*")  # one run, under the first model
    assert {doc["runs"][m]["recl"] for m in ("planted-1", "planted-2")} == {
        str(recl_dir.relative_to(run_dir))
    }
    group_run = json.loads((recl_dir / "summary.json").read_text())
    assert [m["id"] for m in group_run["metrics"]["models"]] == ["planted-1", "planted-2"]
    (effect,) = [e for e in doc["effects"] if e["probe"] == "recl"]
    r0 = f"{min(group_run['metrics']['rs']):g}"
    for mid, cell in effect["values"].items():
        own = group_run["metrics"]["recl"][mid][r0]
        assert (cell["value"], cell["ci95"], cell["censored"]) == (
            own["recl"],
            own["ci95"],
            own["censored"],
        )
    # every other probe ran once per model
    assert len(list(run_dir.glob("runs/fact-swap/*/*"))) == 2


def test_json_contract_and_one_run_directory_with_the_plot(both):
    doc = both["models"]
    assert {
        "models", "effects", "runs", "verdicts", "checks", "passed", "skipped", "elapsed_s",
        "row_docs", "geometry", "run_dir", "plots",
    } <= set(doc)  # fmt: skip
    assert [m["id"] for m in doc["models"]] == ["planted-1", "planted-2"]
    assert all(set(m) == {"id", "path", "sha256"} for m in doc["models"])
    assert [m["path"] for m in doc["models"]] == [A, B]
    for e in doc["effects"]:
        assert {"effect", "probe", "unit", "measure", "values"} <= set(e)
        for cell in e["values"].values():
            assert set(CELL) | {"censored"} <= set(cell)
    for key in ("runs", "verdicts", "checks", "geometry"):
        assert list(doc[key]) == ["planted-1", "planted-2"]
    run_dir = Path(doc["run_dir"])
    assert run_dir.parent.name == "planted-1+planted-2" and run_dir.parent.parent.name == "diagnose"
    for by_probe in doc["runs"].values():
        assert all((run_dir / rel / "summary.json").is_file() for rel in by_probe.values())
    assert doc["plots"] == ["diagnose_models.png"]
    assert (run_dir / "diagnose_models.png").stat().st_size > 0
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "complete" and run["options"]["models"] == [A, B]
    assert [m["id"] for m in run["models"]] == ["planted-1", "planted-2"]
    assert json.loads((run_dir / "summary.json").read_text()) == doc
    assert doc["passed"]


def test_table_has_a_column_per_model_in_the_single_model_formats(both):
    from probes.report.suite_table import print_table

    buf = io.StringIO()
    print_table(both["models"], out=buf)
    text = buf.getvalue()
    header = next(line for line in text.splitlines() if "effect" in line)
    assert header.index("planted-1") < header.index("planted-2")
    cells = column(both["models"], "planted-1")
    v = cells["retrieval within the horizon"]
    assert f"{v['value']:+.3f} [{v['ci95'][0]:+.3f}, {v['ci95'][1]:+.3f}]" in text
    (recl,) = [k for k in cells if k.startswith("RECL")]
    r = cells[recl]
    assert f"{'≥' if r['censored'] else ''}{r['value']} [{r['ci95'][0]}, {r['ci95'][1]}]" in text
    again = invoke("report", both["models"]["run_dir"])  # `probe report` shows the same table
    assert again.exit_code == 0 and "planted-2" in again.stdout and recl in again.stdout


def test_rerun_of_a_models_directory_reproduces_it_with_or_without_its_probe_runs(tmp_path):
    doc = diagnose_json(tmp_path, "--models", f"{A},{B}", *FACT_SWAP_AND_RECL)
    run_dir = Path(doc["run_dir"])
    kept = json.loads((run_dir / "run.json").read_text())["auto"]
    assert list(kept) == [m["id"] for m in doc["models"]]
    for mid, runs in doc["runs"].items():  # each column: its probe runs' own `auto`
        assert kept[mid] == {
            probe: json.loads((run_dir / rel / "run.json").read_text())["auto"]
            for probe, rel in runs.items()
        }
    copy = tmp_path / "copy"  # as a curated diagnose is kept
    copy.mkdir()
    for name in ("run.json", "summary.json"):
        shutil.copyfile(run_dir / name, copy / name)
    for where in (run_dir, copy):
        r = invoke("rerun", where, "--json", "--out", str(tmp_path / "again"))
        assert r.exit_code == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["match"] == "exact" and res["differences"] == [] and res["notes"] == []


def test_a_failed_own_check_exits_1_and_names_the_model(tmp_path, monkeypatch):
    from probes.engine import aggregate

    monkeypatch.setattr(  # fact-swap is the one paired probe these runs hold
        aggregate, "paired_checks", lambda records, tol: {"broken": {"passed": False, "doc": "x"}}
    )
    r = invoke("diagnose", "--out", tmp_path, *QUICK, "--models", f"{A},{B}", *FACT_SWAP_AND_RECL)
    assert r.exit_code == 1
    assert "checks FAILED: fact-swap (planted-1), fact-swap (planted-2)" in r.stdout
    (run,) = tmp_path.glob("diagnose/*/*/run.json")
    assert json.loads(run.read_text())["status"] == "failed-check"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--models", A], "at least two"),
        (["--models", f"{A},{A}"], "twice"),
        (["--models", f"default,{PACKAGE_MODELS / 'default'}"], "twice"),  # one, two names
        (["--models", f"{A},{B}", "--model", A], "--models and --model"),
        (["--models", f"{A},/nonexistent/model"], "--models '/nonexistent/model' does not exist"),
        (["--models", f"{A},,{B}"], "empty model name"),
        (["--models", f"{A},planted:seed=1"], "the id 'planted-1'"),  # two models, one id
        (["--models", f"{A},planted:nope=1"], "unknown field"),
        (["--models", f"{A},{B}", "--skip", "speed"], "--skip"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(tmp_path, args, needle):
    out = tmp_path / "out"
    r = invoke("diagnose", "--out", out, "--quick", *args)
    assert r.exit_code == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("error:")
    assert needle in r.stderr
    assert not out.exists()


def test_split_models_keeps_a_planted_specs_fields():
    from probes.framework.models import split_models

    assert split_models(f"default,{A},{B},./x") == ["default", A, B, "./x"]
    assert split_models("a, b") == ["a", "b"]


def test_each_checkpoint_is_loaded_once(tmp_path, monkeypatch):
    import torch

    from probes.adapters import txl as adapters
    from probes.testing import tiny_checkpoint

    torch.set_num_threads(1)
    m = tiny_checkpoint(tmp_path / "m", mem_len=16, tgt_len=16)
    n = tiny_checkpoint(tmp_path / "n", mem_len=0, tgt_len=16, seed=1)
    loads = []
    real_load = adapters.load
    monkeypatch.setattr(adapters, "load", lambda p, **kw: loads.append(p) or real_load(p, **kw))
    doc = diagnose_json(tmp_path / "out", "--models", f"{m},{n}", *FACT_SWAP_AND_RECL)
    assert sorted(map(str, loads)) == sorted([str(m), str(n)])
    assert [e["probe"] for e in doc["effects"]] == ["fact-swap", "fact-swap", "recl"]
    assert all(len(e["values"]) == 2 for e in doc["effects"])
