"""`probe train`: wire a synth training stream and the recall-by-distance evaluation into txl's loop.

txl trains on any stream; this command is where synth meets it. The config's `data` table
configures the stream (`synth.stream.StreamConfig`, plus `language`: a `LanguageConfig` table,
default `Language.default()`), its `eval` table the held-out evaluation (`probes.training.recall_eval`).
Several processes: `torchrun --nproc_per_node N -m probes.cli train ...` (each rank its own shard).

Exit codes: 0 done, 1 the run failed its own check (non-finite loss), 2 bad input (one line),
3 internal error, 130 / 143 interrupted by SIGINT / SIGTERM after saving a checkpoint.
Imports nothing heavy at module level: `probe --help` stays instant.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import click

DEFAULT_OUT = Path("runs") / "train"


class BadInput(click.ClickException):
    """Bad input at the boundary: one line on stderr, exit 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


class _OneLineErrors(click.Command):
    """Usage errors (a bad option value, an unknown option) as one line and exit 2, not the
    usage block."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            raise BadInput(" ".join(e.format_message().split())) from None


@click.command("train", cls=_OneLineErrors)
@click.option("--preset", default=None, help="tiny (default: the shipped model), small, base.")
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
    type=click.Path(path_type=Path),
    help=f"Run directory (default: {DEFAULT_OUT}/PRESET).",
)
@click.option("--steps", default=None, type=int, help="Optimizer updates.")
@click.option("--resume", is_flag=True, help="Continue the run in --out from its last checkpoint.")
@click.option(
    "--device", default=None, type=click.Choice(["auto", "cpu", "cuda"]), help="Default: auto."
)
@click.option("--compile/--no-compile", "compile_", default=None, help="torch.compile the model.")
@click.option("--seed", default=None, type=int)
@click.option("--threads", default=None, type=int, help="torch CPU threads (0: torch's default).")
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a config key (dotted: model.d_model=256, data.x=1, eval.mem_len=640).",
)
@click.option("--quiet", is_flag=True, help="No progress bar or log lines on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON document.")
def train_command(
    preset: str | None,
    config_file: Path | None,
    out: Path | None,
    steps: int | None,
    resume: bool,
    device: str | None,
    compile_: bool | None,
    seed: int | None,
    threads: int | None,
    overrides: tuple[str, ...],
    quiet: bool,
    as_json: bool,
) -> None:
    """Train a Transformer-XL on the synthetic language (resumable; CPU, CUDA, torchrun)."""
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
    command = shlex.join(["probe", *sys.argv[1:]]) if sys.argv else "probe train"
    try:
        code = _train(
            preset, config_file, out, resume, explicit, overrides, quiet, as_json, command
        )
    except BadInput:
        raise
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    sys.exit(code)


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
    from probes.training.presets import resolve_dict
    from txl.train_config import ConfigError, TrainConfig, set_key

    # 1. the config: preset < file < explicit options < --set (or the run's own, on --resume)
    try:
        if resume and preset is None and config_file is None:
            from txl.run_dir import RunDirError, load_run_config

            run_dir = out or DEFAULT_OUT / "tiny"
            try:
                data = load_run_config(run_dir)
            except RunDirError as e:
                raise BadInput(str(e)) from None
            for key, value in [*explicit, *(_split(o) for o in overrides)]:
                data = set_key(data, key, value)
        else:
            data = resolve_dict(preset, config_file, [*explicit, *overrides])
            run_dir = out or DEFAULT_OUT / data["preset"]
        lang = _language(data.get("data", {}))
        model = data.setdefault("model", {})
        if model.setdefault("vocab_size", lang.vocab.size) != lang.vocab.size:
            raise ConfigError(
                f"bad value for model.vocab_size: {model['vocab_size']}; the language has "
                f"{lang.vocab.size} tokens (leave it unset)"
            )
        config = TrainConfig.from_dict(data)
    except (ConfigError, ValueError) as e:
        raise BadInput(str(e)) from None

    import torch  # noqa: F401  (heavy imports only once the input is known to be good)

    from txl.device import resolve_device
    from txl.distributed import context_from_env
    from txl.io import json_safe
    from txl.run_dir import RunDirError, check_run_dir
    from txl.signals import TrainingInterrupted
    from txl.train import NonFiniteLossError, train

    ctx = context_from_env()
    try:
        resolve_device(config.device, ctx.local_rank)
        check_run_dir(run_dir, resume)
        stream = _stream(lang, config, config.seed, config.batch_size, ctx.rank, ctx.world_size)
        eval_fn = None
        if ctx.is_main:
            from probes.training.recall_eval import make_recall_eval

            eval_fn = make_recall_eval(
                lang,
                config.model,
                config.eval,
                heldout_stream=lambda rows, seed: _stream(
                    lang, config, seed, rows, 0, 1, curriculum=False
                ),
            )
    except (ConfigError, RunDirError, ValueError) as e:
        raise BadInput(str(e)) from None

    try:
        result = train(
            config,
            stream,
            out_dir=run_dir,
            tokenizer=lang.to_json(),
            eval_fn=eval_fn,
            resume=resume,
            ctx=ctx,
            quiet=quiet or as_json,
            command=command,
        )
    except (ConfigError, RunDirError) as e:
        raise BadInput(str(e)) from None
    except NonFiniteLossError as e:
        click.echo(f"error: {e}", err=True)
        return 1
    except TrainingInterrupted as e:
        if ctx.is_main:
            click.echo(str(e), err=True)
        return 128 + e.signum
    finally:
        from txl.distributed import shutdown

        shutdown()

    if ctx.is_main:
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
            click.echo(json.dumps(json_safe(summary), sort_keys=True, allow_nan=False))
        else:
            _print_summary(summary)
    return 0


def _split(item: str) -> tuple[str, Any]:
    from txl.train_config import parse_override

    return parse_override(item)


def _language(data: dict[str, Any]):
    from synth.language import Language, LanguageConfig

    table = data.get("language")
    if table is None:
        return Language.default()
    if not isinstance(table, dict):
        raise ValueError(f"bad value for data.language: {table!r}; expected a table")
    return Language(LanguageConfig.from_dict(table))


def _stream(
    lang, config, seed: int, batch_size: int, rank: int, world_size: int, curriculum: bool = True
):
    """This rank's synth training stream (StreamConfig from the `data` table, minus `language`);
    without `curriculum`, the mixture from the first token (the held-out NLL measures the text the
    model is trained on for good, not the curriculum's bursty start)."""
    from synth.stream import StreamConfig, TrainStream

    table = {k: v for k, v in config.data.items() if k != "language"}
    if not curriculum:
        table.pop("bursty_first", None)
    try:
        stream_config = StreamConfig.from_dict(table)
    except TypeError as e:
        raise ValueError(f"bad data table: {e}") from None
    return TrainStream(
        lang,
        stream_config,
        batch_size=batch_size,
        tgt_len=config.model.tgt_len,
        seed=seed,
        rank=rank,
        world_size=world_size,
    )


def _print_summary(s: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

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
    Console().print(table)
