"""The `probe` command line. Imports nothing heavy at module level: `probe --help` and `probe list`
stay instant (no numpy, no torch); a probe's module is imported only when it is run.

    probe list [--json]
    probe run PROBE [common options] [probe options]      (PROBE: a name or path/to/file.py:Class)
    probe report RUN_DIR... [--json]
    probe rerun RUN_DIR [--json]
    probe diagnose | synth | train | train-compare ...   (probes/*_cli.py)

Data goes to stdout (a table and a one-line verdict, or exactly one JSON document with --json);
progress and logs go to stderr, and only when stderr is a terminal and neither --quiet nor --json
is given. Exit codes: 0 ok, 1 a run failed its own check (or a rerun did not reproduce),
2 usage / bad input (one line: what was wrong, the value, what would be right; nothing written),
3 internal error, 130 interrupted.
"""

from __future__ import annotations

import os
import sys
import traceback

import click

from probes import __version__
from probes.cli.diagnose import diagnose_command
from probes.cli.synth import synth as synth_group
from probes.cli.train import train_command
from probes.cli.train_compare import train_compare_command
from probes.framework import registry
from probes.framework.options import COMMON_NAMES, common_options

EXIT_OK, EXIT_CHECK, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPT = 0, 1, 2, 3, 130


class InputError(click.ClickException):
    """Bad input found after parsing (a model that does not fit, an unwritable --out …)."""

    exit_code = EXIT_USAGE


# click >= 8.2 raises this (a UsageError whose message is the whole help) for a group called
# without a command; older click prints the help and exits 0 by itself.
NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class ProbeCLI(click.Group):
    """The top-level group: turns every failure into one line on stderr and an exit code."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            code = rv if isinstance(rv, int) else EXIT_OK
        except NO_ARGS_IS_HELP as e:  # bare `probe`, `probe run`, `probe synth`: the help itself
            e.show()
            code = e.exit_code
        except click.UsageError as e:
            where = e.ctx.command_path if e.ctx is not None else "probe"
            click.echo(f"error: {_one_line(e.format_message())} (see '{where} --help')", err=True)
            code = EXIT_USAGE
        except click.ClickException as e:
            click.echo(f"error: {_one_line(e.format_message())}", err=True)
            code = e.exit_code
        except (click.Abort, KeyboardInterrupt):
            click.echo("interrupted", err=True)
            code = EXIT_INTERRUPT
        except Exception as e:  # an internal error: one line unless asked for the traceback
            if os.environ.get("PROBES_DEBUG"):
                traceback.print_exc()
            click.echo(
                f"internal error: {type(e).__name__}: {_one_line(str(e))[:400]} "
                "(set PROBES_DEBUG=1 for the traceback)",
                err=True,
            )
            code = EXIT_INTERNAL
        if standalone_mode:
            sys.exit(code)
        return code


@click.group(cls=ProbeCLI, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="probe")
def cli() -> None:
    """Paired, per-token diagnostics of a Transformer-XL cache."""


# ---------------------------------------------------------------------------- probe list


@cli.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def list_cmd(as_json: bool) -> None:
    """List the registered probes (without importing them)."""
    try:
        entries = registry.entries()
    except registry.RegistryError as e:
        raise InputError(str(e)) from None
    if as_json:
        import json

        doc = {
            "probes": [
                {"name": e.name, "version": e.version, "summary": e.summary, "target": e.target}
                for e in entries
            ]
        }
        click.echo(json.dumps(doc, sort_keys=True, indent=2))
        return
    width = max((len(e.name) for e in entries), default=4)
    for e in entries:
        click.echo(f"{e.name:<{width}}  v{e.version}  {e.summary}")


# ---------------------------------------------------------------------------- probe run

COMMON_HELP = "Common options (every probe):"


def probe_command(spec: str) -> click.Command:
    """The `probe run SPEC` command: common options plus the probe's own."""
    from probes.framework import params as params_mod

    try:
        cls = registry.get(spec)
        own = params_mod.click_options(cls.Params, taken=COMMON_NAMES)
    except (registry.RegistryError, params_mod.ParamError) as e:
        raise click.UsageError(str(e)) from None
    own_names = [p.name for p in own]
    common = common_options()
    if getattr(cls, "model_group", False):  # --model repeated: the model group
        i = next(i for i, o in enumerate(common) if o.name == "model")
        common[i] = click.Option(
            ["--model", "model"],
            metavar="DIR",
            multiple=True,
            help="Checkpoint directory or shipped model name, repeated for the model group. "
            "[default: the model (default: default) and its -mem0 sibling when there is one]",
        )

    def callback(**kw):
        as_json, quiet = kw.pop("as_json"), kw.pop("quiet")
        if isinstance(kw.get("model"), tuple):
            kw["model"] = list(kw["model"]) or None
        probe_params = {k: kw.pop(k) for k in own_names if kw.get(k) is not None}
        for k in own_names:
            kw.pop(k, None)
        _run(spec, kw, probe_params, as_json=as_json, quiet=quiet)

    doc = (cls.__doc__ or "").strip()
    head = doc.splitlines()[0] if doc else cls.name
    module_doc = _keep_blocks((sys.modules[cls.__module__].__doc__ or "").strip())
    help_text = (
        f"{head}\n\n{module_doc}\n\nPairs per group: {cls.default_n} (--quick: {cls.quick_n})."
    )
    return click.Command(
        spec,
        params=[*own, *common],
        callback=callback,
        help=help_text,
        short_help=head,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    )


def _keep_blocks(text: str) -> str:
    """Mark indented paragraphs (formulas, tables) so click does not rewrap them."""
    paras = text.split("\n\n")
    return "\n\n".join("\b\n" + p if p.startswith("    ") else p for p in paras)


def _run(spec: str, kw: dict, probe_params: dict, *, as_json: bool, quiet: bool) -> None:
    from probes.framework.probe import ProbeInputError, Progress
    from probes.framework.runner import print_json, run

    progress = Progress(enabled=not (quiet or as_json) and sys.stderr.isatty())
    try:
        summary = run(spec, progress=progress, argv=list(sys.argv), **kw, **probe_params)
    except ProbeInputError as e:
        raise InputError(str(e)) from None
    if as_json:
        print_json(summary.to_dict())
    else:
        from probes.report.tables import print_summary

        print_summary(summary.to_dict())
    if not summary.passed:
        click.get_current_context().exit(EXIT_CHECK)


class RunGroup(click.Group):
    """`probe run PROBE …`: one lazily built subcommand per registered probe."""

    def list_commands(self, ctx):
        try:
            return registry.names()
        except registry.RegistryError:
            return []

    def get_command(self, ctx, name):
        return probe_command(name)

    def resolve_command(self, ctx, args):
        name = args[0]
        if not registry.is_file_spec(name) and name not in registry.names():
            raise click.UsageError(registry.unknown_message(name), ctx)
        return name, self.get_command(ctx, name), args[1:]

    def format_commands(self, ctx, formatter):
        rows = [(e.name, e.summary) for e in registry.entries()]
        rows.append(("path/to/file.py:Class", "a probe defined outside the package"))
        with formatter.section("Probes"):
            formatter.write_dl(rows)


@cli.group("run", cls=RunGroup, context_settings={"help_option_names": ["-h", "--help"]})
def run_group() -> None:
    """Run a probe on a model; `probe run PROBE --help` lists its options."""


# ---------------------------------------------------------------------------- report / rerun


@cli.command("report")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def report_cmd(run_dirs: tuple[str, ...], as_json: bool) -> None:
    """Show finished runs side by side: one run's table, or several (say --mem 128 and 640)."""
    from probes.framework.results import RunDirError, load_run

    summaries = []
    for d in run_dirs:
        try:
            run_json, summary = load_run(d)
        except RunDirError as e:
            raise InputError(str(e)) from None
        if summary is None:
            raise InputError(
                f"{d!r} has no summary.json (status {run_json.get('status')!r}); "
                "give a finished run"
            )
        summaries.append(summary)
    if as_json:
        from probes.framework.runner import print_json

        print_json({"runs": summaries})
        return
    from probes.report.tables import print_side_by_side, print_summary

    diagnosed = [s for s in summaries if s.get("command") == "diagnose"]
    if diagnosed:  # `probe diagnose` run directories: their table, one after the other
        from probes.framework.diagnose import print_table

        if len(diagnosed) != len(summaries):
            raise InputError("give either probe runs or diagnose runs to compare, not both")
        for s in diagnosed:
            print_table(s)
        return
    if len(summaries) == 1:
        print_summary(summaries[0])
    else:
        print_side_by_side(summaries, list(run_dirs))


@cli.command("rerun")
@click.argument("run_dir", type=click.Path())
@click.option(
    "--out", default=None, metavar="DIR", help="Where the new run goes. [default: as recorded]"
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option("--quiet", is_flag=True, help="No progress or logs on stderr.")
def rerun_cmd(run_dir: str, out: str | None, as_json: bool, quiet: bool) -> None:
    """Repeat a run from its run.json and say whether the numbers match (exit 1 if not)."""
    from probes.framework.probe import ProbeInputError, Progress
    from probes.framework.rerun import rerun
    from probes.framework.results import RunDirError

    progress = Progress(enabled=not (quiet or as_json) and sys.stderr.isatty())
    try:
        result = rerun(run_dir, out=out, progress=progress)
    except (ProbeInputError, RunDirError) as e:
        raise InputError(str(e)) from None
    if as_json:
        from probes.framework.runner import print_json

        print_json(result)
    else:
        from probes.report.tables import print_rerun

        print_rerun(result)
    if not result["passed"]:
        click.get_current_context().exit(EXIT_CHECK)


cli.add_command(train_command)  # `probe train` (probes/train_cli.py)
cli.add_command(train_compare_command)  # `probe train-compare` (probes/train_compare_cli.py)


cli.add_command(synth_group)
cli.add_command(diagnose_command)  # `probe diagnose` (probes/diagnose_cli.py)


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
