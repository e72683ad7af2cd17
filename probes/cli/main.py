"""The `probe` command line: the top-level group and the commands it holds. Imports nothing
heavy at module level: `probe --help` and `probe list` stay instant (no numpy, no torch); a
probe's module is imported only when it is run.

    probe list [--json]                                   probes/cli/run.py
    probe run PROBE [run options] [probe options]         probes/cli/run.py
    probe report RUN_DIR... [--json]                      probes/cli/report.py
    probe rerun RUN_DIR...                                probes/cli/rerun.py
    probe show RUN_DIR [--pair K] [--text] [--save-strings]   probes/cli/show.py
    probe diagnose ...                                    probes/cli/diagnose.py
    probe synth ...                                       probes/cli/synth.py
    probe train ... / probe train-compare A B             probes/cli/train.py, train_compare.py

Data goes to stdout (a table and a one-line verdict, or exactly one JSON document with --json);
progress and logs go to stderr, and only when stderr is a terminal and neither --quiet nor --json
is given. Exit codes: `probes.cli.errors`.
"""

from __future__ import annotations

import io
import os
import sys
import traceback
from typing import NoReturn

import click

from probes._version import __version__
from probes.cli import restart
from probes.cli.diagnose import diagnose_command
from probes.cli.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPT,
    EXIT_OK,
    EXIT_PIPE,
    EXIT_TERMINATED,
    EXIT_USAGE,
    one_line,
)
from probes.cli.report import report_command
from probes.cli.rerun import rerun_command
from probes.cli.run import list_command, run_group
from probes.cli.show import show_command
from probes.cli.synth import synth_group
from probes.cli.train import train_command
from probes.cli.train_compare import train_compare_command

# click >= 8.2 raises this (a UsageError whose message is the whole help) for a group called
# without a command; older click prints the help and exits 0 by itself.
NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is (a run records "interrupted", like Ctrl-C)."""


def _terminate(signum, frame) -> None:
    raise Terminated()


class PipeClosed(Exception):
    """stdout's reader went away (EPIPE): raised past click, which would exit 1 for it."""


def _is_epipe(e: BaseException) -> bool:
    import errno

    return isinstance(e, BrokenPipeError) or (isinstance(e, OSError) and e.errno == errno.EPIPE)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that nothing fails again flushing it at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _closed(stream) -> bool:
    """Whether the process was started with this standard stream closed (`probe ... >&-`)."""
    if stream is None:
        return True
    try:
        os.fstat(stream.fileno())
    except (io.UnsupportedOperation, ValueError, AttributeError):  # replaced (tests): usable
        return False
    except OSError:  # EBADF
        return True
    return False


def _stdout_closed() -> bool:
    return _closed(sys.stdout)


def _open_closed_stderr() -> None:
    """Started with stderr closed (`2>&-`): give it /dev/null, so that what would be said there
    is dropped and the exit code still says what happened (progress, warnings and the one error
    line all write to stderr)."""
    if not _closed(sys.stderr):
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        if devnull != 2:
            os.dup2(devnull, 2)
            os.close(devnull)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)
    except OSError:
        pass


def _not_utf8(args) -> str | None:
    """The first argument that is not valid UTF-8 (its bytes arrive as surrogates), or None:
    every run file records its command line as UTF-8 JSON, so such an argument is refused
    before anything is written rather than failing once a run has begun."""
    for a in args:
        try:
            a.encode("utf-8")
        except UnicodeEncodeError:
            return a
    return None


def _full(e: BaseException) -> bool:
    """A write to stdout refused for room (`probe list > /dev/full`): a file the run writes
    names itself (`filename`), stdout does not."""
    import errno

    return (
        isinstance(e, OSError)
        and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
        and e.filename is None
    )


def _speaks_for_all_ranks() -> bool:
    """Under torchrun (RANK set), rank 0 alone reports bad input: the ranks share it."""
    return os.environ.get("RANK", "0") == "0"


def _rank_prefix() -> str:
    """'rank N: ' under torchrun with several ranks (an internal error may be one rank's)."""
    world = os.environ.get("WORLD_SIZE", "1")
    return f"rank {os.environ.get('RANK', '0')}: " if world not in ("", "0", "1") else ""


class OneLineErrors:
    """Turns every failure of a click command into one line on stderr and an exit code
    (probes.cli.errors): the `probe` group and `python -m probes.paper` share it."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except OSError as e:
            if _is_epipe(e):
                raise PipeClosed() from None
            raise

    def make_context(self, *args, **kwargs):
        # --help and --version print while the context is made, outside `invoke`: a closed pipe
        # there must not reach click's own handler, which exits 1
        try:
            return super().make_context(*args, **kwargs)
        except OSError as e:
            if _is_epipe(e):
                raise PipeClosed() from None
            raise

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        import logging
        import signal

        # stderr carries one line on error and progress only when asked: matplotlib's own
        # warnings (a config directory it cannot create under a read-only HOME) are not shown
        logging.getLogger("matplotlib").setLevel(logging.ERROR)
        _open_closed_stderr()
        early = None
        if _stdout_closed():  # every command prints its result: refuse before doing anything
            early = "stdout is closed; give the command somewhere to print"
        elif (bad := _not_utf8(sys.argv[1:] if args is None else args)) is not None:
            early = (
                f"the argument {os.fsencode(bad)!r} is not valid UTF-8 (run files record the "
                "command line as UTF-8); give a name in UTF-8"
            )
        if early is not None:
            click.echo(f"error: {early}", err=True)
            if standalone_mode:
                sys.exit(EXIT_USAGE)
            return EXIT_USAGE
        previous = signal.signal(signal.SIGTERM, _terminate)
        # SIGINT stops a run cleanly even when the process started with it ignored (a background
        # job of a shell script inherits SIGINT ignored, and Python then leaves it so)
        previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            code = rv if isinstance(rv, int) else EXIT_OK
            sys.stdout.flush()  # a broken pipe shows here for what was buffered
        except PipeClosed:
            _silence_stdout()
            code = EXIT_PIPE
        except NO_ARGS_IS_HELP as e:  # bare `probe`, `probe run`, `probe synth`: the help itself
            e.show()
            code = e.exit_code
        except click.UsageError as e:
            where = e.ctx.command_path if e.ctx is not None else "probe"
            if _speaks_for_all_ranks():
                msg = one_line(e.format_message())
                click.echo(f"error: {msg} (see '{where} --help')", err=True)
            code = EXIT_USAGE
        except click.ClickException as e:
            if _speaks_for_all_ranks():  # every rank gets the same input: rank 0 says it
                click.echo(f"error: {one_line(e.format_message())}", err=True)
            code = e.exit_code
        except (click.Abort, KeyboardInterrupt) as e:  # click turns Ctrl-C into Abort
            if isinstance(e, Terminated) or isinstance(e.__cause__, Terminated):
                click.echo("terminated (SIGTERM)", err=True)
                code = EXIT_TERMINATED
            else:
                click.echo("interrupted", err=True)
                code = EXIT_INTERRUPT
        except Exception as e:  # an internal error: one line unless asked for the traceback
            if _is_epipe(e):  # outside a command (click's own output, the last flush)
                _silence_stdout()
                code = EXIT_PIPE
            elif _full(e):  # the environment refusing the output: exit 2, as a full disk is
                _silence_stdout()
                click.echo(
                    f"error: cannot write to stdout: {e.strerror}; give it somewhere with room",
                    err=True,
                )
                code = EXIT_USAGE
            else:
                if os.environ.get("PROBES_DEBUG"):
                    traceback.print_exc()
                click.echo(
                    f"{_rank_prefix()}internal error: {type(e).__name__}: "
                    f"{one_line(str(e))[:400]} (set PROBES_DEBUG=1 for the traceback)",
                    err=True,
                )
                code = EXIT_INTERNAL
        finally:
            signal.signal(signal.SIGTERM, previous)
            signal.signal(signal.SIGINT, previous_int)
        if standalone_mode:
            sys.exit(code)
        return code


class ProbeCLI(OneLineErrors, click.Group):
    """The top-level group: every failure is one line on stderr and an exit code."""


@click.group(cls=ProbeCLI, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="probe")
def cli() -> None:
    """Paired, per-token diagnostics of a Transformer-XL cache."""


for command in (
    list_command,
    run_group,
    report_command,
    rerun_command,
    show_command,
    diagnose_command,
    synth_group,
    train_command,
    train_compare_command,
):
    cli.add_command(command)


def main() -> None:
    """The `probe` command (and `python -m probes.cli`): the CLI, then an exit that skips the
    interpreter's teardown. By then every command has written and closed its files; atexit
    handlers still run and other threads are joined as a normal exit would. What is skipped is
    freeing torch's modules and objects one by one: about 0.45 s of nothing (measured with
    `python -c "import torch"` against the same with os._exit)."""
    restart.allow()
    code = cli.main(standalone_mode=False)
    leave(code if isinstance(code, int) else EXIT_OK)


def leave(code: int) -> NoReturn:
    """Exit with `code` as the interpreter would, less its teardown (see `main`): the steps of
    a normal exit in its order — threading's exit hooks (which stop, e.g., a
    concurrent.futures pool) and the join of every non-daemon thread, then the atexit
    handlers — and `os._exit` after flushing stdout and stderr."""
    import atexit
    import threading

    threading._shutdown()  # what the interpreter calls first at exit (hooks, then joins)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:  # None: the process started without that descriptor
                stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            pass
    os._exit(code)


if __name__ == "__main__":
    main()
