"""`python -m probes.paper [--out DIR] [--quick]`: measure, write the tables, print them.

The directory is written whole or not at all (`txl.io.replace_dir`), and only over what this
command writes: --out must be new, empty, or a paper directory (`is_paper_dir`); anything else
is refused before measuring (exit 2, one line), as are the working directory and its parents.
Errors are the `probe` command's (probes.cli.errors): one line, exit 2 for bad input."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import click

from probes.adapters.txl import threads as torch_threads
from probes.api.params import number_type
from probes.cli.errors import BadInput
from probes.cli.main import OneLineErrors
from probes.limits import MAX_THREADS
from probes.paper import render
from probes.paper.measure import measure
from txl.io import replace_dir

DEFAULT_OUT = "results/curated/paper"
# the machine refusing the write (full, over quota, read-only, denied): bad input, not a bug
WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOENT}
# what `render.write` and the probe runs put in a paper directory, and nothing else
PAPER_ENTRIES = re.compile(
    r"(table[6-9]|layered|paper)\.md|paper\.json|loss_by_length\.png|recl_curves_r[\d.]+\.png|runs"
)


def is_paper_dir(path: Path) -> bool:
    """Whether `path` holds a paper directory this command wrote: paper.json, and every entry one
    that it writes (a file of anyone else's is not its to replace)."""
    names = [p.name for p in path.iterdir()]
    return "paper.json" in names and all(PAPER_ENTRIES.fullmatch(n) for n in names)


def check_out(out: str) -> Path:
    """The directory to (re)write, or BadInput (one line) when it may not be replaced."""
    if not out.strip():
        raise BadInput(f"--out {out!r} is empty; give a directory (default: {DEFAULT_OUT})")
    target = Path(os.path.abspath(out))
    here = Path.cwd()
    if target == here or target in here.parents:
        raise BadInput(
            f"--out {out!r} is the working directory or one above it, which this command would "
            "replace; give a directory of its own, e.g. --out paper"
        )
    if target.exists() or target.is_symlink():
        if not target.is_dir() or target.is_symlink():
            what = "a file" if target.is_file() and not target.is_symlink() else "not a directory"
            raise BadInput(f"--out {out!r} is {what}; give a directory to write")
        try:
            empty = not any(target.iterdir())
            ours = empty or is_paper_dir(target)
        except OSError as e:
            raise BadInput(f"--out {out!r} cannot be read ({e.strerror}); give another") from None
        if not ours:
            raise BadInput(
                f"--out {out!r} holds files this command did not write (it replaces the whole "
                "directory); give a new or empty directory, or a paper directory to rewrite"
            )
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise BadInput(
            f"--out {out!r} cannot be created ({str(parent)!r} is not a writable directory); "
            "give a directory you can write to"
        )
    return target


class PaperCommand(OneLineErrors, click.Command):
    """The paper command: every failure one line on stderr and an exit code."""


@click.command(cls=PaperCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--out",
    default=DEFAULT_OUT,
    show_default=True,
    help="The directory to (re)write: the tables, paper.json, plots and the probe runs. It must "
    "be new, empty or a paper directory.",
)
@click.option("--quick", is_flag=True, help="Fewer texts and lengths: a smoke run, not figures.")
@click.option(
    "--threads", type=number_type(True, 1, MAX_THREADS), default=None, help="torch threads."
)
def main(out: str, quick: bool, threads: int | None) -> None:
    """The paper's Tables 6–9 on the synthetic language (probes/paper/__init__.py)."""
    target = check_out(out)

    log = lambda msg: click.echo(msg, err=True)  # noqa: E731
    done: dict = {}

    def write(staged: Path) -> None:  # never half a directory in place
        with torch_threads(threads):
            done["result"] = measure(staged, quick=quick, log=log)
        done["parts"] = render.write(done["result"], staged)

    try:
        replace_dir(target, write)
    except OSError as e:
        if e.errno not in WRITE_ERRNOS:
            raise
        where = e.filename or target
        raise BadInput(
            f"cannot write {str(where)!r}: {e.strerror or e}; --out {out!r} is unchanged"
        ) from None
    result = done["result"]
    for text in done["parts"].values():
        click.echo(text)
    click.echo("claims:")
    for claim, word in render.claims_summary(result):
        click.echo(f"  {word:14s} {claim}")
    click.echo(f"written: {target} ({result['timings_s']['total']:.0f} s)")


if __name__ == "__main__":
    main()
