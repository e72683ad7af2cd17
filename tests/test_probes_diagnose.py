"""`probe diagnose` with click's CliRunner on tiny untrained models made here: one table (or one
JSON document), one run directory holding every probe's run, RECL only with a model group, exit
codes 1 (a probe's own check failed) and 2 (bad input, nothing written)."""

import json
import shutil
from pathlib import Path

import probe_smoke
import pytest
import torch
from click.testing import CliRunner

import probes.api.fact_pairs as fact_pairs
from probes.api import registry
from probes.api.distance_bins import auto_bins
from probes.cli.main import cli
from probes.testing import tiny_checkpoint

torch.set_num_threads(1)

# fact-swap alone: the fast diagnose (its two rows), every other probe of it skipped
FACT_SWAP_ROWS = ["retrieval within the horizon", "retrieval beyond the horizon"]
ONLY_FACT_SWAP = probe_smoke.skip_all_but("fact-swap")


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


def test_json_is_one_document_with_every_row_and_one_run_directory(models, tmp_path, monkeypatch):
    from probes.adapters import txl as adapters

    loads = []
    real_load = adapters.load
    monkeypatch.setattr(adapters, "load", lambda p, **kw: loads.append(p) or real_load(p, **kw))
    r = invoke("diagnose", "--model", models["m"], "--quick", "--out", tmp_path, "--json")
    assert r.exit_code == 0, r.stderr
    assert r.stderr == ""
    doc = json.loads(r.stdout)
    # every probe of diagnose gives its rows, in its place, each effect once
    assert list(dict.fromkeys(row["probe"] for row in doc["rows"])) == probe_smoke.diagnosed()
    effects = [row["effect"] for row in doc["rows"]]
    assert len(set(effects)) == len(effects)
    assert [row["effect"] for row in doc["rows"] if row["probe"] == "fact-swap"] == FACT_SWAP_ROWS
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
        # each run records its own rows (a group run's by member), and the table is theirs
        recorded = json.loads((sub / "summary.json").read_text())["diagnose_rows"]
        if isinstance(recorded, dict):
            recorded = recorded[doc["model"]["id"]]
        assert recorded == [row for row in doc["rows"] if row["probe"] == probe]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "complete" and len(run["group"]) == 2
    assert json.loads((run_dir / "summary.json").read_text())["rows"] == doc["rows"]
    assert doc["passed"]
    assert all(c["passed"] for checks in doc["checks"].values() for c in checks.values())
    assert sorted(map(str, loads)) == sorted(
        [str(models["m"]), str(models["sibling"])]
    )  # once each


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
    from probes.engine import aggregate

    def broken(records, tol):
        return {"broken": {"passed": False, "doc": "planted failure"}}

    monkeypatch.setattr(aggregate, "paired_checks", broken)
    r = invoke("diagnose", "--model", models["m"], "--quick", "--out", tmp_path, *ONLY_FACT_SWAP)
    assert r.exit_code == 1
    assert "checks FAILED: fact-swap" in r.stdout
    (run,) = tmp_path.glob("diagnose/*/*/run.json")
    assert json.loads(run.read_text())["status"] == "failed-check"


@pytest.fixture(scope="module")
def foreign_group(tmp_path_factory):
    """A model whose -mem0 sibling speaks another language: only recl (the last probe, the one
    that takes the group) can find out."""
    from synth.language import Language, LanguageConfig

    root = tmp_path_factory.mktemp("foreign")
    lang = Language(LanguageConfig(n_entities=40, seed=3))
    tiny_checkpoint(root / "f-mem0", mem_len=0, tgt_len=16, language=lang)
    return tiny_checkpoint(root / "f", mem_len=16, tgt_len=16)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--model", "/nonexistent/model"], "does not exist"),
        (["--mem", "-1"], "--mem"),
        (["--skip", "speed"], "--skip"),
        (["--mem", "abc"], "--mem"),
        (["--tgt-len", "4", "--quick"], "--first 4"),  # boundary: first positions < segment
        (["--model", "FOREIGN_GROUP", "--quick"], "language mismatch"),  # found by recl, last
    ],
)
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(
    models, foreign_group, tmp_path, args, needle
):
    out = tmp_path / "out"
    args = [str(foreign_group) if a == "FOREIGN_GROUP" else a for a in args]
    r = invoke(
        "diagnose",
        "--out",
        out,
        *(["--model", models["m"]] if "--model" not in args else []),
        *args,
    )
    assert r.exit_code == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("error:")
    assert needle in r.stderr
    assert not out.exists()


def test_mem_0_leaves_recl_out_with_the_reason_and_runs_the_rest(models, tmp_path):
    """At --mem 0 the attention holds one context (mem + tgt = tgt): RECL cannot compare two.
    A natural diagnose run, so the RECL row is skipped with the reason, not refused."""
    only = probe_smoke.skip_all_but("fact-swap", "recl")
    r = invoke("diagnose", "--model", models["m"], "--mem", "0", "--quick", "--out", tmp_path,
               "--json", *only)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [row["effect"] for row in doc["rows"]] == FACT_SWAP_ROWS
    (note,) = [s for s in doc["skipped"] if s.startswith("recl")]
    assert "two contexts" in note and "mem_len 0" in note
    assert doc["geometry"]["mem_len"] == 0 and "recl" not in doc["runs"]
    table = invoke("report", doc["run_dir"])
    assert table.exit_code == 0 and "skipped:" in table.stdout and "two contexts" in table.stdout


def test_rerun_of_a_diagnose_directory_reproduces_its_table(models, tmp_path):
    r = invoke("diagnose", "--model", models["m"], "--quick", "--out", tmp_path, "--json",
               *ONLY_FACT_SWAP)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    run_dir = json.loads(r.stdout)["run_dir"]
    again = invoke("rerun", run_dir, "--json", "--out", str(tmp_path / "again"))
    assert again.exit_code == 0, again.stderr
    res = json.loads(again.stdout)
    assert res["match"] == "exact" and res["differences"] == [] and res["passed"]
    assert res["rerun"] != run_dir


@pytest.mark.parametrize("copy", [False, True], ids=["whole", "without-probe-runs"])
def test_rerun_of_a_diagnose_repeats_what_auto_stood_for_in_each_of_its_probe_runs(
    models, tmp_path, monkeypatch, copy
):
    """Each probe run's run.json `auto` is what its rerun repeats; the diagnose's run.json keeps
    them all (probe → parameter → text), so a copy of it with its run.json, summary.json and
    figure only, as a curated diagnose is kept, reruns them as they ran too."""
    monkeypatch.setattr(fact_pairs, "auto_bins", lambda h: auto_bins(h)[:2])  # an older auto
    r = invoke("diagnose", "--model", models["m"], "--quick", "--out", tmp_path, "--json",
               *ONLY_FACT_SWAP)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    monkeypatch.undo()
    doc = json.loads(r.stdout)
    run_dir = Path(doc["run_dir"])
    recorded = json.loads((run_dir / doc["runs"]["fact-swap"] / "run.json").read_text())["auto"]
    assert recorded["distance"].count(",") == 1  # two bins
    assert json.loads((run_dir / "run.json").read_text())["auto"] == {"fact-swap": recorded}
    if copy:
        (tmp_path / "copy").mkdir()
        for name in ("run.json", "summary.json"):
            shutil.copyfile(run_dir / name, tmp_path / "copy" / name)
        run_dir = tmp_path / "copy"
    again = invoke("rerun", run_dir, "--json", "--out", str(tmp_path / "again"))
    assert again.exit_code == 0, again.stderr
    res = json.loads(again.stdout)
    assert res["match"] == "exact" and res["passed"]
    (note,) = [n for n in res["notes"] if "auto" in n]
    assert note.startswith(
        f"fact-swap: --distance auto: repeated the recorded {recorded['distance']!r}"
    )


def test_rerun_of_a_directory_that_names_no_run_is_one_line_exit_2(tmp_path):
    from probes.framework.results import SCHEMA_VERSION, write_json

    d = tmp_path / "odd"
    d.mkdir()
    write_json(d / "run.json", {"schema_version": SCHEMA_VERSION, "status": "complete"})
    write_json(d / "summary.json", {"rows": []})
    r = invoke("rerun", d)
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "neither a probe nor" in r.stderr


def test_distance_goes_to_every_probe_with_distance_bins_and_is_recorded(models, tmp_path):
    skip = probe_smoke.skip_all_but("fact-swap", "fact-update")  # two with distance bins
    r = invoke("diagnose", "--model", models["m"], "--quick", "--distance", "30-40,60-90", *skip,
               "--out", tmp_path, "--json")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    run = json.loads((Path(doc["run_dir"]) / "run.json").read_text())
    assert run["options"]["distance"] == "30-40,60-90"
    for name in ("fact-swap", "fact-update"):
        (sub,) = (Path(doc["run_dir"]) / "runs" / name).glob("*/*/run.json")
        assert json.loads(sub.read_text())["params"]["distance"] == "30-40,60-90"
    bad = invoke("diagnose", "--model", models["m"], "--quick", "--distance", "1-4",
                 "--out", tmp_path / "bad")  # fmt: skip
    assert bad.exit_code == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "bad").exists()


def test_a_resumed_diagnose_keeps_the_probe_runs_it_finished_and_ends_as_a_whole_one(
    models, tmp_path, monkeypatch
):
    """Interrupted at its third probe, then resumed: the first two runs are read back (not run
    again), the rest run at the thread count the first ones recorded (another is refused), and
    the table equals an uninterrupted diagnose's number for number."""
    from probes.framework import runner

    whole = json.loads(invoke("diagnose", "--model", models["m"], "--quick", "--out",
                              tmp_path / "whole", "--json").stdout)  # fmt: skip
    executed = []
    real = runner.execute

    def stops_at_the_third(plan, **kw):
        executed.append(plan.cls.name)
        if len(executed) == 3:
            raise KeyboardInterrupt
        return real(plan, **kw)

    monkeypatch.setattr(runner, "execute", stops_at_the_third)
    r = CliRunner().invoke(cli, ["diagnose", "--model", str(models["m"]), "--quick", "--out",
                                 str(tmp_path / "cut")])  # fmt: skip
    assert r.exit_code == 130
    (tmp_path / "cut").rename(tmp_path / "moved")  # a run directory may move before it resumes
    (run_dir,) = (tmp_path / "moved" / "diagnose").glob("*/*")
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    first_two = executed[:2]

    record = json.loads((run_dir / "run.json").read_text())
    recorded = record["options"]["threads"]
    other = invoke("diagnose", "--resume", run_dir, "--threads", recorded + 1)
    assert other.exit_code == 2 and "drop --threads" in other.stderr  # one count per run
    assert len(other.stderr.strip().splitlines()) == 1
    record["options"]["threads"] = None  # as recorded before options held the count: the
    (run_dir / "run.json").write_text(json.dumps(record))  # finished probe runs' count holds
    other = invoke("diagnose", "--resume", run_dir, "--threads", recorded + 1)
    assert other.exit_code == 2 and "drop --threads" in other.stderr

    executed.clear()
    monkeypatch.setattr(runner, "execute", lambda plan, **kw: executed.append(plan.cls.name)
                        or real(plan, **kw))  # fmt: skip
    r = invoke("diagnose", "--resume", run_dir, "--threads", recorded, "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert not set(first_two) & set(executed) and len(executed) == len(whole["runs"]) - 2
    assert [(x["effect"], x["value"], x["ci95"]) for x in doc["rows"]] == [
        (x["effect"], x["value"], x["ci95"]) for x in whole["rows"]
    ]
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "complete" and len(record["resumed_utc"]) == 1
    assert all((run_dir / rel).is_dir() for rel in doc["runs"].values())


def test_resume_refuses_what_it_cannot_finish_in_one_line(models, tmp_path):
    r = invoke("diagnose", "--model", models["m"], "--quick", *ONLY_FACT_SWAP, "--out", tmp_path)
    assert r.exit_code == 0, r.stderr
    (done,) = (tmp_path / "diagnose").glob("*/*")
    runs = next((done / "runs" / "fact-swap").glob("*/*"))
    for args, says in [
        ((done,), "nothing to resume"),
        ((runs,), "not a diagnose run directory"),
        ((tmp_path / "nowhere",), "--resume"),
        ((done, "--mem", "8"), "drop --mem"),
    ]:
        r = CliRunner().invoke(cli, ["diagnose", "--resume", *map(str, args)])
        assert r.exit_code == 2 and says in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1


def test_a_probe_run_times_its_own_execution_not_the_probes_before_it(
    models, tmp_path, monkeypatch
):
    """A diagnose prepares every probe before it runs the first; a clock that jumps a day after
    each probe run shows whether a run's elapsed_s counted the runs before it (a quick probe
    run takes seconds, far from a day)."""
    import time

    from probes.framework import runner

    DAY = 86_400.0
    real_clock, real_execute = time.perf_counter, runner.execute
    jumped = [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: real_clock() + jumped[0])

    def then_jump(plan, **kw):
        summary = real_execute(plan, **kw)
        jumped[0] += DAY
        return summary

    monkeypatch.setattr(runner, "execute", then_jump)
    r = invoke("diagnose", "--model", models["m"], "--quick", "--out", tmp_path, "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    (run_dir,) = (tmp_path / "diagnose").glob("*/*")
    elapsed = [json.loads((run_dir / rel / "summary.json").read_text())["elapsed_s"]
               for rel in doc["runs"].values()]  # fmt: skip
    assert len(elapsed) > 2 and max(elapsed) < DAY, elapsed
    assert doc["elapsed_s"] >= DAY * (len(elapsed) - 1)


def test_a_resumed_diagnose_records_the_time_and_memory_of_all_its_sittings(
    models, tmp_path, monkeypatch
):
    """A clock that jumps a day in the first sitting (interrupted inside its probe) and two days
    in the second: run.json lists both sittings, its elapsed_s and summary.json's are their sum
    (not the last sitting's), and the peak an earlier sitting recorded stays when larger."""
    import time

    from probes.framework import runner

    DAY = 86_400.0
    real_clock, real_execute = time.perf_counter, runner.execute
    jumped = [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: real_clock() + jumped[0])

    def interrupted(plan, **kw):
        jumped[0] += DAY
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "execute", interrupted)
    r = CliRunner().invoke(cli, ["diagnose", "--model", str(models["m"]), "--quick",
                                 *ONLY_FACT_SWAP, "--out", str(tmp_path)])  # fmt: skip
    assert r.exit_code == 130
    (run_dir,) = (tmp_path / "diagnose").glob("*/*")
    first = json.loads((run_dir / "run.json").read_text())
    assert first["status"] == "interrupted" and DAY <= first["elapsed_s"] < DAY + 600
    first["peak_rss_mb"] = 1 << 30  # as if the first sitting had held more than this one will
    (run_dir / "run.json").write_text(json.dumps(first))

    def after_two_days(plan, **kw):
        jumped[0] += 2 * DAY
        return real_execute(plan, **kw)

    monkeypatch.setattr(runner, "execute", after_two_days)
    r = invoke("diagnose", "--resume", run_dir, "--json")
    assert r.exit_code == 0, r.stderr
    record = json.loads((run_dir / "run.json").read_text())
    one, two = record["sittings_s"]
    assert one == first["elapsed_s"] and 2 * DAY <= two < 2 * DAY + 600
    assert record["elapsed_s"] == json.loads(r.stdout)["elapsed_s"] == round(one + two, 3)
    assert record["peak_rss_mb"] == 1 << 30


@pytest.mark.parametrize(
    "before, sittings",
    [
        ({"status": "interrupted", "elapsed_s": 5.0}, [5.0]),  # its one sitting
        ({"status": "running"}, [None]),  # killed outright: its end never recorded
        ({"resumed_utc": ["a", "b"]}, [None, None, None]),  # recorded before sittings counted
        ({"resumed_utc": ["a", "b"], "sittings_s": [1.0, 2.0]}, [1.0, 2.0, None]),  # 3rd killed
        ({"resumed_utc": ["a"], "sittings_s": [True, -1.0, 3.0]}, [None, None]),  # malformed
    ],
)
def test_a_resume_knows_each_earlier_sitting_or_says_it_does_not(before, sittings):
    from probes.suite.store import earlier_sittings

    assert earlier_sittings(before) == sittings


ONLY_CONTEXT_SWEEP = probe_smoke.skip_all_but("context-sweep")


def progress_steps(monkeypatch) -> list[tuple[int, bool]]:
    """(k, kept) of each progress step from now on: what the time left is paced by."""
    from probes.framework.progress import Progress

    steps: list[tuple[int, bool]] = []
    real_advance = Progress.advance

    def noted(self, k=1, kept=False):
        steps.append((k, kept))
        real_advance(self, k, kept)

    monkeypatch.setattr(Progress, "advance", noted)
    return steps


def test_a_resumed_diagnose_picks_up_the_contexts_an_interrupted_sweep_finished(
    models, tmp_path, monkeypatch
):
    """Interrupted in its fourth truncated context, then resumed: the sweep scores only the
    contexts it had not finished, and its summary and per-token arrays equal an uninterrupted
    run's number for number."""
    import numpy as np

    from probes.engine import sweep
    from probes.library import context_sweep  # the module that calls `truncated`

    def sweep_run(out):
        (d,) = (out / "diagnose").glob("*/*")
        (r,) = [p for p in (d / "runs" / "context-sweep").glob("*/*")
                if json.loads((p / "run.json").read_text())["status"] == "complete"]  # fmt: skip
        return d, r

    args = ["--model", models["m"], "--quick", *ONLY_CONTEXT_SWEEP, "--json"]
    real = sweep.truncated
    scored = []

    def counted(model, texts, c, geometry, **kw):
        scored.append(c)
        return real(model, texts, c, geometry, **kw)

    monkeypatch.setattr(context_sweep, "truncated", counted)
    assert invoke("diagnose", *args, "--out", tmp_path / "whole").exit_code == 0
    contexts = list(scored)
    assert len(contexts) > 4

    def stops_at_the_fourth(model, texts, c, geometry, **kw):
        scored.append(c)
        if len(scored) == 4:
            raise KeyboardInterrupt
        return real(model, texts, c, geometry, **kw)

    scored.clear()
    monkeypatch.setattr(context_sweep, "truncated", stops_at_the_fourth)
    r = CliRunner().invoke(cli, ["diagnose", *map(str, args), "--out", str(tmp_path / "cut")])
    assert r.exit_code == 130
    (cut,) = (tmp_path / "cut" / "diagnose").glob("*/*")

    scored.clear()
    monkeypatch.setattr(context_sweep, "truncated", counted)
    steps = progress_steps(monkeypatch)
    r = invoke("diagnose", "--resume", cut, "--json")
    assert r.exit_code == 0, r.stderr
    assert scored == contexts[3:]  # the three finished contexts are not scored again
    # the progress display counts them done but does not pace the time left by them
    assert [kept for _, kept in steps][:3] == [True] * 3 and not any(k for _, k in steps[3:])
    _, whole = sweep_run(tmp_path / "whole")
    _, resumed = sweep_run(tmp_path / "cut")
    record = json.loads((resumed / "run.json").read_text())
    assert record["kept_samples"]["samples"] == 3
    assert (resumed / record["kept_samples"]["from"] / "samples.jsonl").is_file()
    a, b = (json.loads((d / "summary.json").read_text()) for d in (whole, resumed))
    for key in ("bins", "metrics", "verdict"):
        assert a[key] == b[key], key
    with np.load(whole / "tokens.npz") as x, np.load(resumed / "tokens.npz") as y:
        assert sorted(x.files) == sorted(y.files)
        for f in x.files:
            assert np.array_equal(x[f], y[f]), f

    def contexts_sampled(d):
        return [json.loads(line)["c"] for line in (d / "samples.jsonl").read_text().splitlines()]

    assert contexts_sampled(resumed) == contexts_sampled(whole)  # the resumed run is whole


def test_rows_come_from_each_run_summary_and_from_the_class_for_older_runs():
    from types import SimpleNamespace

    from probes.suite.plan import SuiteRun
    from probes.suite.rows import column_rows

    class Older:  # a run written before summary.json recorded its rows
        @staticmethod
        def diagnose_rows(summary):
            return [{"from": "class", "model": summary["model"]["id"]}]

    plan = SimpleNamespace(cls=Older)
    runs = [
        SuiteRun("a", plan, 0, {"model": {"id": "m"}, "diagnose_rows": [{"from": "a"}]}),
        SuiteRun("b", plan, 1, {"model": {"id": "n"}, "diagnose_rows": [{"from": "b"}]}),
        SuiteRun("c", plan, 0, {"model": {"id": "m"}}),
        SuiteRun("g", plan, None, {"model": {"id": "m"}, "diagnose_rows": {
            "m": [{"from": "g", "model": "m"}], "n": [{"from": "g", "model": "n"}]}}),
        SuiteRun("h", plan, None, {"model": {"id": "m"}}),
    ]  # fmt: skip
    assert column_rows(runs, 1, {"id": "n"}) == [
        {"from": "b"},
        {"from": "g", "model": "n"},
        {"from": "class", "model": "n"},  # the group run as member n sees it
    ]
    assert [r["from"] for r in column_rows(runs, 0, {"id": "m"})] == ["a", "class", "g", "class"]


CHUNKED = [n for n in probe_smoke.diagnosed() if registry.get(n).shards]


@pytest.mark.parametrize("name", CHUNKED)
def test_a_resumed_diagnose_takes_back_the_chunks_an_interrupted_probe_scored(
    name, models, tmp_path, monkeypatch
):
    """Interrupted after its second scoring call, then resumed: the probe scores only the
    chunks it had not finished, and its summary, samples and per-token arrays equal an
    uninterrupted run's bit for bit (records and arrays come back from the chunks' files with
    their NaNs and dtypes); a finished run keeps no chunk files."""
    import numpy as np

    from probes.api import rows
    from probes.api.probe_base import RunContext

    monkeypatch.setattr(rows, "max_rows", lambda model, geometry: 4)  # one or two items a call
    args = ["--model", models["m"], "--quick", *probe_smoke.skip_all_but(name), "--json"]
    scored: list[list[int]] = []
    real_kept = RunContext.kept_chunk

    def counted(self, call, items):
        got = real_kept(self, call, items)
        if got is None:
            scored.append(list(items))
        return got

    monkeypatch.setattr(RunContext, "kept_chunk", counted)
    assert invoke("diagnose", *args, "--out", tmp_path / "whole").exit_code == 0
    chunks = list(scored)
    assert len(chunks) > 2, chunks

    real_keep = RunContext.keep_chunk

    def stops_after_the_second(self, call, items, results):
        real_keep(self, call, items, results)
        if len(scored) == 2:
            raise KeyboardInterrupt

    scored.clear()
    monkeypatch.setattr(RunContext, "keep_chunk", stops_after_the_second)
    r = CliRunner().invoke(cli, ["diagnose", *map(str, args), "--out", str(tmp_path / "cut")])
    assert r.exit_code == 130
    monkeypatch.setattr(RunContext, "keep_chunk", real_keep)
    (cut,) = (tmp_path / "cut" / "diagnose").glob("*/*")

    scored.clear()
    steps = progress_steps(monkeypatch)
    r = invoke("diagnose", "--resume", cut, "--json")
    assert r.exit_code == 0, r.stderr
    assert scored == chunks[2:]  # the two finished chunks are not scored again
    # the progress display counts them done but does not pace the time left by them
    assert sum(k for k, kept in steps if kept) == len(chunks[0]) + len(chunks[1])
    assert sum(k for k, kept in steps if not kept) == sum(map(len, chunks[2:]))

    def probe_run(out, status):
        (d,) = (out / "diagnose").glob("*/*")
        return [p for p in (d / "runs" / name).glob("*/*")
                if json.loads((p / "run.json").read_text())["status"] == status]  # fmt: skip

    (whole,) = probe_run(tmp_path / "whole", "complete")
    (resumed,) = probe_run(tmp_path / "cut", "complete")
    (stopped,) = probe_run(tmp_path / "cut", "interrupted")
    record = json.loads((resumed / "run.json").read_text())
    assert record["kept_samples"]["chunks"] == 2
    assert (resumed / record["kept_samples"]["from"]).resolve() == stopped.resolve()
    a, b = (json.loads((d / "summary.json").read_text()) for d in (whole, resumed))
    for key in ("bins", "metrics", "checks", "verdict"):
        assert a[key] == b[key], key
    assert (whole / "samples.jsonl").read_text() == (resumed / "samples.jsonl").read_text()
    for file in ("tokens.npz", "texts.npz"):
        if not (whole / file).exists():
            continue
        with np.load(whole / file) as x, np.load(resumed / file) as y:
            assert sorted(x.files) == sorted(y.files)
            for f in x.files:
                assert x[f].dtype == y[f].dtype and np.array_equal(x[f], y[f], equal_nan=True), f
    assert not (whole / "chunks").exists() and not (resumed / "chunks").exists()
    assert len(list((stopped / "chunks").glob("*.npz"))) == 2


def test_an_interrupted_rerun_of_a_diagnose_is_finished_by_rerun_resume_and_compared(
    models, tmp_path, monkeypatch
):
    """`probe rerun DIR` stopped inside a probe, then `probe rerun DIR --resume PARTIAL`: the
    partial diagnose is finished where it began (its finished chunks taken back) and compared
    with DIR, exactly; what cannot be finished so is refused in one line."""
    from probes.api import rows
    from probes.api.probe_base import RunContext

    monkeypatch.setattr(rows, "max_rows", lambda model, geometry: 4)
    skip = probe_smoke.skip_all_but("boundary", "fact-swap")
    r = invoke("diagnose", "--model", models["m"], "--quick", *skip, "--out", tmp_path / "orig",
               "--json")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    orig = json.loads(r.stdout)["run_dir"]

    real_keep = RunContext.keep_chunk
    kept = []

    def stops_in_the_second_probe(self, call, items, results):
        real_keep(self, call, items, results)
        kept.append(self.run_dir.path.parent.parent.name)
        if kept.count("fact-swap") == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(RunContext, "keep_chunk", stops_in_the_second_probe)
    r = CliRunner().invoke(cli, ["rerun", orig, "--out", str(tmp_path / "cut")])
    assert r.exit_code == 130
    monkeypatch.setattr(RunContext, "keep_chunk", real_keep)
    (partial,) = (tmp_path / "cut" / "diagnose").glob("*/*")

    other = invoke("diagnose", "--model", models["m"], "--quick", *skip, "--distance", "30-40",
                   "--out", tmp_path / "other", "--json")  # fmt: skip
    probe_run = next((Path(orig) / "runs" / "fact-swap").glob("*/*"))
    for args, says in [
        ((orig, "--resume", partial, "--out", tmp_path), "drop --out"),
        ((orig, "--resume", partial, "--kernels", "native"), "drop --kernels"),
        ((orig, probe_run, "--resume", partial), "one RUN_DIR"),
        ((probe_run, "--resume", partial), "not a probe run directory"),
        ((orig, "--resume", orig), "nothing to resume"),
        ((json.loads(other.stdout)["run_dir"], "--resume", partial), "not a rerun of this"),
        ((orig, "--resume", tmp_path / "nowhere"), "not a run directory"),
    ]:
        r = CliRunner().invoke(cli, ["rerun", *map(str, args)])
        assert r.exit_code == 2 and says in r.output, (args, r.output)
        assert len(r.output.strip().splitlines()) == 1

    r = invoke("rerun", orig, "--resume", partial, "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["match"] == "exact" and doc["differences"] == [] and doc["passed"]
    assert Path(doc["rerun"]).resolve() == partial.resolve()
    record = json.loads((partial / "run.json").read_text())
    assert record["status"] == "complete" and len(record["resumed_utc"]) == 1
    assert record["argv"][-2:] == ["--resume", str(partial)]
    (swap,) = [p for p in (partial / "runs" / "fact-swap").glob("*/*")
               if json.loads((p / "run.json").read_text())["status"] == "complete"]  # fmt: skip
    assert json.loads((swap / "run.json").read_text())["kept_samples"]["chunks"] == 2
