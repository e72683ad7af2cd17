"""The `probe` CLI with click's CliRunner: the JSON contract, stdout/stderr discipline, exit
codes, and bad inputs (each one line, exit 2, no run directory)."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import probes.api.fact_pairs as fact_pairs
from probes.api.distance_bins import auto_bins, parse_ranges
from probes.cli.main import cli
from probes.testing import tiny_checkpoint

CONTRACT_BIN = {
    "distance_lo", "distance_hi", "n", "delta_mean", "ci95", "p_value", "reach", "within_horizon",
    "accuracy",
}  # fmt: skip
FAST = ["--distance", "8-14,60-80", "--n", "3", "--quiet"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(tiny_checkpoint(tmp_path_factory.mktemp("m") / "tiny", mem_len=16, tgt_len=16))


def invoke(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def run_dirs(out):
    return [p for p in out.glob("*/*/*") if p.is_dir()] if out.exists() else []


def test_json_stdout_is_one_document_matching_the_contract(model, tmp_path):
    r = invoke(["run", "fact-swap", "--model", model, "--out", str(tmp_path), "--json", *FAST])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)  # the whole of stdout is one JSON document
    assert doc["probe"] == "fact-swap" and isinstance(doc["version"], int)
    assert {"path", "sha256"} <= set(doc["model"])
    assert set(doc["geometry"]) >= {"mem_len", "tgt_len", "clamp_len", "same_length", "reset"}
    assert doc["n_pairs"] == 6
    assert {"delta_mean", "delta_ci95", "p_value", "accuracy"} <= set(doc["metrics"])
    assert len(doc["bins"]) == 2
    for b in doc["bins"]:
        assert CONTRACT_BIN <= set(b)
        assert b["reach"] in ("direct", "layered", "beyond")
    assert doc["run_dir"] and run_dirs(tmp_path) and str(run_dirs(tmp_path)[0]) == doc["run_dir"]
    for name in doc["metrics"]:
        assert name in doc["metric_docs"], name
    assert r.stderr == ""


def test_table_and_verdict_on_stdout_progress_only_on_stderr(model, tmp_path, monkeypatch):
    import probes.framework.progress

    real_init = probes.framework.progress.Progress.__init__
    monkeypatch.setattr(
        probes.framework.progress.Progress,
        "__init__",
        lambda self, enabled, live=None: real_init(self, True, live=True),
    )  # as if stderr were a terminal
    r = invoke(
        [
            "run",
            "fact-swap",
            "--model",
            model,
            "--out",
            str(tmp_path),
            "--distance",
            "8-14",
            "--n",
            "3",
        ]
    )
    assert r.exit_code == 0, r.stderr
    assert "fact-swap v2" in r.stdout and "fact-swap:" in r.stdout.splitlines()[-2]
    assert "loading" in r.stderr and "loading" not in r.stdout
    assert "scoring pairs" not in r.stdout


def test_failed_own_check_exits_1(model, tmp_path, monkeypatch):
    from probes.engine import aggregate

    real = aggregate.paired_checks

    def broken(records, tol):
        out = real(records, tol)
        out["identical_prefix"]["passed"] = False
        return out

    monkeypatch.setattr(aggregate, "paired_checks", broken)
    r = invoke(["run", "fact-swap", "--model", model, "--out", str(tmp_path), *FAST])
    assert r.exit_code == 1
    assert "CHECK FAILED" in r.stdout
    (d,) = run_dirs(tmp_path)
    assert json.loads((d / "run.json").read_text())["status"] == "failed-check"


@pytest.mark.parametrize(
    ("exc", "code", "status"),
    [(RuntimeError("boom"), 3, "error"), (KeyboardInterrupt(), 130, "interrupted")],
)
def test_internal_error_and_interrupt_keep_what_was_done(
    model, tmp_path, monkeypatch, exc, code, status
):
    from probes.engine import paired

    real = paired.score_batch
    calls = []

    def flaky(probe, ctx, idx, pad):
        if calls:
            raise exc
        calls.append(1)
        return real(probe, ctx, idx, pad)

    monkeypatch.setattr(paired, "score_batch", flaky)
    monkeypatch.setattr(
        "probes.adapters.txl.CachedTXL.max_rows", lambda self, g: 8
    )  # 2 pairs (4 rows each) a batch
    r = invoke(["run", "fact-swap", "--model", model, "--out", str(tmp_path), *FAST])
    assert r.exit_code == code
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    (d,) = run_dirs(tmp_path)
    assert json.loads((d / "run.json").read_text())["status"] == status
    assert len((d / "samples.jsonl").read_text().splitlines()) == 2  # the first batch


@pytest.fixture(scope="module")
def foreign_model(tmp_path_factory):
    from synth.language import Language, LanguageConfig

    lang = Language(LanguageConfig(n_entities=40, seed=3))
    return str(tiny_checkpoint(tmp_path_factory.mktemp("f") / "foreign", language=lang))


def bad_inputs(model, foreign, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    return {
        "unknown probe": (["run", "fact-swp"], "did you mean 'fact-swap'"),
        "--mem -1": (["run", "fact-swap", "--model", model, "--mem", "-1"], "--mem"),
        "--mem abc": (["run", "fact-swap", "--model", model, "--mem", "abc"], "'abc'"),
        "--n 0": (["run", "fact-swap", "--model", model, "--n", "0"], "--n"),
        "missing model": (
            ["run", "fact-swap", "--model", str(tmp_path / "nope")],
            "does not exist",
        ),
        "foreign vocabulary": (["run", "fact-swap", "--model", foreign], "language mismatch"),
        "unwritable --out": (
            ["run", "fact-swap", "--model", model, "--out", str(blocker / "sub")],
            "--out",
        ),
        "bad distance": (
            ["run", "fact-swap", "--model", model, "--distance", "64-16"],
            "--distance",
        ),
        "same_length with mem 0": (
            ["run", "fact-swap", "--model", model, "--mem", "0", "--same-length"],
            "same_length",
        ),
        "unknown report dir": (["report", str(tmp_path / "nothing")], "not a run directory"),
        "cross-doc --carry": (
            ["run", "cross-doc", "--model", model, "--carry"],
            "runs every cache policy",
        ),
        "fact-insert --lead": (["run", "fact-insert", "--model", model, "--lead", "8-9"], "--lead"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "unknown probe", "--mem -1", "--mem abc", "--n 0", "missing model", "foreign vocabulary",
        "unwritable --out", "bad distance", "same_length with mem 0", "unknown report dir",
        "cross-doc --carry", "fact-insert --lead",
    ],
)  # fmt: skip
def test_bad_input_is_one_line_exit_2_and_leaves_no_run_dir(model, foreign_model, tmp_path, case):
    out = tmp_path / "out"
    args, needle = bad_inputs(model, foreign_model, tmp_path)[case]
    if args[0] == "run" and "--out" not in args:
        args = [*args, "--out", str(out)]
    r = invoke(args)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert needle in lines[0] and "Traceback" not in r.stderr
    assert r.stdout == ""
    assert not run_dirs(out)


def test_device_cuda_without_cuda_is_bad_input(model, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    r = invoke(["run", "fact-swap", "--model", model, "--device", "cuda", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "CUDA is not available" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not run_dirs(tmp_path)


def test_list_json_and_report_and_rerun(model, tmp_path):
    r = invoke(["list", "--json"])
    names = {p["name"] for p in json.loads(r.stdout)["probes"]}
    assert {"fact-swap", "fact-delete", "fact-insert", "distractor"} <= names

    for mem in ("8", "16"):
        r = invoke(
            ["run", "fact-swap", "--model", model, "--out", str(tmp_path), "--mem", mem, *FAST]
        )
        assert r.exit_code == 0, r.stderr
    dirs = sorted(map(str, run_dirs(tmp_path)))
    r = invoke(["report", *dirs])
    assert r.exit_code == 0 and "side by side" in r.stdout
    doc = json.loads(invoke(["report", *dirs, "--json"]).stdout)
    assert sorted(s["geometry"]["mem_len"] for s in doc["runs"]) == [8, 16]

    # a run written before summary.json recorded its table's columns reports the same table,
    # and its rerun is exact (the columns are output the rerun adds)
    alone = invoke(["report", dirs[0]]).stdout
    path = Path(dirs[0]) / "summary.json"
    recorded = json.loads(path.read_text())
    assert recorded["columns"][0] == {
        "header": "distance", "key": "distance_lo", "format": "range", "identifies": True
    }  # fmt: skip
    del recorded["columns"]
    path.write_text(json.dumps(recorded))
    assert invoke(["report", dirs[0]]).stdout == alone

    r = invoke(["rerun", dirs[0], "--json", "--quiet", "--out", str(tmp_path / "again")])
    assert r.exit_code == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["match"] == "exact" and res["differences"] == []
    assert any("columns" in note for note in res["notes"])


def test_an_interrupted_rerun_of_a_probe_run_is_finished_by_rerun_resume_and_compared(
    tmp_path, monkeypatch
):
    """`probe rerun RUN` stopped after its second scoring chunk, then `probe rerun RUN --resume
    PARTIAL`: a new run beside PARTIAL takes its chunks back, scores only the rest, and equals
    RUN bit for bit (summary, samples, per-token arrays), also when RUN was recorded before an
    option existed; a PARTIAL that is not an unfinished rerun of RUN (another option, a model
    file changed since, a damaged run.json, a finished run) is refused in one line."""
    import numpy as np

    from probes.api import rows
    from probes.api.probe_base import RunContext

    monkeypatch.setattr(rows, "max_rows", lambda model, geometry: 4)  # one or two pairs a call
    model = tiny_checkpoint(tmp_path / "m", mem_len=16, tgt_len=16)  # rebuilt in place below

    def run(out, *extra):
        r = invoke(["run", "fact-swap", "--model", str(model), "--out", str(tmp_path / out),
                    "--json", *FAST, *extra])  # fmt: skip
        assert r.exit_code == 0, r.stderr
        return json.loads(r.stdout)["run_dir"]

    orig = run("orig")
    scored: list[list[int]] = []
    real_kept, real_keep = RunContext.kept_chunk, RunContext.keep_chunk

    def counted(self, call, items):
        got = real_kept(self, call, items)
        if got is None:
            scored.append(list(items))
        return got

    def stops_after_the_second(self, call, items, results):
        real_keep(self, call, items, results)
        if len(scored) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(RunContext, "kept_chunk", counted)
    monkeypatch.setattr(RunContext, "keep_chunk", stops_after_the_second)
    r = CliRunner().invoke(cli, ["rerun", orig, "--out", str(tmp_path / "cut"), "--quiet"])
    assert r.exit_code == 130
    monkeypatch.setattr(RunContext, "keep_chunk", real_keep)
    (partial,) = run_dirs(tmp_path / "cut")
    first_two = list(scored)

    damaged = tmp_path / "damaged" / partial.relative_to(tmp_path / "cut")
    damaged.parent.mkdir(parents=True)
    record = json.loads((partial / "run.json").read_text())
    damaged.mkdir()
    (damaged / "run.json").write_text(json.dumps({**record, "probe": {"version": 2}}))

    def refused(*args):
        r = CliRunner().invoke(cli, ["rerun", *map(str, args)])
        assert r.exit_code == 2, (args, r.output)
        assert len(r.output.strip().splitlines()) == 1, r.output
        return r.output

    assert "its options.mem is None, this rerun's 8" in refused(run("other", "--mem", "8"),
                                                              "--resume", partial)  # fmt: skip
    assert "nothing to resume" in refused(orig, "--resume", orig)
    assert "not a run directory" in refused(orig, "--resume", tmp_path / "nowhere")
    assert "drop --kernels" in refused(orig, "--resume", partial, "--kernels", "native")
    assert "field 'name' is missing" in refused(orig, "--resume", damaged)
    before = sorted(p.name for p in partial.parent.iterdir())

    # RUN recorded before an option existed: its rerun uses the default, as PARTIAL did
    path = Path(orig) / "run.json"
    recorded = json.loads(path.read_text())
    del recorded["options"]["cache_positions"]
    path.write_text(json.dumps(recorded))
    scored.clear()
    r = invoke(["rerun", orig, "--resume", str(partial), "--json", "--quiet"])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["match"] == "exact" and doc["differences"] == [] and doc["passed"]
    resumed = Path(doc["rerun"])
    assert resumed.parent == partial.parent and resumed.name not in before
    assert scored and not any(items in scored for items in first_two)  # not scored again
    record = json.loads((resumed / "run.json").read_text())
    assert record["kept_samples"]["chunks"] == 2
    assert (resumed / record["kept_samples"]["from"]).resolve() == partial.resolve()
    assert record["argv"][-2:] == ["--resume", str(partial)]
    assert (Path(orig) / "samples.jsonl").read_text() == (resumed / "samples.jsonl").read_text()
    for file in ("tokens.npz", "texts.npz"):
        with np.load(Path(orig) / file) as x, np.load(resumed / file) as y:
            assert sorted(x.files) == sorted(y.files)
            for f in x.files:
                assert x[f].dtype == y[f].dtype and np.array_equal(x[f], y[f], equal_nan=True), f
    assert not (resumed / "chunks").exists()

    # the model file changed since PARTIAL was scored: its chunks are another model's
    tiny_checkpoint(model, mem_len=16, tgt_len=16, seed=1)
    before = sorted(p.name for p in partial.parent.iterdir())
    assert "model file differs" in refused(orig, "--resume", partial)
    assert sorted(p.name for p in partial.parent.iterdir()) == before  # nothing written


@pytest.mark.parametrize("args", [[], ["run"], ["synth"]])
def test_a_group_without_a_command_prints_its_help_unflattened(args):
    r = invoke(args)
    assert r.exit_code in (0, 2)  # as click does (2 since click 8.2)
    text = r.stdout + r.stderr
    assert text.startswith("Usage:") and "error:" not in text
    assert len(text.splitlines()) > 5  # the help, not one flattened line
    assert any(line.lstrip().startswith("-h, --help") for line in text.splitlines())


def test_cross_doc_records_the_policies_it_ran(model, tmp_path):
    r = invoke(
        ["run", "cross-doc", "--model", model, "--out", str(tmp_path), "--json", "--n", "2",
         "--distance", "4-8", "--quiet"]
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["metrics"]["policies"] == ["reset", "carry", "foreign"]
    assert "policies" in doc["metric_docs"]


def test_rerun_never_imports_a_probe_file_named_in_run_json_unless_allowed(model, tmp_path):
    r = invoke(["run", "fact-swap", "--model", model, "--out", str(tmp_path / "o"),
                "--distance", "8-14", "--n", "2", "--json", "--quiet"])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    run_dir = Path(json.loads(r.stdout)["run_dir"])
    marker = tmp_path / "imported"
    hostile = tmp_path / "hostile.py"
    hostile.write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    record = json.loads((run_dir / "run.json").read_text())
    record["probe"]["spec"] = f"{hostile}:Class"
    record["probe"]["class"] = f"{hostile}:Class"
    (run_dir / "run.json").write_text(json.dumps(record))
    r = invoke(["rerun", str(run_dir), "--quiet", "--out", str(tmp_path / "again")])
    assert r.exit_code == 2 and "--allow-file-probes" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not marker.exists()  # the file's code never ran


def test_rerun_of_a_run_recorded_elsewhere_uses_the_shipped_model_of_the_same_sha256(tmp_path):
    r = invoke(["run", "fact-swap", "--model", "default", "--out", str(tmp_path / "o"),
                "--distance", "8-14", "--n", "2", "--json", "--quiet", "--threads", "1"])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    run_dir = Path(json.loads(r.stdout)["run_dir"])
    record = json.loads((run_dir / "run.json").read_text())
    assert record["options"]["model"] == "default"  # recorded by name
    record["options"]["model"] = "/elsewhere/checkout/probes/models/default"  # another machine
    (run_dir / "run.json").write_text(json.dumps(record))
    r = invoke(["rerun", str(run_dir), "--json", "--quiet", "--out", str(tmp_path / "again")])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["match"] == "exact"
    assert any("used the shipped model 'default'" in n for n in doc["notes"])
    record["model"]["sha256"] = "0" * 64  # and a model this installation does not have
    (run_dir / "run.json").write_text(json.dumps(record))
    r = invoke(["rerun", str(run_dir), "--quiet", "--out", str(tmp_path / "again")])
    assert r.exit_code == 2 and "does not exist here" in r.stderr


def test_a_rerun_repeats_what_auto_stood_for_in_its_run_even_where_auto_now_resolves_otherwise(
    model, tmp_path, monkeypatch
):
    """run.json records each 'auto' parameter as the text it stood for; a rerun repeats it (and
    says what this version would resolve it to), so a change of `auto` in a later version is
    not a change of the numbers. A run recorded before `auto` was kept resolves it again."""
    monkeypatch.setattr(fact_pairs, "auto_bins", lambda h: auto_bins(h)[:2])  # an older auto
    r = invoke(["run", "fact-swap", "--model", model, "--out", str(tmp_path / "o"), "--n", "2",
                "--json", "--quiet"])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    monkeypatch.undo()
    doc = json.loads(r.stdout)
    run_dir = Path(doc["run_dir"])
    record = json.loads((run_dir / "run.json").read_text())
    assert record["params"]["distance"] == "auto"
    bins = parse_ranges(record["auto"]["distance"])
    assert [(b["distance_lo"], b["distance_hi"]) for b in doc["bins"]] == bins
    assert len(bins) == 2 and "auto_today" not in record
    assert record["auto"]["lead"] == "8-23"  # tgt_len 16

    def rerun(where):
        r = invoke(["rerun", str(run_dir), "--json", "--quiet", "--out", str(tmp_path / where)])
        return r, json.loads(r.stdout) if r.stdout else None

    r, res = rerun("again")
    assert r.exit_code == 0 and res["match"] == "exact", r.stderr
    (note,) = [n for n in res["notes"] if "auto" in n]
    assert note.startswith(f"--distance auto: repeated the recorded {record['auto']['distance']!r}")
    again = json.loads((Path(res["rerun"]) / "run.json").read_text())
    assert again["auto"] == record["auto"] and again["params"] == record["params"]
    assert len(parse_ranges(again["auto_today"]["distance"])) > 2

    del record["auto"]  # a run recorded before runs kept what 'auto' stood for
    (run_dir / "run.json").write_text(json.dumps(record))
    r, res = rerun("older")
    assert res["match"] == "differ" and r.exit_code == 1

    record["auto"] = {"distance": 7}  # not text: refused, one line
    (run_dir / "run.json").write_text(json.dumps(record))
    r = invoke(["rerun", str(run_dir), "--quiet", "--out", str(tmp_path / "bad")])
    assert r.exit_code == 2 and "run.json's auto" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "bad").exists()
    record["auto"] = {"distance": "1-5"}  # text the parameter refuses: refused, one line
    (run_dir / "run.json").write_text(json.dumps(record))
    r = invoke(["rerun", str(run_dir), "--quiet", "--out", str(tmp_path / "bad")])
    assert r.exit_code == 2 and "recorded auto value of distance '1-5'" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "bad").exists()


def test_a_rerun_names_the_cpu_a_run_was_recorded_on_when_it_is_another(model, tmp_path):
    """Float kernels take other paths on another CPU, so the rerun says where each ran; on the
    same CPU, or an exact match with a record that names none, it says nothing of CPUs."""
    r = invoke(["run", "fact-swap", "--model", model, "--out", str(tmp_path / "o"),
                "--distance", "8-14", "--n", "2", "--json", "--quiet"])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    run_dir = Path(json.loads(r.stdout)["run_dir"])
    record = json.loads((run_dir / "run.json").read_text())
    assert record["machine"]["cpu_kernels"]  # torch was loaded: its dispatch is known

    def cpu_notes():
        r = invoke(["rerun", str(run_dir), "--json", "--quiet", "--out", str(tmp_path / "again")])
        assert r.exit_code == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["match"] == "exact"
        return [n for n in doc["notes"] if "CPU" in n]

    assert cpu_notes() == []
    record["machine"]["cpu"] = "Another CPU"
    (run_dir / "run.json").write_text(json.dumps(record))
    (note,) = cpu_notes()
    assert note.startswith("recorded on another CPU (Another CPU")
    del record["machine"]["cpu"]  # a run recorded before run.json named its CPU
    (run_dir / "run.json").write_text(json.dumps(record))
    assert cpu_notes() == []  # exact: nothing to explain


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--model", "default", "--model", "default-mem0"], "takes one --model, got 2"),
        (["--out", ""], "an empty directory name"),
    ],
)
def test_a_second_model_or_an_empty_out_is_refused_not_silently_taken(args, needle, tmp_path):
    import os

    before = set(os.listdir(tmp_path))
    r = invoke(["run", "fact-swap", "--quick", *args])
    assert r.exit_code == 2 and needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert set(os.listdir(tmp_path)) == before


def test_rerun_notes_fields_a_newer_version_adds_and_counts_lost_ones_as_differences():
    from probes.rerun import diff

    added: list[str] = []
    same = diff({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 2, "new": 3}}, added=added)
    assert same == [] and added == ["b.new"]
    lost = diff({"a": 1, "gone": 2}, {"a": 1}, added=[])
    assert [d["path"] for d in lost] == ["gone"]
