"""`probe diagnose --jobs N`: the probes of a diagnose side by side, each in a process of its own
(`probe diagnose --resume DIR --only PROBE`), giving the rows one process gives, bit for bit;
a resumed diagnose keeps what was finished and runs the rest side by side; an interrupted
diagnose stops each worker once; a worker's failure is the diagnose's, in one line."""

import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import probe_smoke
import pytest
import torch
from click.testing import CliRunner

from probes.api.probe_base import ProbeInputError
from probes.cli.main import cli
from probes.framework.progress import Progress
from probes.suite import parallel
from probes.suite.plan import SuiteRun
from probes.testing import tiny_checkpoint

torch.set_num_threads(1)

BASE = ["--quick", "--threads", "1", "--json"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    tiny_checkpoint(root / "m-mem0", mem_len=0, tgt_len=16, seed=1)  # the group's sibling
    return tiny_checkpoint(root / "m", mem_len=16, tgt_len=16)


@pytest.fixture(scope="module")
def one_process(model, tmp_path_factory):
    """The diagnose run in this process, one probe after the other."""
    out = tmp_path_factory.mktemp("one")
    r = invoke("diagnose", "--model", model, "--out", out, *BASE)
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def ran_alone(record: dict, name: str) -> bool:
    """Whether a probe run's run.json says a worker ran it (`… --only NAME`)."""
    argv = record["argv"]
    return "--only" in argv and argv[argv.index("--only") + 1] == name


def same_rows(a: dict, b: dict) -> bool:
    return json.dumps(a["rows"], sort_keys=True) == json.dumps(b["rows"], sort_keys=True)


def test_probes_run_side_by_side_give_the_rows_of_one_process_bit_for_bit(
    model, one_process, tmp_path
):
    r = invoke("diagnose", "--model", model, "--out", tmp_path, "--jobs", "3", *BASE)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert same_rows(doc, one_process)
    assert doc["verdicts"] == one_process["verdicts"]
    assert sorted(doc["runs"]) == sorted(one_process["runs"]) == sorted(probe_smoke.diagnosed())
    run_dir = Path(doc["run_dir"])
    diagnosed = json.loads((run_dir / "run.json").read_text())
    assert diagnosed["status"] == "complete"
    for name, rel in doc["runs"].items():  # each probe ran in a worker of its own
        record = json.loads((run_dir / rel / "run.json").read_text())
        assert ran_alone(record, name)
        assert record["threads"] == 1
        assert diagnosed["peak_rss_mb"] >= record["peak_rss_mb"]  # its workers' peaks count


def test_a_resumed_diagnose_keeps_finished_probes_and_runs_the_rest_side_by_side(
    model, one_process, tmp_path
):
    done = Path(one_process["run_dir"])
    partial = tmp_path / "diagnose" / done.parent.name / done.name
    shutil.copytree(done, partial)
    dropped = sorted(one_process["runs"])[::2]
    for name in dropped:  # as if the diagnose had been stopped before these
        shutil.rmtree(partial / one_process["runs"][name])
    (partial / "summary.json").unlink()
    record = json.loads((partial / "run.json").read_text())
    (partial / "run.json").write_text(json.dumps({**record, "status": "interrupted"}))

    r = invoke("diagnose", "--resume", partial, "--jobs", "2", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert same_rows(doc, one_process)
    for name, rel in doc["runs"].items():
        record = json.loads((partial / rel / "run.json").read_text())
        assert ran_alone(record, name) == (name in dropped), name


def test_one_probe_of_a_diagnose_runs_alone_and_a_finished_one_is_kept(
    model, one_process, tmp_path
):
    done = Path(one_process["run_dir"])
    partial = tmp_path / "diagnose" / done.parent.name / done.name
    shutil.copytree(done, partial)
    shutil.rmtree(partial / one_process["runs"]["fact-swap"])
    (partial / "summary.json").unlink()
    record = json.loads((partial / "run.json").read_text())
    (partial / "run.json").write_text(json.dumps({**record, "status": "interrupted"}))
    kept = json.loads((partial / one_process["runs"]["boundary"] / "summary.json").read_text())

    r = invoke("diagnose", "--resume", partial, "--only", "fact-swap", "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["probe"] == "fact-swap"
    assert Path(summary["run_dir"]).parent.parent.parent == partial / "runs"
    assert not (partial / "summary.json").exists()  # the diagnose's own files are untouched
    assert json.loads((partial / "run.json").read_text())["status"] == "interrupted"

    r = invoke("diagnose", "--resume", partial, "--only", "boundary", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["run_dir"] == str(partial / one_process["runs"]["boundary"])
    assert json.loads(r.stdout)["metrics"] == kept["metrics"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--jobs", "0"], "--jobs"),
        (["--only", "fact-swap"], "give it --resume RUN_DIR"),
        (["--models", "MODEL,MODEL", "--jobs", "2"], "drop it with --models"),
    ],
)
def test_a_bad_jobs_or_only_is_one_line_exit_2_and_writes_nothing(model, tmp_path, args, needle):
    args = [str(model) if a == "MODEL" else a for a in args]
    if "--models" not in args:
        args = ["--model", str(model), *args]
    r = invoke("diagnose", *args, "--out", tmp_path / "out", "--quick")
    assert r.exit_code == 2
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_jobs_that_would_not_fit_in_memory_are_refused_before_anything_is_written(
    model, tmp_path, monkeypatch
):
    monkeypatch.setattr(parallel, "resident_bytes", lambda: 1 << 50)  # a petabyte each
    r = invoke("diagnose", "--model", model, "--quick", "--jobs", "2", "--out", tmp_path / "out")
    assert r.exit_code == 2
    assert "--jobs 2 (2 processes, each with its own copy of m-" in r.stderr
    assert "lower --jobs" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_only_refuses_a_probe_the_diagnose_leaves_out_naming_why(model, tmp_path):
    alone = tiny_checkpoint(tmp_path / "alone", mem_len=0, tgt_len=16, seed=2)  # no group
    r = invoke("diagnose", "--model", alone, "--out", tmp_path / "out", *BASE,
               *probe_smoke.skip_all_but("fact-swap", "recl"))  # fmt: skip
    assert r.exit_code == 0, r.stderr
    (done,) = (tmp_path / "out" / "diagnose").glob("*/*")
    (done / "summary.json").unlink()
    record = json.loads((done / "run.json").read_text())
    (done / "run.json").write_text(json.dumps({**record, "status": "interrupted"}))
    r = invoke("diagnose", "--resume", done, "--only", "recl")
    assert r.exit_code == 2
    assert "--only 'recl': this diagnose leaves it out: recl (no model group)" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_only_refuses_a_probe_the_diagnose_does_not_run(model, one_process, tmp_path):
    done = Path(one_process["run_dir"])
    partial = tmp_path / "d" / "diagnose" / done.parent.name / done.name
    shutil.copytree(done, partial)
    (partial / "summary.json").unlink()
    record = json.loads((partial / "run.json").read_text())
    (partial / "run.json").write_text(json.dumps({**record, "status": "interrupted"}))
    r = invoke("diagnose", "--resume", partial, "--only", "no-such-probe")
    assert r.exit_code == 2
    assert "not a diagnose probe" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_rerun_of_a_probe_run_refuses_jobs_in_one_line(model, one_process):
    probe_run = Path(one_process["run_dir"]) / one_process["runs"]["fact-swap"]
    r = invoke("rerun", probe_run, "--jobs", "2")
    assert r.exit_code == 2
    assert "drop --jobs" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_rerun_of_several_runs_spreads_the_diagnoses_and_reruns_probe_runs_as_before(
    model, tmp_path
):
    out = tmp_path / "runs"
    r = invoke("diagnose", "--model", model, "--out", out, *BASE,
               *probe_smoke.skip_all_but("fact-swap"))  # fmt: skip
    assert r.exit_code == 0, r.stderr
    r = invoke("run", "fact-swap", "--model", model, "--quick", "--threads", "1", "--out", out,
               "--json")  # fmt: skip
    assert r.exit_code == 0, r.stderr
    r = invoke("rerun", out, "--jobs", "2", "--json", "--out", tmp_path / "again")
    assert r.exit_code == 0, r.stdout
    reruns = json.loads(r.stdout)["reruns"]
    assert len(reruns) == 2 and {x["match"] for x in reruns} == {"exact"}
    (diagnose,) = (tmp_path / "again" / "diagnose").glob("*/*")
    (fact_swap,) = (diagnose / "runs" / "fact-swap").glob("*/*")
    assert ran_alone(json.loads((fact_swap / "run.json").read_text()), "fact-swap")


# Workers stood in by small Python processes: what the parent does with their exit codes,
# their last line and an interruption, without a model.


def fake(code: str) -> parallel.Worker:
    return lambda path, name, quiet: [sys.executable, "-c", code, str(path), name]


def run_fakes(names: list[str], worker: parallel.Worker, where: Path, jobs: int = 1,
              progress: Progress | None = None) -> None:  # fmt: skip
    """`run_parallel` over suite runs named `names` (no plans: the workers stand in)."""
    runs = [SuiteRun(n, plan=None, column=0) for n in names]
    parallel.run_parallel(runs, SimpleNamespace(path=where), progress or Progress(False), jobs,
                          worker, keep=False)  # fmt: skip


def test_a_worker_refusing_its_input_is_the_diagnose_refusing_it_in_one_line(tmp_path):
    worker = fake("import sys; print('error: --mem 9999 exceeds the model', file=sys.stderr); "
                  "sys.exit(2)")  # fmt: skip
    with pytest.raises(ProbeInputError, match=r"^fact-swap: --mem 9999 exceeds the model$"):
        run_fakes(["fact-swap"], worker, tmp_path, jobs=2)


def test_each_line_a_worker_writes_reaches_the_diagnose_naming_its_probe_once(tmp_path, capsys):
    worker = fake("import sys; print('fact-swap: scoring pairs: 1/2', file=sys.stderr); "
                  "print('internal error: boom', file=sys.stderr); sys.exit(3)")  # fmt: skip
    with pytest.raises(RuntimeError, match=r"exit code 3: internal error: boom$"):
        run_fakes(["fact-swap"], worker, tmp_path, progress=Progress(True, live=False))
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["fact-swap: scoring pairs: 1/2", "fact-swap: internal error: boom"]


def test_a_killed_worker_is_named_with_its_signal_not_its_last_progress_line(tmp_path):
    worker = fake("import os, signal, sys; print('boundary: scoring 1/9', file=sys.stderr); "
                  "sys.stderr.flush(); os.kill(os.getpid(), signal.SIGKILL)")  # fmt: skip
    with pytest.raises(RuntimeError, match=r"^boundary's process was killed by SIGKILL$"):
        run_fakes(["boundary"], worker, tmp_path)


def test_after_a_worker_fails_no_other_starts_and_the_live_ones_end_first(tmp_path):
    code = (
        "import sys, time; from pathlib import Path; "
        "(Path(sys.argv[1]) / (sys.argv[2] + '.started')).touch(); "
        "bad = sys.argv[2] == 'a'; time.sleep(0 if bad else 2); "
        "print('error: a refused', file=sys.stderr); sys.exit(2 if bad else 3)"
    )
    with pytest.raises(ProbeInputError, match=r"^a: a refused$"):
        run_fakes(["a", "b", "c"], fake(code), tmp_path, jobs=2)
    assert sorted(p.name for p in tmp_path.glob("*.started")) == ["a.started", "b.started"]


FOLLOWER = """
import signal, sys, time
from pathlib import Path
from probes.suite.parallel import follow_parent
def stopped(signum, frame):
    (Path(sys.argv[1]) / 'stopped').touch()
    sys.exit(143)
signal.signal(signal.SIGTERM, stopped)
follow_parent()
(Path(sys.argv[1]) / 'started').touch()
time.sleep(60)
"""

PARENT_OF = """
import os, subprocess, sys, time
from probes.suite.parallel import PARENT
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], start_new_session=True,
                 env={**os.environ, PARENT: str(os.getpid())})
time.sleep(60)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_worker_whose_diagnose_is_killed_outright_is_stopped_and_records_it(tmp_path):
    import subprocess

    parent = subprocess.Popen([sys.executable, "-c", PARENT_OF, FOLLOWER, str(tmp_path)])
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "started").exists()
        parent.kill()  # SIGKILL: no handler of the diagnose runs
        parent.wait()
        while not (tmp_path / "stopped").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "stopped").exists()  # the worker got SIGTERM: it records its run
    finally:
        parent.kill()


def test_a_progress_line_whose_reader_is_gone_ends_the_lines_not_the_run(monkeypatch):
    read, write = os.pipe()
    os.close(read)
    stream = os.fdopen(write, "w")
    monkeypatch.setattr(sys, "stderr", stream)
    p = Progress(enabled=True, live=False)
    p.relay("fact-swap: scoring pairs: 1/2")  # EPIPE: no exception, no SystemExit
    assert not p.enabled
    p.relay("fact-swap: scoring pairs: 2/2")
    try:
        stream.close()
    except OSError:
        pass


SLOW = """
import signal, sys, time
from pathlib import Path
def stopped(signum, frame):
    with open(Path(sys.argv[1]) / (sys.argv[2] + '.stopped'), 'a') as f:
        f.write('SIGTERM\\n')
    sys.exit(143)
signal.signal(signal.SIGTERM, stopped)
(Path(sys.argv[1]) / (sys.argv[2] + '.started')).touch()
time.sleep(60)
"""


def test_an_interrupted_diagnose_stops_each_worker_once_and_starts_no_other(tmp_path):
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGUSR1, interrupt)
    started = time.monotonic()

    def when_both_started():
        while len(list(tmp_path.glob("*.started"))) < 2 and time.monotonic() - started < 60:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGUSR1)

    threading.Thread(target=when_both_started, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_fakes(["a", "b", "c"], fake(SLOW), tmp_path, jobs=2)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert sorted(p.name for p in tmp_path.glob("*.started")) == ["a.started", "b.started"]
    for name in ("a", "b"):
        assert (tmp_path / f"{name}.stopped").read_text() == "SIGTERM\n"
