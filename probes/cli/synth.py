"""`probe synth ...`: look at what the synthetic language feeds a model. numpy only, no torch."""

from __future__ import annotations

import json

import click

from probes.api.params import number_type
from probes.cli.errors import BadInput


@click.group("synth", context_settings={"help_option_names": ["-h", "--help"]})
def synth_group() -> None:
    """Show generated pairs, examples and training batches of the synthetic language."""


@synth_group.command("show")
@click.argument("probe", required=False)
@click.option("--edit", default=None, help="Show a bare synth edit's pair instead of a probe's.")
@click.option(
    "--seed",
    type=number_type(True, 0, 2**63 - 1),
    default=0,
    show_default=True,
    help="Seed (probe namespace), as `probe run --seed`.",
)
@click.option("--quick", is_flag=True, help="The pair `probe run PROBE --quick` scores.")
@click.option(
    "--model",
    default=None,
    metavar="DIR",
    help="The Transformer-XL checkpoint (a directory or a shipped model name) PROBE plans for, "
    "as `probe run PROBE --model DIR`: its geometry and language. [default: default]",
)
@click.option(
    "--distance",
    type=number_type(True, 1),
    default=None,
    help="--edit: fact → answer distance in tokens [default: 48].",
)
@click.option(
    "--length",
    type=number_type(True, 1),
    default=None,
    help="--edit: tokens of the query's document.",
)
@click.option(
    "--same-length/--change-length",
    default=None,
    help="--edit: length-preserving edit (the default), or the explicit length-changing mode.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the pair as JSON instead.")
def show(
    probe: str | None,
    edit: str | None,
    seed: int,
    quick: bool,
    model: str | None,
    distance: int | None,
    length: int | None,
    same_length: bool | None,
    as_json: bool,
) -> None:
    """Print the first pair PROBE scores — the texts `probe run PROBE --seed N` plans for the
    shipped default model (or --model), up to their last scored token — with the edited tokens
    and the scored targets marked; or, with --edit NAME, a bare synth edit's pair (a name of
    `synth.edits.EDITS`: replace, insert, …; a name it lacks lists them)."""
    from probes.cli import pair_view  # lazy: numpy and synth, kept out of `probe --help`

    if (probe is None) == (edit is None):
        raise BadInput("give a PROBE (e.g. fact-swap) or --edit NAME (e.g. replace), one of them")
    edit_only = {"--distance": distance, "--length": length, "--same-length": same_length}
    if edit is not None and model is not None:
        raise BadInput("--model applies to a PROBE; an edit's pair is built in the synth language")
    if probe is not None:
        given = [flag for flag, value in edit_only.items() if value is not None]
        if given:
            raise BadInput(
                f"{given[0]} applies to --edit; PROBE's pair is planned as `probe run {probe}` "
                "plans it (give that run's --seed, --quick)"
            )
        shown = pair_view.planned_pair(probe, seed, quick, model)
    else:
        if quick:
            raise BadInput("--quick applies to a PROBE; an edit's pair has no quick mode")
        shown = pair_view.edit_pair(
            edit, seed, 48 if distance is None else distance, length, same_length is not False
        )
    pair_view.echo(shown, as_json)


@synth_group.command("language")
@click.option(
    "--json", "as_json", is_flag=True, help="Print the language's JSON (a tokenizer.json)."
)
def language_cmd(as_json: bool) -> None:
    """Sizes, fingerprint and filler entropy of the default language."""
    from synth.language import Language

    lang = Language.default()
    if as_json:
        click.echo(json.dumps(lang.to_json(), sort_keys=True))
        return
    c = lang.config
    rows = [
        ("fingerprint", lang.fingerprint[:16]),
        ("vocabulary", lang.vocab.size),
        ("entities / attributes", f"{c.n_entities} / {c.n_attributes}"),
        ("values (1- and 2-token)", len(lang.values)),
        ("filler words / topics", f"{c.n_filler} / {c.n_topics}"),
        ("filler entropy rate, topic known", f"{lang.filler_entropy_rate():.3f} nats/token"),
        ("filler entropy, previous word only", f"{lang.filler_bigram_entropy():.3f} nats/token"),
        ("local-only text entropy rate", f"{lang.filler_entropy_rate(-1):.3f} nats/token"),
    ]
    for k, v in rows:
        click.echo(f"{k:<36} {v}")


@synth_group.command("stream")
@click.option("--seed", type=number_type(True, 0, 2**63 - 1), default=0, show_default=True)
@click.option(
    "--rows",
    type=number_type(True, 1, 64),
    default=2,
    show_default=True,
    help="Batch rows to print.",
)
@click.option("--tgt-len", type=number_type(True, 1, 1024), default=64, show_default=True)
@click.option(
    "--batches",
    type=number_type(True, 1, 64),
    default=2,
    show_default=True,
    help="Consecutive batches per row.",
)
def stream_cmd(seed: int, rows: int, tgt_len: int, batches: int) -> None:
    """Print the first training batches (targets highlighted, `|` at batch boundaries)."""
    from rich.text import Text

    from probes.report.tables import plain_console
    from synth.language import Language
    from synth.stream import TrainStream

    lang = Language.default()
    s = TrainStream(lang, batch_size=rows, tgt_len=tgt_len, seed=seed)
    got = [s.next_annotated_batch() for _ in range(batches)]
    console = plain_console()
    for r in range(rows):
        t = Text(f"row {r}: ", style="bold")
        for i, b in enumerate(got):
            start = 0 if i == 0 else 1  # the first token repeats the previous batch's last
            for tok, kind in zip(b.tokens[r, start:], b.target_kind[r, start:], strict=True):
                word = lang.vocab.tokens[tok]
                style = (
                    "bold yellow" if word == "<eod>" else "bold green underline" if kind else None
                )
                t.append(word, style=style)
                t.append(" ")
            t.append("| ", style="dim")
        console.print(t)
