"""`probe diagnose`: the three effects of the cache side by side (probes/diagnose.py does the work).

Imports nothing heavy at module level: `probe --help` stays instant."""

from __future__ import annotations

import sys

import click

from probes.framework.diagnose import (
    ALL_PROBES,  # probes/diagnose.py keeps its heavy imports inside
)
from probes.framework.options import common_options


@click.command(
    "diagnose", context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.option(
    "--model",
    "model",
    metavar="DIR",
    multiple=True,
    help="Checkpoint directory or shipped model name; repeat it to give the model group for "
    "RECL (the first is the model diagnosed). [default: default, and its -mem0 sibling]",
)
@click.option(
    "--n", "n", type=click.IntRange(min=1), metavar="N", help="Pairs per group for every probe."
)
@click.option(
    "--skip",
    multiple=True,
    type=click.Choice(ALL_PROBES),
    help="Leave a probe out (repeatable).",
)
def diagnose_command(as_json: bool, quiet: bool, model: tuple[str, ...], **kw) -> None:
    """Boundary repair, retrieval, topic adaptation, stale state and effective context of one
    model, in one table with 95% intervals; writes one run directory with every probe's run.

    \b
    Rows (probe → metric): boundary repair (boundary: nats/token at segment start), retrieval
    within / beyond the horizon (fact-swap), topic adaptation (topic-shift), stale state
    (cross-doc carry − reset; fact-update), effective context (context-sweep) and RECL (recl,
    when a model group is given or the model has a -mem0 sibling, and mem_len + tgt_len holds
    two contexts: at --mem 0 it is left out with the reason).
    """
    from probes.cli.main import EXIT_CHECK, InputError
    from probes.framework.diagnose import diagnose, print_table
    from probes.framework.probe import ProbeInputError, Progress

    progress = Progress(enabled=not (quiet or as_json) and sys.stderr.isatty())
    try:
        summary = diagnose(model=list(model) or None, progress=progress, argv=list(sys.argv), **kw)
    except ProbeInputError as e:
        raise InputError(str(e)) from None
    if as_json:
        from probes.framework.runner import print_json

        print_json(summary)
    else:
        print_table(summary)
    if not summary["passed"]:
        click.get_current_context().exit(EXIT_CHECK)


# The geometry, seed, device and output options of `probe run`, declared once (probes/options.py);
# diagnose runs every cache policy it needs itself (no --reset/--carry) and only the cached evaluator.
SHARED = ("mem", "tgt_len", "clamp_len", "same_length", "seed", "device", "dtype", "threads",
          "language", "out", "quick", "as_json", "quiet")  # fmt: skip
diagnose_command.params.extend(o for o in common_options() if o.name in SHARED)
