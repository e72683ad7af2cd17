"""`probe diagnose`: what the cache does for one model, its effects side by side.

The suite (`plan.suite`) is every registered probe whose `@probe(...)` gives `diagnose=N` (in
that order), run with its default parameters and the run options given; a `model_group` probe
runs on the model group (`--model` repeated, or the model's `-mem0` sibling when there is one).
Without a group, or when the geometry leaves it nothing to compare (`ProbeNotApplicable`), such
a probe is left out and `skipped` says why. Each probe turns its own summary into rows
(`diagnose_rows`); the suite knows no probe by name.

Every probe is prepared first, so bad input (a geometry one probe cannot use) is one line, exit
2, and no directory.

Everything lands in one run directory, `<out>/diagnose/<model-id>/<UTC-time>-<8 hex>/`:
`run.json` (provenance, options, the models, what each probe run's 'auto' parameters stood
for), `summary.json` (the table's rows, every sub-run's verdict and checks, relative paths), the
figure its caller draws (`probe diagnose`: `diagnose.png`, the rows in nats as a forest plot),
and `runs/<probe>/<model-id>/<run>/`, each probe's complete run directory. Exit code 1 when a
probe failed its own check.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from probes.api.probe_base import ProbeInputError
from probes.framework.models import model_name, model_sources
from probes.framework.results import RunDir
from probes.suite.execute import resolve_progress, run_suite
from probes.suite.parallel import Worker, check_memory, left_to_run, run_parallel
from probes.suite.plan import check_options, column_model, ident, prepare, require_runs, suite
from probes.suite.rows import by_probe, column_rows
from probes.suite.store import auto_of, close, create, probe_auto, reopen, start_record
from txl.process_rank import default_threads


def diagnose(
    *,
    skip: tuple[str, ...] | list[str] = (),
    progress: Any = None,
    argv: list[str] | None = None,
    resume: str | Path | None = None,
    plot: Callable[[Path, dict], str | None] | None = None,
    pinned_auto: dict | None = None,
    jobs: int = 1,
    worker: Worker | None = None,
    **values: Any,
) -> dict[str, Any]:
    """Run the suite and return the summary (also written to the run directory). `values`: the
    run options of `OPTIONS`, and `distance`: the distance bins of every probe that has them
    (None: each probe's auto bins). `resume`: an unfinished diagnose run directory, given with
    its own options (`resumed_options`): the suite runs into it again, and every probe run it
    already finished is kept (a long real-model diagnose survives an interruption). `plot`
    draws the summary's figure into the run directory and returns its file name, which the
    summary lists (the CLI passes `probes.report.suite_plots.suite_plot`). `pinned_auto`: what
    the 'auto' parameters of each probe run stand for ((probe, column) → text; a rerun's).
    `jobs` > 1: up to that many probe runs at once, each in a `worker` process
    (probes.suite.parallel; the CLI's `probe diagnose --resume DIR --only PROBE`), each at
    --threads, which then defaults to this process's share of the cores.

    Every probe is prepared (inputs checked, model loaded once, pairs planned) before the run
    directory is created: bad input raises ProbeInputError and leaves nothing behind."""
    t0 = time.perf_counter()
    distance = values.pop("distance", None)
    if jobs > 1:
        if worker is None:
            raise ValueError("diagnose(jobs > 1) needs the worker command that runs one probe")
        if values.get("threads") is None:  # the cores shared out, recorded as if given
            values["threads"] = max(1, default_threads() // jobs)
    classes, opts = check_options(skip, values)
    group_cls = next((c for c in classes.values() if c.model_group), None)
    sources = model_sources(group_cls or next(iter(classes.values())), opts.model)
    progress = resolve_progress(progress)
    runs, skipped, unserved = prepare(
        classes, skip, sources[:1], sources, opts, progress, argv, distance, pinned_auto
    )
    require_runs(runs, skipped)
    lm = column_model(runs, 0, unserved)
    geometry = next(r.plan.ctx.geometry for r in runs if r.serves(0))
    grouped = [r for r in runs if r.column is None]
    infos = [m.info for m in (grouped[0].plan.ctx.group if grouped else [lm])]
    record = start_record(
        opts,
        skip,
        argv,
        model=lm.info.to_dict(),
        group=[i.to_dict() for i in infos],
        geometry=geometry.to_dict(),
        auto=auto_of(runs, 0),
    )
    record["options"]["model"] = [model_name(s) for s in sources]
    record["options"]["distance"] = distance or "auto"
    if jobs > 1:
        left = left_to_run(runs, None if resume is None else Path(resume))
        check_memory(min(jobs, len(left)), lm, geometry)
    run_dir = create(opts, lm.info.id) if resume is None else reopen(Path(resume), record)
    with run_dir.recording(record, began=t0):
        progress.log(f"diagnose: run directory {run_dir.path}")
        if jobs > 1:
            run_parallel(runs, run_dir, progress, jobs, worker, keep=resume is not None)
        else:
            run_suite(runs, run_dir, progress, keep=resume is not None)
        rows = column_rows(runs, 0, ident(lm.info))
        summary = {
            "schema_version": 1,
            "command": "diagnose",
            "model": ident(lm.info),
            "group": [ident(i) for i in infos],
            "geometry": geometry.to_dict(),
            "rows": rows,
            **by_probe(runs, 0, run_dir),
            "skipped": skipped,
            "run_dir": str(run_dir.path),
        }
        drawn = plot(run_dir.path, summary) if plot is not None else None
        return close(run_dir, record, summary, runs, t0, drawn)


def diagnose_probe(
    path: str | Path,
    name: str,
    *,
    progress: Any = None,
    argv: list[str] | None = None,
    **values: Any,
) -> dict[str, Any]:
    """Run one probe of the diagnose in `path` into its `runs/` (`values`: the options it
    recorded, `resumed_options(path, beside=True)`): what a worker of `--jobs` does, and a way
    to spread a diagnose over machines that share its directory. A run of it an earlier
    attempt finished is kept, an interrupted one picked up, as a resumed diagnose does; the
    'auto' parameters stand for what the diagnose recorded. Writes nothing of the diagnose's
    own files (its `--resume` assembles them). Returns the probe run's summary."""
    path = Path(path)
    skip = tuple(values.pop("skip", ()))
    if name not in suite():
        raise ProbeInputError(
            f"--only {name!r}: not a diagnose probe; choose from {', '.join(suite())}"
        )
    if name in skip:
        raise ProbeInputError(f"--only {name!r}: this diagnose skips it; name another probe")
    distance = values.pop("distance", None)
    others = tuple(n for n in suite() if n != name)
    classes, opts = check_options(others, values)
    group_cls = next((c for c in classes.values() if c.model_group), None)
    sources = model_sources(group_cls or classes[name], opts.model)
    progress = resolve_progress(progress)
    auto = probe_auto(path, name)
    pinned = None if auto is None else {(name, 0): auto}
    runs, skipped, _ = prepare(
        classes, others, sources[:1], sources, opts, progress, argv, distance, pinned
    )
    if not runs:  # not applicable to this model, or a group probe without its group
        raise ProbeInputError(
            f"--only {name!r}: this diagnose leaves it out: {skipped[-1]}; name a probe it runs"
        )
    run_suite(runs, RunDir(path), progress, keep=True)
    return runs[0].summary
