"""`probe train`: train a Transformer-XL on the synthetic language, or on real text (`--text`),
with txl's loop.

This module parses the options and maps the outcome to an exit code; the work (the config's
layers, the synth stream from its `data` table, the recall evaluation from its `eval` table) is
`probes.training.job`'s. Several processes: `torchrun --nproc_per_node N -m probes.cli train ...`.

Exit codes (probes/cli/errors.py): 0 done, 1 the run failed its own check (non-finite loss),
2 bad input (one line), 3 internal error, 130 / 143 interrupted by SIGINT / SIGTERM after saving a
checkpoint.
Imports nothing heavy at module level: `probe --help` stays instant.
"""

from __future__ import annotations

import errno
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from probes.api.params import number_type
from probes.cli.errors import EXIT_CHECK, EXIT_INTERRUPT, BadInput
from probes.limits import MAX_THREADS
from probes.training.presets import DEFAULT_OUT, PRESETS

# Write failures that are this machine's state, not a bug: the disk is full, over quota or
# read-only (exit 2 with the path; a resumed run continues from the last checkpoint).
_ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS}


@click.command("train")
@click.option(
    "--preset",
    default=None,
    help=f"One of {', '.join(PRESETS)} (default: tiny, the shipped model; "
    "docs/user-guide.md, Training).",
)
@click.option(
    "--config",
    "config_file",
    default=None,
    type=click.Path(path_type=Path),
    help="A TOML or JSON file of config keys (layered over the preset).",
)
@click.option(
    "--out",
    default=None,
    type=click.Path(),
    help=f"Run directory (default: {DEFAULT_OUT}/PRESET).",
)
@click.option("--steps", default=None, type=number_type(True, 1), help="Optimizer updates.")
@click.option("--resume", is_flag=True, help="Continue the run in --out from its last checkpoint.")
@click.option(
    "--device", default=None, type=click.Choice(["auto", "cpu", "cuda"]), help="Default: auto."
)
@click.option("--compile/--no-compile", "compile_", default=None, help="torch.compile the model.")
@click.option("--seed", default=None, type=number_type(True, 0, 2**63 - 1))
@click.option(
    "--threads",
    default=None,
    type=number_type(True, 0, MAX_THREADS),
    help="torch CPU threads (0: torch's default).",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a config key (dotted: model.d_model=256, data.x=1, eval.mem_len=640).",
)
@click.option(
    "--text",
    "text",
    multiple=True,
    metavar="PATH",
    help="Train on real text: UTF-8 files or directories (repeatable), or 'default' (the "
    "standard library's pydoc topics, their haystack documents held out). A byte-level BPE is "
    "trained on it; a slice is held out for the NLL. [default preset: text]",
)
@click.option(
    "--vocab-size",
    default=None,
    type=number_type(True, 1, 1 << 20),
    help="Tokens of the BPE trained on --text. [default: 2048]",
)
@click.option(
    "--documents",
    default=None,
    type=click.Choice(["file", "paragraph"]),
    help="A --text document per file or per blank-line-separated block. [default: file]",
)
@click.option("--quiet", is_flag=True, help="No progress bar or log lines on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
def train_command(
    preset: str | None,
    config_file: Path | None,
    out: str | None,
    steps: int | None,
    resume: bool,
    device: str | None,
    compile_: bool | None,
    seed: int | None,
    threads: int | None,
    overrides: tuple[str, ...],
    text: tuple[str, ...],
    vocab_size: int | None,
    documents: str | None,
    quiet: bool,
    as_json: bool,
) -> None:
    """Train a Transformer-XL on the synthetic language or on real text (--text; resumable;
    CPU, CUDA, torchrun)."""
    if out is not None and not out.strip():
        raise BadInput(
            f"--out {out!r} is empty; give a run directory (default: {DEFAULT_OUT}/PRESET)"
        )
    if not text and (vocab_size is not None or documents is not None) and not resume:
        flag = "--vocab-size" if vocab_size is not None else "--documents"
        raise BadInput(f"{flag} applies to a run on text; give --text PATH")
    if text and preset is None and config_file is None and not resume:
        from probes.training.presets import TEXT_PRESET

        preset = TEXT_PRESET
    explicit = [
        (k, v)
        for k, v in (
            ("steps", steps),
            ("device", device),
            ("compile", compile_),
            ("seed", seed),
            ("threads", threads),
        )
        if v is not None
    ]
    if any(not t.strip() for t in text):
        raise BadInput("--text '': give UTF-8 files, directories or 'default'")
    if text:  # absolute, so that a resume from another directory reads the same files
        paths = [t if t == "default" else str(Path(t).expanduser().resolve()) for t in text]
        explicit.append(("data.text.paths", paths))
    for key, v in (("vocab_size", vocab_size), ("documents", documents)):
        if v is not None:
            explicit.append((f"data.text.{key}", v))
    command = shlex.join(["probe", *sys.argv[1:]]) if sys.argv else "probe train"
    try:
        code = _train(
            preset,
            config_file,
            None if out is None else Path(out),
            resume,
            explicit,
            overrides,
            quiet,
            as_json,
            command,
        )
    except KeyboardInterrupt:  # before the loop's own handler is in place
        click.echo("interrupted", err=True)
        code = EXIT_INTERRUPT
    click.get_current_context().exit(code)


def _train(
    preset: str | None,
    config_file: Path | None,
    out: Path | None,
    resume: bool,
    explicit: list[tuple[str, Any]],
    overrides: tuple[str, ...],
    quiet: bool,
    as_json: bool,
    command: str,
) -> int:
    from probes.training import job as training

    # Bad input before the loop starts: ConfigError, RunDirError, a bad data or eval table (all
    # ValueErrors).
    try:
        job = training.resolve_job(preset, config_file, out, resume, explicit, overrides)
        prepared = training.prepare(job)  # torch from here on
    except ValueError as e:
        raise BadInput(str(e)) from None

    from txl.checkpoint import CheckpointError
    from txl.run_dir import RunDirError
    from txl.signals import TrainingInterrupted
    from txl.train import NonFiniteLossError
    from txl.train_config import ConfigError

    try:
        result = training.run(prepared, quiet=quiet or as_json, command=command)
    except (ConfigError, RunDirError, CheckpointError) as e:
        raise BadInput(str(e)) from None
    except OSError as e:
        if e.errno not in _ENVIRONMENT_ERRNOS:
            raise
        where = e.filename or prepared.job.run_dir
        raise BadInput(
            f"cannot write {where}: {e.strerror}; the last checkpoint is kept: make room and "
            "continue with --resume"
        ) from None
    except NonFiniteLossError as e:
        click.echo(f"error: {e}", err=True)
        return EXIT_CHECK
    except TrainingInterrupted as e:
        if prepared.ctx.is_main:
            click.echo(str(e), err=True)
        return 128 + e.signum

    if prepared.ctx.is_main:
        summary = {
            "run_dir": str(result.run_dir),
            "model_dir": str(result.model_dir),
            "checkpoint": str(result.checkpoint) if result.checkpoint else None,
            "step": result.step,
            "loss": result.loss,
            "tokens_per_s": result.tokens_per_s,
            "mfu": result.mfu,
            "eval": result.eval,
        }
        if as_json:
            from txl.io import json_safe

            click.echo(json.dumps(json_safe(summary), sort_keys=True, allow_nan=False))
        else:
            _print_summary(summary)
    return 0


def _print_summary(s: dict[str, Any]) -> None:
    from rich.table import Table

    from probes.report.tables import plain_console

    table = Table(title="probe train", show_header=False)
    for key in ("run_dir", "model_dir", "step", "loss", "tokens_per_s", "mfu"):
        v = s[key]
        if isinstance(v, float):
            v = f"{v:.1%}" if key == "mfu" else f"{v:,.4g}"
        table.add_row(key, "-" if v is None else str(v))
    ev = s["eval"] or {}
    for key, v in ev.items():
        if isinstance(v, float | int | str) and key != "eval_s":
            table.add_row(f"eval.{key}", f"{v:.4g}" if isinstance(v, float) else str(v))
    plain_console().print(table)
