"""The `probe` command line. Imports nothing heavy at module level: `probe --help` stays instant."""

from __future__ import annotations

import click

from probes import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="probe")
def cli() -> None:
    """Paired, per-token diagnostics of a Transformer-XL cache."""


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
