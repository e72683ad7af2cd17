"""`probe diagnose`: what the cache does for one model, its effects side by side.

The suite is every registered probe whose `@probe(...)` gives `diagnose=N` (in that order), run
with its default parameters and the run options given; a `model_group` probe runs on the model
group (`--model` repeated, or the model's `-mem0` sibling when there is one). Without a group, or
when the geometry leaves it nothing to compare (`ProbeNotApplicable`), such a probe is left out
and `skipped` says why. Each probe turns its own summary into rows
(`diagnose_rows`); this module knows no probe by name.

Every probe is prepared first — inputs checked, each model loaded once, pairs built — so bad input
(a geometry one probe cannot use) is one line, exit 2, and no directory.

Everything lands in one run directory, `<out>/diagnose/<model-id>/<UTC-time>-<8 hex>/`:
`run.json` (provenance, options, the models), `summary.json` (the table's rows, every sub-run's
verdict and checks, relative paths), `diagnose.png` (the rows in nats as a forest plot), and
`runs/<probe>/<model-id>/<run>/` — each probe's complete run directory. Exit code 1 when a probe
failed its own check.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

# The run options diagnose takes (it runs every cache policy it needs itself, so no
# --reset/--carry, and the cached evaluator only); `model` may be a list: the group.
OPTIONS = (
    "model", "mem", "tgt_len", "clamp_len", "same_length", "n", "seed", "device", "dtype",
    "threads", "out", "quick", "language",
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


def diagnose(
    *,
    skip: tuple[str, ...] | list[str] = (),
    progress: Any = None,
    argv: list[str] | None = None,
    **values: Any,
) -> dict[str, Any]:
    """Run the suite and return the summary (also written to the run directory). `values`: the
    run options of `OPTIONS`.

    Every probe is prepared (inputs checked, model loaded once, pairs planned) before the run
    directory is created: bad input raises ProbeInputError and leaves nothing behind."""
    from probes.framework import params as params_mod
    from probes.framework import registry, runner
    from probes.framework.models import ModelCache, model_sources
    from probes.framework.options import RunOptions
    from probes.framework.probe import ProbeInputError, ProbeNotApplicable
    from probes.framework.progress import Progress
    from probes.framework.results import RunDir, RunDirError, check_writable

    t0 = time.perf_counter()
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
    classes = {name: registry.get(name) for name in names}
    group_cls = next((c for c in classes.values() if c.model_group), None)
    sources = model_sources(group_cls or classes[names[0]], opts.model)
    if progress is None or isinstance(progress, bool):
        progress = Progress.auto(quiet=progress is False)

    # ------------------------------------------------------------ prepare all, nothing written
    models = ModelCache()
    common = {k: v for k, v in dataclasses.asdict(opts).items() if k in OPTIONS and k != "model"}
    prepared: dict[str, runner.Prepared] = {}
    skipped = [name for name in names if name in skip]
    for name, cls in classes.items():
        if name in skip:
            continue
        if not cls.model_group:
            prepared[name] = runner.prepare(
                name, model=sources[0], progress=progress, argv=argv, models=models, **common
            )
        elif len(sources) < 2:
            skipped.append(f"{name} (no model group)")
        else:
            try:
                prepared[name] = runner.prepare(
                    name, model=sources, progress=progress, argv=argv, models=models, **common
                )
            except ProbeNotApplicable as e:
                skipped.append(f"{name} ({e.reason})")
    if not prepared:
        raise ProbeInputError(f"nothing left to run (skipped: {', '.join(skipped)}); skip fewer")
    first = next(iter(prepared.values()))
    lm, geometry = first.model, first.ctx.geometry
    grouped = [p for p in prepared.values() if p.ctx.group]
    infos = [m.info for m in (grouped[0].ctx.group if grouped else [lm])]
    try:
        run_dir = RunDir.create(Path(opts.out), "diagnose", lm.info.id)
    except RunDirError as e:
        raise ProbeInputError(str(e)) from None

    # ------------------------------------------------------------ the run
    from probes import __version__
    from probes.framework import provenance
    from probes.framework.models import model_name

    recorded = {k: v for k, v in opts.record().items() if k in OPTIONS}
    recorded["model"] = [model_name(s) for s in sources]
    recorded["skip"] = list(skip)
    record = {
        "schema_version": 1,
        "status": "running",
        "command": "diagnose",
        "argv": provenance.portable_argv(argv),
        "options": recorded,
        "model": lm.info.to_dict(),
        "group": [i.to_dict() for i in infos],
        "geometry": geometry.to_dict(),
        "git": provenance.git_state(),
        "package_version": __version__,
        "versions": provenance.versions(),
        "machine": provenance.machine(),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    summaries: dict[str, dict] = {}
    with run_dir.recording(record):
        progress.log(f"diagnose: run directory {run_dir.path}")
        for k, (name, plan) in enumerate(prepared.items()):
            progress.log(f"diagnose: {name} ({k + 1}/{len(prepared)}) …")
            summaries[name] = runner.execute(plan, out=run_dir.path / "runs").to_dict()
        rows = [row for name, s in summaries.items() for row in classes[name].diagnose_rows(s)]
        summary = {
            "schema_version": 1,
            "command": "diagnose",
            "model": {"id": lm.info.id, "path": lm.info.path, "sha256": lm.info.sha256},
            "group": [{"id": i.id, "path": i.path, "sha256": i.sha256} for i in infos],
            "geometry": geometry.to_dict(),
            "rows": rows,
            "runs": {
                name: os.path.relpath(s["run_dir"], run_dir.path) for name, s in summaries.items()
            },
            "verdicts": {name: s["verdict"] for name, s in summaries.items()},
            "checks": {name: s["checks"] for name, s in summaries.items()},
            "passed": all(s["passed"] for s in summaries.values()),
            "skipped": skipped,
            "run_dir": str(run_dir.path),
            "elapsed_s": round(time.perf_counter() - t0, 3),
            "row_docs": ROW_DOCS,
        }
        from probes.report.diagnose import forest_plot

        plot = forest_plot(run_dir.path / "diagnose.png", rows, lm.info.id, geometry)
        summary["plots"] = [plot] if plot else []
        run_dir.write_json("summary.json", summary)
        run_dir.finish(record, passed=summary["passed"], elapsed_s=summary["elapsed_s"])
        return summary
