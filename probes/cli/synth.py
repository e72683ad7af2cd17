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
@click.argument("edit")
@click.option(
    "--seed",
    type=number_type(True, 0, 2**63 - 1),
    default=0,
    show_default=True,
    help="Seed (probe namespace).",
)
@click.option(
    "--distance",
    type=number_type(True, 1),
    default=48,
    show_default=True,
    help="Fact → answer distance in tokens.",
)
@click.option(
    "--length", type=number_type(True, 1), default=None, help="Tokens of the query's document."
)
@click.option(
    "--same-length/--change-length",
    default=True,
    show_default=True,
    help="Length-preserving edit, or the explicit length-changing mode.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the pair as JSON instead.")
def show(
    edit: str, seed: int, distance: int, length: int | None, same_length: bool, as_json: bool
) -> None:
    """Print a pair built by EDIT (insert, replace, delete, distract, update, topic-shift, boundary,
    identity, or a probe name such as fact-swap) with the edited tokens and the targets marked."""
    from probes.limits import MAX_DISTANCE, MAX_TEXT, LimitError, check_at_most
    from synth.edits import resolve
    from synth.language import Language
    from synth.pairs import make_pair
    from synth.rng import make_rng

    try:
        check_at_most("--distance", distance, MAX_DISTANCE, "facts lie at most that far back")
        check_at_most("--length", length or 0, MAX_TEXT, "a text has at most that many tokens")
    except LimitError as e:
        raise BadInput(str(e)) from None
    lang = Language.default()
    try:
        name = resolve(edit)
        pair = make_pair(
            name,
            lang,
            make_rng(seed, "probe"),
            distance=distance,
            length=length,
            same_length=same_length,
        )
    except ValueError as e:
        raise BadInput(str(e)) from None
    if as_json:
        click.echo(json.dumps(_pair_json(pair, lang), sort_keys=True))
        return
    _print_pair(pair, lang, name, seed)


def _pair_json(pair, lang) -> dict:
    def ex(e):
        return {
            "text": lang.decode(e.tokens),
            "doc_ids": e.doc_ids.tolist(),
            "targets": e.targets.tolist(),
            "distances": list(e.distances),
        }

    return {
        "base": ex(pair.base),
        "variant": ex(pair.variant),
        "alignment": pair.alignment.tolist(),
        "meta": pair.meta,
    }


def _print_pair(pair, lang, name: str, seed: int) -> None:
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    from probes.report.tables import plain_console

    console = plain_console()
    inv = pair.inverse_alignment()

    def render(ex, changed) -> Text:
        style = [""] * len(ex)
        for f in ex.facts:
            for i in range(f.span.start, f.span.end):
                style[i] = "cyan"
        for d in ex.distractors:
            for i in range(d.start, d.end):
                style[i] = "magenta"
        for q in ex.queries:
            for i in range(q.span.start, q.span.end):
                style[i] = "blue"
        for i in ex.targets:
            style[i] = "bold green underline"
        for i in ex.doc_starts:
            style[i] = "bold yellow"
        for i in changed:
            style[i] = "bold white on red"
        t = Text()
        for i, w in enumerate(lang.vocab.words(ex.tokens)):
            t.append(w, style=style[i] or None)
            t.append(" ")
        return t

    console.print(
        Panel(render(pair.base, (inv < 0).nonzero()[0]), title=f"base ({len(pair.base)} tokens)")
    )
    console.print(
        Panel(
            render(pair.variant, pair.edited()),
            title=f"variant ({len(pair.variant)} tokens) — {name}, seed {seed}",
        )
    )
    legend = Text()
    for label, st in [
        ("edited", "bold white on red"),
        ("targets", "bold green underline"),
        ("fact", "cyan"),
        ("query", "blue"),
        ("distractor", "magenta"),
        ("<eod>", "bold yellow"),
    ]:
        legend.append(f" {label} ", style=st)
        legend.append(" ")
    console.print(legend)
    table = Table(show_header=False, box=None)
    for k, v in pair.meta.items():
        if k.endswith("value") and isinstance(v, list):
            v = f"{v} ({lang.decode(v)})"
        table.add_row(k, str(v))
    table.add_row(
        "distances (base → variant)",
        f"{list(pair.base.distances)} → {list(pair.variant.distances)}",
    )
    table.add_row("same length", str(pair.preserves_length))
    console.print(table)


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
