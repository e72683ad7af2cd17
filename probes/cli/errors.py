"""What every `probe` command answers when something is wrong: the exit-code table and the one
error class for bad input. click only: imported by `probe --help`.

    0    ok
    1    a run failed its own check (or a rerun / retrain did not reproduce)
    2    usage or bad input: one line on stderr saying what was wrong, the value given and what
         would be right; nothing written. Also the environment refusing a file (disk full, a
         read-only or closed output, a run directory another process holds, a malformed run
         file): one line naming the file; a run it stopped records status "error"
    3    internal error (one line; PROBES_DEBUG=1 prints the traceback)
    130  interrupted (SIGINT)
    141  stdout closed by its reader (a broken pipe: `probe report RUN | head -1`): quietly, as a
         process killed by SIGPIPE; whatever the command wrote to disk is complete
    143  terminated (SIGTERM)
"""

from __future__ import annotations

import click

EXIT_OK = 0
EXIT_CHECK = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPT = 130
EXIT_PIPE = 141
EXIT_TERMINATED = 143


def one_line(text: object) -> str:
    return " ".join(str(text).split())


class BadInput(click.ClickException):
    """Bad input found at the boundary (a model that does not fit, an unwritable --out, a bad
    file): `error: <message>` on one line, exit 2."""

    exit_code = EXIT_USAGE

    def format_message(self) -> str:
        return one_line(self.message)


def emit(result: dict, *, as_json: bool, show, passed: bool) -> None:
    """A command's result on stdout — one JSON document, or `show(result)` for people — and
    exit 1 when the run failed its own check."""
    if as_json:
        from probes.framework.results import print_json

        print_json(result)
    else:
        show(result)
    if not passed:
        click.get_current_context().exit(EXIT_CHECK)
