"""`probe list` and `probe run PROBE`: the registered probes, and one run of one of them. The
options of `probe run PROBE` are the shared run options (`RunOptions`), the output options and
the probe's own `Params`, each declared once where it belongs."""

from __future__ import annotations

import sys

import click

from probes.api import registry
from probes.cli.errors import BadInput, emit
from probes.cli.restart import kernels_for
from probes.framework.options import OUTPUT_NAMES, RunOptions, output_options

HELP = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def list_command(as_json: bool) -> None:
    """List the registered probes (without importing them)."""
    try:
        entries = registry.entries()
    except registry.RegistryError as e:
        raise BadInput(str(e)) from None
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


def probe_command(spec: str) -> click.Command:
    """The `probe run SPEC` command: the probe's own options, then the shared ones."""
    from probes.api import params as params_mod

    shared = (*RunOptions.fields(), *OUTPUT_NAMES)
    try:
        cls = registry.get(spec)
        own = params_mod.click_options(cls.Params, taken=shared)
    except (registry.RegistryError, params_mod.ParamError) as e:
        raise click.UsageError(str(e)) from None
    # --model may be repeated (a group probe's model group); for any other probe a second one
    # is refused by the runner rather than silently replacing the first. --haystack: files or
    # directories, repeated.
    common = RunOptions.click_options(multiple=("model", "haystack"))

    def callback(as_json: bool, quiet: bool, **values):
        models = list(values.get("model") or ())
        values["model"] = models[0] if len(models) == 1 else (models or None)
        hay = list(values.get("haystack") or ())
        values["haystack"] = hay[0] if len(hay) == 1 else (hay or None)
        given = {k: v for k, v in values.items() if v is not None or k in RunOptions.fields()}
        _run(spec, given, as_json=as_json, quiet=quiet)

    doc = (cls.__doc__ or "").strip()
    head = doc.splitlines()[0] if doc else cls.name
    module_doc = _keep_blocks((sys.modules[cls.__module__].__doc__ or "").strip())
    help_text = (
        f"{head}\n\n{module_doc}\n\nPairs per group: {cls.default_n} (--quick: {cls.quick_n})."
    )
    return click.Command(
        spec,
        params=[*own, *common, *output_options()],
        callback=callback,
        help=help_text,
        short_help=head,
        context_settings=HELP,
    )


def _keep_blocks(text: str) -> str:
    """Mark indented paragraphs (formulas, tables) so click does not rewrap them."""
    paras = text.split("\n\n")
    return "\n\n".join("\b\n" + p if p.startswith("    ") else p for p in paras)


def _run(spec: str, values: dict, *, as_json: bool, quiet: bool) -> None:
    from probes.api.probe_base import ProbeInputError
    from probes.framework.progress import Progress
    from probes.framework.runner import run
    from txl.process_rank import ProcessRank

    values["kernels"] = kernels_for(values.get("kernels"))
    try:
        summary = run(spec, progress=Progress.auto(quiet or as_json), argv=list(sys.argv), **values)
    except ProbeInputError as e:
        raise BadInput(str(e)) from None
    if not ProcessRank.from_env().is_main:  # under torchrun rank 0 prints the one result
        return
    from probes.report.tables import print_summary

    emit(summary.to_dict(), as_json=as_json, show=print_summary, passed=summary.passed)


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


@click.group("run", cls=RunGroup, context_settings=HELP)
def run_group() -> None:
    """Run a probe on a model; `probe run PROBE --help` lists its options."""
