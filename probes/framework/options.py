"""The options every probe run shares (geometry, seed, device, output), declared once for
`probe run` and `probe diagnose`. click only: imported by `probe --help`."""

from __future__ import annotations

import click


def common_options() -> list[click.Option]:
    o = click.Option
    return [
        o(
            ["--model", "model"],
            metavar="DIR",
            default=None,
            help="Checkpoint directory, or a shipped model name (default, default-mem0). "
            "[default: default]",
        ),
        o(
            ["--mem", "mem"],
            type=click.IntRange(min=0),
            metavar="N",
            help="Eval mem_len. [default: the model's]",
        ),
        o(
            ["--tgt-len", "tgt_len"],
            type=click.IntRange(min=1),
            metavar="N",
            help="Eval segment length. [default: the model's]",
        ),
        o(
            ["--clamp-len", "clamp_len"],
            type=click.IntRange(min=1),
            metavar="N",
            help="Largest relative distance used. [default: the model's training mem + tgt]",
        ),
        o(
            ["--same-length/--no-same-length", "same_length"],
            default=None,
            help="Every query sees exactly mem_len keys. [default: off]",
        ),
        o(
            ["--reset/--carry", "reset"],
            default=None,
            help="Mask other documents (reset) or let the cache carry them (the paper's stream). [default: reset]",
        ),
        o(
            ["--n", "n"],
            type=click.IntRange(min=1),
            metavar="N",
            help="Pairs per bin / grid cell. [default: the probe's]",
        ),
        o(
            ["--seed", "seed"],
            type=click.IntRange(min=0),
            default=0,
            show_default=True,
            metavar="N",
            help="Seed of the pairs.",
        ),
        o(
            ["--device", "device"],
            type=click.Choice(["auto", "cpu", "cuda"]),
            default="auto",
            show_default=True,
        ),
        o(
            ["--evaluator", "evaluator"],
            type=click.Choice(["cached", "recompute"]),
            default="cached",
            show_default=True,
            help="cached: streaming with memory; recompute: a fresh window of mem+tgt tokens per scored token.",
        ),
        o(
            ["--dtype", "dtype"],
            type=click.Choice(["float32", "float64", "bfloat16"]),
            default="float32",
            show_default=True,
        ),
        o(
            ["--threads", "threads"],
            type=click.IntRange(min=1),
            metavar="N",
            help="CPU threads. [default: the cores this process may use, less those other processes keep busy]",
        ),
        o(
            ["--language", "language"],
            metavar="FILE",
            help="Synth language JSON (or a checkpoint dir) to write the probe text in. [default: Language.default()]",
        ),
        o(
            ["--out", "out"],
            metavar="DIR",
            default="results",
            show_default=True,
            help="Where run directories go.",
        ),
        o(
            ["--quick", "quick"],
            is_flag=True,
            help="Fewer pairs (the probe's quick n): a smoke run.",
        ),
        o(["--json", "as_json"], is_flag=True, help="Print exactly one JSON document on stdout."),
        o(["--quiet", "quiet"], is_flag=True, help="No progress or logs on stderr."),
    ]


COMMON_NAMES = {
    "model", "mem", "tgt_len", "clamp_len", "same_length", "reset", "n", "seed", "device",
    "evaluator", "dtype", "threads", "language", "out", "quick", "as_json", "quiet", "json",
}  # fmt: skip
