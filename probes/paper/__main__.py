"""`python -m probes.paper [--out DIR] [--quick]`: measure, write the tables, print them."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--out",
    default="results/curated/paper",
    show_default=True,
    help="The directory to (re)write: the tables, paper.json, plots and the probe runs.",
)
@click.option("--quick", is_flag=True, help="Fewer texts and lengths: a smoke run, not figures.")
@click.option("--threads", type=click.IntRange(min=1, max=256), default=None, help="torch threads.")
def main(out: str, quick: bool, threads: int | None) -> None:
    """The paper's Tables 6–9 on the synthetic language (probes/paper/__init__.py)."""
    from probes.adapters.txl import threads as torch_threads
    from probes.paper import render
    from probes.paper.run import measure

    target = Path(out)
    if target.exists() and not target.is_dir():
        click.echo(f"error: --out {out} is a file; expected a directory to write", err=True)
        sys.exit(2)
    staged = target.with_name(f".{target.name}.partial")  # never half a directory in place
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    log = lambda msg: click.echo(msg, err=True)  # noqa: E731
    with torch_threads(threads):
        result = measure(staged, quick=quick, log=log)
    parts = render.write(result, staged)
    shutil.rmtree(target, ignore_errors=True)
    staged.rename(target)
    for text in parts.values():
        click.echo(text)
    click.echo("claims:")
    for claim, word in render.claims_summary(result):
        click.echo(f"  {word:14s} {claim}")
    click.echo(f"written: {target} ({result['timings_s']['total']:.0f} s)")


if __name__ == "__main__":
    main()
