"""`probe report RUN_DIR...`: finished runs, one table or side by side."""

from __future__ import annotations

import dataclasses

import click

from probes.api import registry
from probes.cli.errors import BadInput


@click.command("report")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def report_command(run_dirs: tuple[str, ...], as_json: bool) -> None:
    """Show finished runs side by side: one run's table, or several (say --mem 128 and 640).
    Runs that did not finish (still running, interrupted, dead) are left out and listed."""
    from probes.framework.results import (
        FINISHED,
        RunDirError,
        load_run,
        status,
    )

    summaries, shown, skipped = [], [], []
    for d in run_dirs:
        try:
            run_json, summary = load_run(d)
        except RunDirError as e:
            raise BadInput(str(e)) from None
        if run_json.get("status") not in FINISHED:
            skipped.append(f"{d} ({status(d, run_json)})")
            continue
        if summary is None:  # finished by its run.json, yet its result is gone
            skipped.append(
                f"{d} (run.json says {run_json.get('status')}, but summary.json is missing)"
            )
            continue
        summaries.append(summary)
        shown.append(d)
    if not summaries:
        raise BadInput(
            f"no finished run among {', '.join(skipped)}; give the directory of a finished run "
            "(its run.json and summary.json, as `probe run` leaves them)"
        )
    if skipped:
        click.echo(f"skipped (not finished): {', '.join(skipped)}", err=True)
    run_dirs = tuple(shown)
    if as_json:
        from probes.framework.results import print_json

        print_json({"runs": summaries})
        return
    from probes.report.tables import (
        print_side_by_side,
        print_summary,
    )

    diagnosed = [s for s in summaries if s.get("command") == "diagnose"]
    if diagnosed:  # `probe diagnose` run directories: their table, one after the other
        from probes.report.suite_table import print_table

        if len(diagnosed) != len(summaries):
            raise BadInput("give either probe runs or diagnose runs to compare, not both")
        for s in diagnosed:
            print_table(s)
        return
    summaries = [with_columns(s) for s in summaries]
    if len(summaries) == 1:
        print_summary(summaries[0])
    else:
        print_side_by_side(summaries, list(run_dirs))


def with_columns(summary: dict) -> dict:
    """A summary with its probe's table columns: a run written before summary.json recorded
    `columns` gets them from the probe class, when this installation has that probe."""
    if "columns" in summary:
        return summary
    try:
        columns = registry.get(summary["probe"]).columns
    except (registry.RegistryError, KeyError, AttributeError):
        return summary
    return {**summary, "columns": [dataclasses.asdict(c) for c in columns]}
