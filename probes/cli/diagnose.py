"""`probe diagnose`: the effects of the cache side by side (probes/suite/ does the work).
Imports nothing heavy at module level: `probe --help` stays instant."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from probes.cli.errors import BadInput, emit
from probes.cli.restart import kernels_for
from probes.framework.options import RunOptions, output_options
from probes.suite.plan import OPTIONS

# `probe diagnose --jobs` and `probe rerun --jobs` (a diagnose's rerun)
JOBS = click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    metavar="N",
    help="Run up to N probes of a diagnose at once, each in a process of its own at its thread "
    "count (a new diagnose without --threads: the cores shared out among the N): the numbers "
    "one process gives at that count, bit for bit, in less time on a machine with cores to "
    "spare. Not with --models (rerun of several runs: their one-model diagnoses).",
)


@click.command(
    "diagnose", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.option(
    "--models",
    default=None,
    metavar="A,B,…",
    help="Diagnose several models side by side (a comma list of what --model takes, at least "
    "two): a column per model, RECL once over them all as its group. Not with --model.",
)
@click.option(
    "--distance",
    default=None,
    metavar="LO-HI,…",
    help="Distance bins (e.g. 16-64,700-900) for every probe of the suite that has them, each "
    "reading them as its own --distance does: fact-swap and fact-rebind from the fact to the "
    "answer, fact-update from the stale statement to the answer, topic-shift from the replaced "
    "region to the scored window, cross-doc from A's fact to the document boundary. Recorded "
    "in run.json. [default: each probe's auto bins]",
)
@click.option(
    "--skip",
    multiple=True,
    metavar="PROBE",
    help="Leave a probe of the suite out (repeatable).",
)
@click.option(
    "--resume",
    default=None,
    metavar="RUN_DIR",
    help="Finish an interrupted diagnose run directory with the options it recorded: the probe "
    "runs it finished are kept, the others run again, at the thread count it recorded. Takes "
    "no other option (--threads only where the run recorded no count).",
)
@JOBS
@click.option(
    "--only",
    default=None,
    metavar="PROBE",
    help="With --resume: run just this probe of the diagnose into its directory, even while "
    "another process works in it (what --jobs starts for each probe; also a way to spread a "
    "diagnose over machines sharing the directory). A later --resume assembles the table.",
)
def diagnose_command(
    as_json: bool,
    quiet: bool,
    models: str | None,
    distance: str | None,
    skip: tuple[str, ...],
    resume: str | None,
    jobs: int,
    only: str | None,
    **values,
) -> None:
    """Boundary repair, retrieval, topic adaptation, stale state and effective context of one
    model (or several: --models), in one table with 95% intervals; writes one run directory with
    every probe's run.

    \b
    The suite: every probe that declares diagnose rows (`probe list` names them all), each with
    its default parameters. --model repeated gives the model group of a group probe (RECL; the
    first is the model diagnosed; default: the model and its -mem0 sibling); without a group, or
    at --mem 0 (one context only), RECL is left out with the reason.

    \b
    --models default,default-mem0,… diagnoses each model with the same options and seed: one
    table (a row per effect, a column per model), one plot (diagnose_models.png) and one run
    directory <out>/diagnose/<id1>+<id2>+…/; RECL runs once with the models as its group.
    """
    from probes.api.probe_base import ProbeInputError
    from probes.framework.models import split_models
    from probes.framework.progress import Progress
    from probes.report.suite_plots import suite_plot
    from probes.report.suite_table import print_table
    from probes.report.tables import print_summary
    from probes.suite.one import diagnose
    from probes.suite.several import diagnose_models

    values["model"] = list(values["model"]) or None
    values["haystack"] = list(values["haystack"]) or None
    progress = Progress.auto(quiet or as_json)
    values["distance"] = distance
    if only is not None and resume is None:
        raise BadInput("--only runs one probe of a diagnose directory; give it --resume RUN_DIR")
    if only is not None and jobs > 1:
        raise BadInput("--only runs one probe; drop --jobs")
    if models is not None and jobs > 1:
        raise BadInput("--jobs runs the probes of one model's diagnose side by side; drop it "
                       "with --models")  # fmt: skip
    if resume is None:  # a resumed run takes its recorded kernels (_resume)
        values["kernels"] = kernels_for(values.get("kernels"))
    try:
        if only is not None:
            summary = _only(resume, only, values["threads"], progress)
        elif resume is not None:
            summary = _resume(resume, values["threads"], progress, jobs)
        elif models is None:
            summary = diagnose(
                skip=skip, progress=progress, argv=list(sys.argv), plot=suite_plot,
                jobs=jobs, worker=worker_command, **values,
            )  # fmt: skip
        else:
            summary = diagnose_models(
                split_models(models),
                skip=skip,
                progress=progress,
                argv=list(sys.argv),
                plot=suite_plot,
                **values,
            )
    except ProbeInputError as e:
        raise BadInput(str(e)) from None
    show = print_table if only is None else print_summary  # --only: the probe run's summary
    emit(summary, as_json=as_json, show=show, passed=summary["passed"])


def worker_command(path: Path, probe: str, quiet: bool) -> list[str]:
    """The process `--jobs` starts for each probe: `probe diagnose --resume DIR --only PROBE`."""
    command = [sys.executable, "-m", "probes.cli", "diagnose", "--resume", str(path)]
    return command + ["--only", probe] + (["--quiet"] if quiet else [])


def _resume(path: str, threads: int | None, progress, jobs: int = 1):
    """`--resume RUN_DIR`: the recorded options (the thread count too), refusing any other."""
    from probes.report.suite_plots import suite_plot
    from probes.suite.one import diagnose

    values = _recorded(path, threads)
    skip = values.pop("skip")
    return diagnose(
        skip=skip, progress=progress, argv=list(sys.argv), resume=path, plot=suite_plot,
        jobs=jobs, worker=worker_command, **values,
    )  # fmt: skip


def _only(path: str, probe: str, threads: int | None, progress) -> dict:
    """`--resume RUN_DIR --only PROBE`: that probe's run, with the recorded options."""
    from probes.suite.one import diagnose_probe
    from probes.suite.parallel import follow_parent

    values = _recorded(path, threads, beside=True)  # may restart the process for its kernels
    follow_parent()
    return diagnose_probe(path, probe, progress=progress, argv=list(sys.argv), **values)


def _recorded(path: str, threads: int | None, beside: bool = False) -> dict:
    """The options a resumed diagnose recorded (`resumed_options`), refusing any other option
    given (--threads only where the run recorded no count), its kernels made this process's."""
    from probes.api.probe_base import ProbeInputError
    from probes.suite.store import resumed_options

    ctx = click.get_current_context()
    given = [
        p.opts[0]
        for p in ctx.command.params
        if p.name not in ("resume", "threads", "as_json", "quiet", "jobs", "only")
        and ctx.get_parameter_source(p.name) == click.core.ParameterSource.COMMANDLINE
    ]
    if given:
        raise ProbeInputError(
            f"--resume takes the options recorded in its run.json; drop {given[0]}"
        )
    values = resumed_options(Path(path), beside=beside)
    recorded = values.get("threads")
    if threads is not None and recorded is not None and threads != recorded:
        # every probe of one run computes at one count: run.json records one, and a product's
        # last bits may depend on it (a rerun would not repeat the probes resumed at another)
        raise ProbeInputError(
            f"--threads {threads}: this run computed with {recorded} thread"
            f"{'s' if recorded != 1 else ''} and its remaining probes must too; drop --threads"
        )
    values["kernels"] = kernels_for(values.get("kernels") or "native")  # as it started
    if recorded is None:  # an old run whose finished probes agree on no count: given, or ours
        values["threads"] = threads
    return values


diagnose_command.params.extend(
    RunOptions.click_options(only=OPTIONS, multiple=("model", "haystack"))
)
diagnose_command.params.extend(output_options())
