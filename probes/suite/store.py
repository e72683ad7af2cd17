"""A diagnose run directory: its run.json record, the finished or interrupted probe runs an
earlier attempt left in it (what a resumed diagnose keeps), and its summary.json at the end."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from probes._version import __version__
from probes.api import params as params_mod
from probes.api.probe_base import ProbeInputError
from probes.framework import provenance
from probes.framework.results import (
    FINISHED,
    RunDir,
    RunDirError,
    add_sitting,
    dumps,
    larger_peak,
    load_samples,
    read_json,
    recorded_number,
    recorded_peak,
    safe_id,
    status,
)
from probes.suite.plan import OPTIONS, SuiteRun
from probes.suite.rows import ROW_DOCS
from txl.files import FileRefused


def start_record(opts, skip, argv, **fields: Any) -> dict[str, Any]:
    """run.json of a diagnose run: the options as given (`fields` add the models)."""
    recorded = {k: v for k, v in opts.record().items() if k in OPTIONS and k != "model"}
    recorded["skip"] = list(skip)
    return {
        "schema_version": 1,
        "status": "running",
        "command": "diagnose",
        "argv": provenance.portable_argv(argv),
        "options": recorded,
        **fields,
        "git": provenance.git_state(),
        "package_version": __version__,
        "versions": provenance.versions(),
        "machine": provenance.machine(),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def auto_of(runs: list[SuiteRun], column: int) -> dict[str, dict[str, str]]:
    """What each 'auto' parameter of the probe runs serving `column` stood for (probe → name →
    text), for the diagnose's run.json: a copy of the diagnose without its probe runs (as a
    curated one is kept) still reruns them as they ran."""
    return {r.name: dict(r.plan.ctx.auto) for r in runs if r.serves(column)}


# What may differ between two runs of the same measurement: where they were written and how
# many threads computed them.
NOT_IDENTITY = ("out", "threads")


def measurement(name: str, version: Any, params: Any, options: dict, models: list, seen) -> dict:
    """What makes two probe runs the same measurement. A change of the code within one probe
    version is not seen here but through `seen` (the geometry and horizon the run resolved),
    and a probe's version marks a change of what it measures."""
    kept = {k: v for k, v in options.items() if k not in NOT_IDENTITY}
    return {"probe": [name, version], "params": params, "options": kept, "models": models,
            "seen": seen}  # fmt: skip


def planned_measurement(p) -> dict:
    """The measurement of a prepared run (runner.Prepared): the model files it loaded."""
    models = [m.info.sha256 for m in ([p.model, *p.ctx.group[1:]] if p.ctx.group else [p.model])]
    seen = [p.ctx.geometry.to_dict(), p.ctx.horizon.to_dict()]
    return measurement(p.cls.name, p.cls.version, params_mod.to_dict(p.params),
                       p.options.record(), models, seen)  # fmt: skip


def recorded_measurement(rec: dict) -> dict:
    """The measurement a probe run's run.json records (KeyError or TypeError: not one)."""
    shas = [rec["model"]["sha256"]] + [g["sha256"] for g in rec.get("group", [])[1:]]
    return measurement(rec["probe"]["name"], rec["probe"]["version"], rec["params"],
                       rec["options"], shas, [rec["geometry"], rec["horizon"]])  # fmt: skip


def same_measurement(run: SuiteRun, runs_dir: Path):
    """(path, status) of every run of this very probe run in `runs_dir`, oldest first: the
    same probe version, parameters, options (but --out and --threads) and model files."""
    p = run.plan
    want = dumps(planned_measurement(p))
    for path in sorted((runs_dir / safe_id(p.cls.name) / safe_id(p.model.info.id)).glob("*")):
        try:
            rec = read_json(path / "run.json")
            if dumps(recorded_measurement(rec)) == want:
                yield path, status(path, rec)
        except (FileRefused, OSError, KeyError, TypeError):
            continue


def finished(run: SuiteRun, runs_dir: Path) -> dict | None:
    """The summary of a finished run (complete, or failed its own check) of this very probe
    run in `runs_dir`; None when there is none."""
    for path, state in same_measurement(run, runs_dir):
        if state in ("complete", "failed-check"):
            try:  # where it is now: the directory may have moved since
                return {**read_json(path / "summary.json"), "run_dir": str(path)}
            except (FileRefused, OSError):
                continue
    return None


def interrupted(run: SuiteRun, runs_dir: Path) -> tuple[Path, list[dict]] | None:
    """The interrupted (or killed) run of this very probe run in `runs_dir` that got furthest
    (the most samples; the newest of equals) and its samples, for a probe that `resumes()`; None
    when there is none or none wrote a sample. An attempt interrupted again moments after it
    resumed holds less than the one it resumed from."""
    if not run.plan.cls.resumes():
        return None
    best: tuple[Path, list[dict]] | None = None
    for path, state in same_measurement(run, runs_dir):
        if state not in ("interrupted", "dead"):
            continue
        try:
            samples = load_samples(path)
        except (FileRefused, OSError):
            continue
        if samples and (best is None or len(samples) >= len(best[1])):
            best = path, samples
    return best


def resumed_options(path: Path, beside: bool = False) -> dict[str, Any]:
    """The options of an unfinished diagnose run directory (its run.json), to finish it with
    `diagnose(resume=path, **options)`, or (`beside`) to run one of its probes with
    `diagnose_probe` while the diagnose may be running. ProbeInputError (one line) when it is
    not a diagnose run, a process still runs in it (unless `beside`), or it finished."""
    try:
        record = read_json(Path(path) / "run.json")
    except (FileRefused, OSError) as e:
        raise ProbeInputError(f"--resume {str(path)!r}: {e}") from None
    if not isinstance(record, dict) or record.get("command") != "diagnose":
        raise ProbeInputError(
            f"--resume {str(path)!r} is not a diagnose run directory; give one that "
            "`probe diagnose` wrote"
        )
    if "models" in record.get("options", {}):
        raise ProbeInputError(f"--resume {str(path)!r}: a --models run cannot be resumed yet")
    state = status(Path(path), record)
    if state == "running" and not beside:
        raise ProbeInputError(f"--resume {str(path)!r}: a process still runs in it")
    if state in ("complete", "failed-check"):
        raise ProbeInputError(f"--resume {str(path)!r} finished ({state}): nothing to resume")
    values = recorded_options(record)
    values["out"] = str(Path(path).resolve().parents[2])  # <out>/diagnose/<model>/<run>: moved
    if values.get("threads") is None:
        values["threads"] = _finished_threads(Path(path))
    return values


def probe_auto(path: Path, name: str) -> dict[str, str] | None:
    """What the 'auto' parameters of probe `name` stood for in the diagnose of `path` (its
    run.json `auto`: parameter → text), None when it recorded none; ProbeInputError (one line)
    when `auto` is not that shape."""
    auto = read_json(Path(path) / "run.json").get("auto") or {}
    mine = auto.get(name) if isinstance(auto, dict) else None
    if mine is None and isinstance(auto, dict):
        return None
    if not isinstance(mine, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in mine.items()
    ):
        raise ProbeInputError(
            f"{str(path)!r}: run.json's auto is not probe → parameter → text (e.g. "
            '{"fact-swap": {"distance": "14-126"}}); give a directory `probe diagnose` wrote'
        )
    return dict(mine)


def recorded_options(record: dict) -> dict[str, Any]:
    """The `diagnose` options a diagnose's run.json recorded (`distance` None for auto bins)."""
    given = record["options"]
    values = {k: given[k] for k in OPTIONS if k in given}
    values["distance"] = None if given.get("distance", "auto") == "auto" else given["distance"]
    values["skip"] = tuple(given.get("skip", ()))
    return values


def _finished_threads(path: Path) -> int | None:
    """The one thread count the finished probe runs of a diagnose recorded before its options
    held a count (each probe run then resolved its own), so that the rest compute at it too;
    None when none finished or they differ."""
    counts = set()
    for run_json in path.glob("runs/*/*/*/run.json"):
        try:
            record = read_json(run_json)
        except (FileRefused, OSError):
            continue
        if isinstance(record, dict) and status(run_json.parent, record) in FINISHED:
            counts.add(record.get("threads"))
    (count,) = counts if len(counts) == 1 else (None,)
    return count if isinstance(count, int) else None


def close(run_dir, record: dict, summary: dict, runs: list[SuiteRun], t0: float, plot) -> dict:
    """summary.json and the finished run.json (inside `run_dir.recording`)."""
    summary["passed"] = all(r.summary["passed"] for r in runs)
    summary["elapsed_s"] = add_sitting(record, time.perf_counter() - t0)
    record["peak_rss_mb"] = larger_peak(record, *probe_run_peaks(run_dir.path))
    summary["row_docs"] = ROW_DOCS
    summary["plots"] = [plot] if plot else []
    run_dir.write_json("summary.json", summary)
    run_dir.finish(record, passed=summary["passed"], elapsed_s=summary["elapsed_s"])
    return summary


def reopen(path: Path, record: dict):
    """The run directory of a resumed diagnose, its run.json `record` keeping when it started
    and adding when it resumed; ProbeInputError when its models are not the files it began
    with."""
    before = read_json(path / "run.json")
    if before.get("model", {}).get("sha256") != record["model"]["sha256"]:
        raise ProbeInputError(
            f"--resume {str(path)!r}: its model file changed since it began (sha256 "
            f"{str(before.get('model', {}).get('sha256'))[:12]} then, "
            f"{record['model']['sha256'][:12]} now); run a new diagnose"
        )
    record["started_utc"] = before.get("started_utc", record["started_utc"])
    record["resumed_utc"] = [*before.get("resumed_utc", []), time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime())]  # fmt: skip
    record["sittings_s"] = earlier_sittings(before)
    earlier_peak = recorded_peak(before.get("peak_rss_mb"))
    if earlier_peak is not None:  # this sitting's replaces it if larger
        record["peak_rss_mb"] = earlier_peak
    return RunDir(path)


def earlier_sittings(before: dict) -> list[float | None]:
    """The seconds of each sitting the run.json `before` covers (its start and each resume),
    null for one that did not record its end: a process killed outright, or a run written before
    run.json counted sittings (its one elapsed_s, when it never resumed, is its first)."""
    count = 1 + len(before.get("resumed_utc") or [])
    known = before.get("sittings_s")
    if not isinstance(known, list):
        known = [before.get("elapsed_s")] if count == 1 else []
    known = [recorded_number(s) for s in known[:count]]
    return known + [None] * (count - len(known))


def probe_run_peaks(path: Path) -> list[int]:
    """The peak_rss_mb each probe run under a diagnose's `runs/` recorded, finished or not: the
    workers of a sitting that was killed before it could record its own."""
    peaks = []
    for run_json in Path(path).glob("runs/*/*/*/run.json"):
        try:
            record = read_json(run_json)
        except (FileRefused, OSError):
            continue
        peak = recorded_peak(record.get("peak_rss_mb")) if isinstance(record, dict) else None
        if peak is not None:
            peaks.append(peak)
    return peaks


def create(opts, model_id: str):
    try:
        return RunDir.create(Path(opts.out), "diagnose", model_id)
    except RunDirError as e:
        raise ProbeInputError(str(e)) from None
