"""`probe rerun RUN_DIR...`: repeat runs from their run.json and say whether the numbers match
(probes/rerun.py compares them).

One run directory reruns in this process, restarted first with the float kernels the run was
recorded with (probes/cli/restart.py). A directory without run.json stands for every run
directory beneath it (`probe rerun results/curated/*/`), and several runs each rerun in a
`probe rerun RUN_DIR --json` process of their own, since each takes its own recorded kernels;
the command then prints one line per run and exits 1 when any differs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click

from probes.cli.diagnose import JOBS, worker_command
from probes.cli.errors import EXIT_CHECK, EXIT_OK, BadInput, emit
from probes.cli.restart import kernels_for

RECORD = "run.json"


@click.command("rerun")
@click.argument("paths", nargs=-1, required=True, type=click.Path(), metavar="RUN_DIR...")
@click.option(
    "--out",
    default=None,
    metavar="DIR",
    help="Where the new runs go (never where run.json says: a run directory may come from "
    "anyone). [default: results]",
)
@click.option(
    "--kernels",
    type=click.Choice(["portable", "native"]),
    default=None,
    help="Compute with these CPU float kernels instead of the recorded ones: what they change, "
    "or a run recorded again under them. [default: the recorded ones]",
)
@click.option(
    "--resume",
    default=None,
    metavar="DIR",
    help="Finish the run an interrupted rerun of RUN_DIR left in DIR (with the options and "
    "kernels it began with, keeping what it scored), then compare.",
)
@JOBS
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option("--quiet", is_flag=True, help="No progress or logs on stderr.")
@click.option(
    "--allow-file-probes",
    is_flag=True,
    help="Import the probe file a run.json names (it runs that file's code).",
)
def rerun_command(
    paths: tuple[str, ...],
    out: str | None,
    kernels: str | None,
    resume: str | None,
    jobs: int,
    as_json: bool,
    quiet: bool,
    allow_file_probes: bool,
) -> None:
    """Repeat runs from their run.json and say whether the numbers match (exit 1 if any do
    not). A directory without run.json stands for every run directory beneath it."""
    runs = run_directories(paths)
    if resume is not None:
        _check_resume(runs, out, kernels, resume)
    if len(runs) == 1:
        _rerun_here(runs[0], out, kernels, as_json, quiet, allow_file_probes, resume, jobs)
        return
    flags = [*(["--out", out] if out is not None else []), "--json", "--quiet"]
    flags += ["--kernels", kernels] if kernels is not None else []
    flags += ["--allow-file-probes"] if allow_file_probes else []
    spread = ["--jobs", str(jobs)] if jobs > 1 else []  # the one-model diagnoses among them
    results = []
    for i, run in enumerate(runs, 1):
        if not (quiet or as_json) and sys.stderr.isatty():
            click.echo(f"rerun {i}/{len(runs)}: {run}", err=True)
        results.append(_rerun_apart(run, flags + (spread if spread and _spreads(run) else [])))
    from probes.report.tables import print_reruns

    doc = {"reruns": results, "passed": all(r["passed"] for r in results)}
    emit(doc, as_json=as_json, show=print_reruns, passed=doc["passed"])


def run_directories(paths: tuple[str, ...]) -> list[Path]:
    """The run directories `paths` name, each once: a directory with a run.json, or every run
    directory beneath one without (not descending into a run directory: a diagnose run's
    sub-runs are its own; symbolic links are not followed). Among several paths one that holds
    no run directory (`results/curated/*/` takes in `paper/`) is passed over with a line on
    stderr; BadInput for a path that does not exist, a directory that cannot be read, or when
    no run directory is left."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if not path.exists() and not path.is_symlink():
            raise BadInput(f"{given!r} does not exist; give a run directory or one above such")
        if (path / RECORD).exists() or (path / RECORD).is_symlink() or not path.is_dir():
            found.append(path)  # load_run says what is wrong with a bad one
            continue
        beneath, links = _beneath(path)
        if beneath:
            found += beneath
            continue
        why = f"{given!r} holds no run directory (a directory with a run.json)"
        why += f"; {links} symbolic link(s) not followed" if links else ""
        if len(paths) == 1:
            raise BadInput(f"{why}; give one that `probe run` or `probe diagnose` wrote")
        click.echo(f"passed over: {why}", err=True)
    if not found:
        raise BadInput("none of the paths holds a run directory; give one with a run.json")
    return list(dict.fromkeys(found))


def _beneath(path: Path) -> tuple[list[Path], int]:
    """(the run directories beneath `path`, sorted; how many symbolic links to directories were
    not followed). BadInput for a directory that cannot be read."""

    def refuse(e: OSError) -> None:
        raise BadInput(f"{e.filename!r} cannot be read ({e.strerror}); give a readable directory")

    runs, links = [], 0
    for top, dirs, files in os.walk(path, onerror=refuse):
        if RECORD in files:
            runs.append(Path(top))
            dirs.clear()
        links += sum((Path(top) / d).is_symlink() for d in dirs)
        dirs.sort()
    return sorted(runs), links


def _check_resume(runs: list[Path], out: str | None, kernels: str | None, resume: str) -> None:
    """`--resume DIR` finishes one rerun where it began, with the kernels it began with."""
    if len(runs) != 1:
        raise BadInput(f"--resume finishes one rerun; give one RUN_DIR, not {len(runs)}")
    if out is not None:
        raise BadInput("--resume finishes the rerun where it began (beside it); drop --out")
    if kernels is not None:
        raise BadInput("--resume computes with the kernels the rerun began with; drop --kernels")


def _rerun_here(
    run_dir: Path,
    out: str | None,
    kernels: str | None,
    as_json: bool,
    quiet: bool,
    allow_file_probes: bool,
    resume: str | None = None,
    jobs: int = 1,
) -> None:
    """One rerun in this process, under the kernels the run recorded (or `kernels`, or those
    of the rerun it `resume`s); a diagnose's probes `jobs` at once."""
    from probes.api.probe_base import ProbeInputError
    from probes.framework.progress import Progress
    from probes.framework.results import (
        RunDirError,
        load_run,
    )

    try:
        record, _ = load_run(run_dir if resume is None else Path(resume))
    except RunDirError as e:
        raise BadInput(str(e)) from None
    options = record.get("options")
    # a run recorded before the choice existed computed with each library's native kernels
    recorded = options.get("kernels") if isinstance(options, dict) else None
    kernels_for(kernels or (recorded if recorded in ("portable", "native") else "native"))

    from probes.report.suite_plots import suite_plot
    from probes.report.tables import print_rerun
    from probes.rerun import rerun

    try:
        result = rerun(
            run_dir,
            out=out,
            progress=Progress.auto(quiet or as_json),
            allow_file_probes=allow_file_probes,
            plot=suite_plot,
            kernels_mode=kernels,
            resume=None if resume is None else Path(resume),
            jobs=jobs,
            worker=worker_command,
        )
    except (ProbeInputError, RunDirError) as e:
        raise BadInput(str(e)) from None
    emit(result, as_json=as_json, show=print_rerun, passed=result["passed"])


def _spreads(run_dir: Path) -> bool:
    """Whether `--jobs` applies to the run in `run_dir` (`probes.rerun.spreads`; a file that
    cannot be read: no, and its own rerun says why)."""
    from probes.framework.results import RunDirError, load_run
    from probes.rerun import spreads

    try:
        record, _ = load_run(run_dir)
    except RunDirError:
        return False
    return spreads(record)


def _rerun_apart(run_dir: Path, flags: list[str]) -> dict:
    """One rerun in a `probe rerun RUN_DIR --json` process of its own: its result, or for a
    directory that process refused, `match` "refused" and its one-line reason as `error`."""
    argv = [sys.executable, "-m", "probes.cli", "rerun", str(run_dir), *flags]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode in (EXIT_OK, EXIT_CHECK):
        try:
            return json.loads(done.stdout)
        except json.JSONDecodeError:
            pass
    lines = (done.stderr or done.stdout).strip().splitlines()
    reason = lines[-1] if lines else f"exit {done.returncode}"
    return {"original": str(run_dir), "match": "refused", "error": reason, "passed": False}
