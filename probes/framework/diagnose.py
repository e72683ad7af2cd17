"""`probe diagnose`: what the cache does for one model (or several), its effects side by side.

The suite is every registered probe whose `@probe(...)` gives `diagnose=N` (in that order), run
with its default parameters and the run options given; a `model_group` probe runs on the model
group (`--model` repeated, or the model's `-mem0` sibling when there is one). Without a group, or
when the geometry leaves it nothing to compare (`ProbeNotApplicable`), such a probe is left out
and `skipped` says why; with `--models`, a probe that does not apply to one of them (boundary
repair on a recurrent state) runs on the others, and `skipped` names the model it left out. Each probe turns its own summary into rows
(`diagnose_rows`); this module knows no probe by name.

Every probe is prepared first — inputs checked, each model loaded once, pairs built — so bad input
(a geometry one probe cannot use) is one line, exit 2, and no directory.

Everything lands in one run directory, `<out>/diagnose/<model-id>/<UTC-time>-<8 hex>/`:
`run.json` (provenance, options, the models), `summary.json` (the table's rows, every sub-run's
verdict and checks, relative paths), the figure its caller draws (`probe diagnose`: `diagnose.png`, the rows in nats as a forest
plot), and
`runs/<probe>/<model-id>/<run>/` — each probe's complete run directory. Exit code 1 when a probe
failed its own check.

`probes.framework.diagnose_models` (`--models A,B,…`) is the same suite on several models side
by side; both modes share every step defined here (`_options`, `_prepare`, `_record`,
`_execute`, `_rows`, `_close`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The run options diagnose takes (it runs every cache policy it needs itself, so no
# --reset/--carry, and the cached evaluator only, with its choice of memory); `model` may be a
# list: the group.
OPTIONS = (
    "model", "mem", "tgt_len", "clamp_len", "same_length", "n", "seed", "device", "dtype",
    "threads", "out", "quick", "language", "haystack", "haystack_documents", "tokenizer",
    "opening_token",
    "cache",
)  # fmt: skip

ROW_DOCS = {
    "value": "the row's number in its unit (see each probe's metric_docs for the definition)",
    "ci95": "95% interval: Student-t over pairs (rows with a paired test); bootstrap percentile "
    "over texts (lengths read off a sweep: a first-crossing c on its grid; descriptive, may "
    "under-cover with few texts)",
    "p_value": "two-sided Wilcoxon signed-rank p over pairs (no correction across rows)",
    "verdict": "significant | negligible | inconclusive with the row's margin (probes.stats; "
    "rows with a paired test only)",
    "margin": "the probe's minimum effect of interest, in the row's unit",
    "detail": "context from the same run",
}


def suite() -> list[str]:
    """The probes of `probe diagnose`, in row order (read without importing them)."""
    from probes.framework import registry

    entries = [e for e in registry.entries() if e.diagnose is not None]
    return [e.name for e in sorted(entries, key=lambda e: (e.diagnose, e.name))]


@dataclasses.dataclass
class _Run:
    """One probe run of the suite: `column` is the model it diagnoses (an index into the
    diagnosed models); None for the group run, which serves every column."""

    name: str
    plan: Any  # runner.Prepared
    column: int | None
    summary: dict | None = None

    def serves(self, column: int) -> bool:
        return self.column is None or self.column == column


def _ident(info: Any) -> dict[str, str]:
    return {"id": info.id, "path": info.path, "sha256": info.sha256}


def _options(skip, values: dict[str, Any]):
    """What both diagnose modes check first: --skip, the run options and --out."""
    from probes.framework import params as params_mod
    from probes.framework import registry
    from probes.framework.options import RunOptions
    from probes.framework.probe import ProbeInputError
    from probes.framework.ranks import Ranks
    from probes.framework.results import RunDirError, check_writable

    if Ranks.from_env().enabled:
        raise ProbeInputError(
            "probe diagnose runs in one process (its sweeps do not divide among processes); "
            "run it without torchrun, or run its paired probes one by one under torchrun"
        )
    names = suite()
    unknown = [s for s in skip if s not in names]
    if unknown:
        raise ProbeInputError(
            f"--skip {unknown[0]!r}: not a diagnose probe; choose from {', '.join(names)}"
        )
    extra = sorted(set(values) - set(OPTIONS))
    if extra:
        raise ProbeInputError(f"diagnose takes no option {extra[0]!r}; its options: {OPTIONS}")
    try:
        opts = RunOptions.build(values)
    except params_mod.ParamError as e:
        raise ProbeInputError(str(e)) from None
    try:
        check_writable(Path(opts.out))
    except RunDirError as e:
        raise ProbeInputError(str(e)) from None
    return {name: registry.get(name) for name in names}, opts


def _progress(progress: Any):
    from probes.framework.progress import Progress

    if progress is None or isinstance(progress, bool):
        return Progress.auto(quiet=progress is False)
    return progress


def _prepare(classes, skip, columns: list, group: list, opts, progress, argv, distance=None):
    """Every run of the suite, prepared (nothing written): each non-group probe once per column
    (a diagnosed model), the group probe once on `group`; `distance` (--distance) goes to every
    probe with distance bins. Returns (runs, skipped, the models of the columns a probe did not
    apply to)."""
    from probes.framework import runner
    from probes.framework.models import ModelCache, model_name
    from probes.framework.probe import ProbeInputError, ProbeNotApplicable

    models = ModelCache()
    common = {k: v for k, v in dataclasses.asdict(opts).items() if k in OPTIONS and k != "model"}
    runs: list[_Run] = []
    unserved: dict[int, Any] = {}  # column → its model, where a probe did not apply to it
    skipped = [name for name in classes if name in skip]
    for name, cls in classes.items():
        if name in skip:
            continue
        fields = {f.name for f in dataclasses.fields(cls.Params)}
        own = {"distance": distance} if distance is not None and "distance" in fields else {}
        if not cls.model_group:
            # a probe that does not apply to one model (a boundary probe on a recurrent state)
            # runs on the others; that model's column has no row of it
            mine, refused = [], []
            for j, source in enumerate(columns):
                try:
                    plan = runner.prepare(name, model=source, progress=progress, argv=argv,
                                          models=models, **own_options(common, source, opts),
                                          **own)  # fmt: skip
                except ProbeNotApplicable as e:
                    refused.append((model_name(source), e.reason))
                    if e.model is not None:
                        unserved[j] = e.model
                    continue
                mine.append(_Run(name, plan, j))
            if not mine:
                skipped.append(f"{name} ({refused[0][1]})")
                continue
            skipped += [f"{name} on {who} ({why})" for who, why in refused]
            runs += mine
        elif len(group) < 2:
            skipped.append(f"{name} (no model group)")
        else:
            try:
                plan = runner.prepare(
                    name, model=group, progress=progress, argv=argv, models=models, **common,
                    **own,
                )  # fmt: skip
            except ProbeNotApplicable as e:
                skipped.append(f"{name} ({e.reason})")
                continue
            runs.append(_Run(name, plan, None))
    if not runs:
        raise ProbeInputError(f"nothing left to run (skipped: {', '.join(skipped)}); skip fewer")
    return runs, skipped, unserved


def own_options(common: dict, source: Any, opts: Any) -> dict:
    """A column's run options: `common`, without `--mem` for a model scored by its state
    (`models.carries_state`)."""
    from probes.framework.models import carries_state

    return {**common, "mem": None} if carries_state(source, opts.evaluator) else common


def _column_model(runs: list[_Run], column: int, unserved: dict[int, Any]) -> Any:
    """The loaded LossModel of a column: from its own runs, else its place in the group run,
    else as loaded by a probe that did not apply to it."""
    own = next((r.plan.model for r in runs if r.column == column), None)
    if own is not None:
        return own
    group = next((r for r in runs if r.column is None), None)
    return group.plan.ctx.group[column] if group is not None else unserved[column]


def _record(opts, skip, argv, **fields: Any) -> dict[str, Any]:
    """run.json of a diagnose run: the options as given (`fields` add the models)."""
    from probes import __version__
    from probes.framework import provenance

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


def _execute(runs: list[_Run], run_dir: Any, progress: Any, keep: bool = False) -> None:
    """Run the suite into `run_dir/runs`; `keep` (a resumed run): a probe whose run an earlier
    attempt finished (`_finished`) is read back, not run again."""
    from probes.framework import runner

    for k, r in enumerate(runs):
        who = "" if r.column is None else f" · {r.plan.model.info.id}"
        done = _finished(r, run_dir.path / "runs") if keep else None
        if done is not None:
            progress.log(f"diagnose: {r.name}{who} ({k + 1}/{len(runs)}) kept from "
                         f"{os.path.relpath(done['run_dir'], run_dir.path)}")  # fmt: skip
            r.summary = done
            continue
        progress.log(f"diagnose: {r.name}{who} ({k + 1}/{len(runs)}) …")
        kept = _interrupted(r, run_dir.path / "runs") if keep else None
        if kept is not None:
            progress.log(f"diagnose: {r.name}{who} picks up {len(kept[1])} samples of "
                         f"{os.path.relpath(kept[0], run_dir.path)}")  # fmt: skip
        r.summary = runner.execute(r.plan, out=run_dir.path / "runs", kept=kept).to_dict()


# What may differ between two runs of the same measurement: where they were written and how
# many threads computed them.
_NOT_IDENTITY = ("out", "threads")


def _identity(name: str, version: Any, params: Any, options: dict, models: list, seen) -> str:
    """What makes two probe runs the same measurement. A change of the code within one probe
    version is not seen here but through `seen` (the geometry and horizon the run resolved),
    and a probe's version marks a change of what it measures."""
    from probes.framework.results import dumps

    kept = {k: v for k, v in options.items() if k not in _NOT_IDENTITY}
    return dumps({"probe": [name, version], "params": params, "options": kept, "models": models,
                  "seen": seen})  # fmt: skip


def _same_measurement(run: _Run, runs_dir: Path):
    """(path, status) of every run of this very probe run in `runs_dir`, oldest first: the
    same probe version, parameters, options (but --out and --threads) and model files."""
    from probes.framework import params as params_mod
    from probes.framework.results import read_json, safe_id, status
    from txl.files import FileRefused

    p = run.plan
    models = [m.info.sha256 for m in ([p.model, *p.ctx.group[1:]] if p.ctx.group else [p.model])]
    seen = [p.ctx.geometry.to_dict(), p.ctx.horizon.to_dict()]
    want = _identity(p.cls.name, p.cls.version, params_mod.to_dict(p.params),
                     p.options.record(), models, seen)  # fmt: skip
    for path in sorted((runs_dir / safe_id(p.cls.name) / safe_id(p.model.info.id)).glob("*")):
        try:
            rec = read_json(path / "run.json")
            shas = [rec["model"]["sha256"]] + [g["sha256"] for g in rec.get("group", [])[1:]]
            got = _identity(rec["probe"]["name"], rec["probe"]["version"], rec["params"],
                            rec["options"], shas, [rec["geometry"], rec["horizon"]])  # fmt: skip
            if got == want:
                yield path, status(path, rec)
        except (FileRefused, OSError, KeyError, TypeError):
            continue


def _finished(run: _Run, runs_dir: Path) -> dict | None:
    """The summary of a finished run (complete, or failed its own check) of this very probe
    run in `runs_dir`; None when there is none."""
    from probes.framework.results import read_json
    from txl.files import FileRefused

    for path, state in _same_measurement(run, runs_dir):
        if state in ("complete", "failed-check"):
            try:  # where it is now: the directory may have moved since
                return {**read_json(path / "summary.json"), "run_dir": str(path)}
            except (FileRefused, OSError):
                continue
    return None


def _interrupted(run: _Run, runs_dir: Path) -> tuple[Path, list[dict]] | None:
    """The newest interrupted (or killed) run of this very probe run in `runs_dir` and its
    samples, for a probe that resumes from them; None when there is none or it wrote none."""
    from probes.framework.results import load_samples
    from txl.files import FileRefused

    if not run.plan.cls.resumes_from_samples:
        return None
    stopped = [path for path, state in _same_measurement(run, runs_dir)
               if state in ("interrupted", "dead")]  # fmt: skip
    for path in reversed(stopped):
        try:
            samples = load_samples(path)
        except (FileRefused, OSError):
            continue
        if samples:
            return path, samples
    return None


def resumed_options(path: Path) -> dict[str, Any]:
    """The options of an unfinished diagnose run directory (its run.json), to finish it with
    `diagnose(resume=path, **options)`. ProbeInputError (one line) when it is not a diagnose
    run, a process still runs in it, or it finished."""
    from probes.framework.probe import ProbeInputError
    from probes.framework.results import read_json, status
    from txl.files import FileRefused

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
    if state == "running":
        raise ProbeInputError(f"--resume {str(path)!r}: a process still runs in it")
    if state in ("complete", "failed-check"):
        raise ProbeInputError(f"--resume {str(path)!r} finished ({state}): nothing to resume")
    given = record["options"]
    values = {k: given[k] for k in OPTIONS if k in given}
    values["out"] = str(Path(path).resolve().parents[2])  # <out>/diagnose/<model>/<run>: moved
    values["distance"] = None if given.get("distance", "auto") == "auto" else given["distance"]
    values["skip"] = tuple(given.get("skip", ()))
    return values


def _rows(runs: list[_Run], column: int, member: dict) -> list[dict]:
    """A column's rows in suite order; the group run's as `member` sees it. Each run's summary
    records its rows (`diagnose_rows`); a run written before it did gives them from its class."""
    from probes.framework.summary import member_view  # lazy: numpy (OPTIONS is on --help)

    out: list[dict] = []
    for r in runs:
        if not r.serves(column):
            continue
        recorded = r.summary.get("diagnose_rows")
        if recorded is None:
            view = r.summary if r.column is not None else member_view(r.summary, member)
            out += r.plan.cls.diagnose_rows(view)
        else:
            out += recorded if r.column is not None else recorded[member["id"]]
    return out


def _by_probe(runs: list[_Run], column: int, run_dir: Any) -> dict[str, dict]:
    """runs, verdicts and checks of the runs that serve a column, each keyed by probe."""
    served = [r for r in runs if r.serves(column)]
    return {
        "runs": {r.name: os.path.relpath(r.summary["run_dir"], run_dir.path) for r in served},
        "verdicts": {r.name: r.summary["verdict"] for r in served},
        "checks": {r.name: r.summary["checks"] for r in served},
    }


def _close(run_dir, record: dict, summary: dict, runs: list[_Run], t0: float, plot) -> dict:
    """summary.json and the finished run.json (inside `run_dir.recording`)."""
    summary["passed"] = all(r.summary["passed"] for r in runs)
    summary["elapsed_s"] = round(time.perf_counter() - t0, 3)
    summary["row_docs"] = ROW_DOCS
    summary["plots"] = [plot] if plot else []
    run_dir.write_json("summary.json", summary)
    run_dir.finish(record, passed=summary["passed"], elapsed_s=summary["elapsed_s"])
    return summary


def _reopen(path: Path, record: dict):
    """The run directory of a resumed diagnose, its run.json `record` keeping when it started
    and adding when it resumed; ProbeInputError when its models are not the files it began
    with."""
    from probes.framework.probe import ProbeInputError
    from probes.framework.results import RunDir, read_json

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
    return RunDir(path)


def _create(opts, model_id: str):
    from probes.framework.probe import ProbeInputError
    from probes.framework.results import RunDir, RunDirError

    try:
        return RunDir.create(Path(opts.out), "diagnose", model_id)
    except RunDirError as e:
        raise ProbeInputError(str(e)) from None


def diagnose(
    *,
    skip: tuple[str, ...] | list[str] = (),
    progress: Any = None,
    argv: list[str] | None = None,
    resume: str | Path | None = None,
    plot: Callable[[Path, dict], str | None] | None = None,
    **values: Any,
) -> dict[str, Any]:
    """Run the suite and return the summary (also written to the run directory). `values`: the
    run options of `OPTIONS`, and `distance`: the distance bins of every probe that has them
    (None: each probe's auto bins). `resume`: an unfinished diagnose run directory, given with
    its own options (`resumed_options`): the suite runs into it again, and every probe run it
    already finished is kept (a long real-model diagnose survives an interruption). `plot`
    draws the summary's figure into the run directory and returns its file name, which the
    summary lists (the CLI passes `probes.report.suite_plots.suite_plot`).

    Every probe is prepared (inputs checked, model loaded once, pairs planned) before the run
    directory is created: bad input raises ProbeInputError and leaves nothing behind."""
    from probes.framework.models import model_name, model_sources

    t0 = time.perf_counter()
    distance = values.pop("distance", None)
    classes, opts = _options(skip, values)
    group_cls = next((c for c in classes.values() if c.model_group), None)
    sources = model_sources(group_cls or next(iter(classes.values())), opts.model)
    progress = _progress(progress)
    runs, skipped, unserved = _prepare(
        classes, skip, sources[:1], sources, opts, progress, argv, distance
    )
    lm = _column_model(runs, 0, unserved)
    geometry = next(r.plan.ctx.geometry for r in runs if r.serves(0))
    grouped = [r for r in runs if r.column is None]
    infos = [m.info for m in (grouped[0].plan.ctx.group if grouped else [lm])]
    record = _record(
        opts,
        skip,
        argv,
        model=lm.info.to_dict(),
        group=[i.to_dict() for i in infos],
        geometry=geometry.to_dict(),
    )
    record["options"]["model"] = [model_name(s) for s in sources]
    record["options"]["distance"] = distance or "auto"
    run_dir = _create(opts, lm.info.id) if resume is None else _reopen(Path(resume), record)
    with run_dir.recording(record):
        progress.log(f"diagnose: run directory {run_dir.path}")
        _execute(runs, run_dir, progress, keep=resume is not None)
        rows = _rows(runs, 0, _ident(lm.info))
        summary = {
            "schema_version": 1,
            "command": "diagnose",
            "model": _ident(lm.info),
            "group": [_ident(i) for i in infos],
            "geometry": geometry.to_dict(),
            "rows": rows,
            **_by_probe(runs, 0, run_dir),
            "skipped": skipped,
            "run_dir": str(run_dir.path),
        }
        drawn = plot(run_dir.path, summary) if plot is not None else None
        return _close(run_dir, record, summary, runs, t0, drawn)
