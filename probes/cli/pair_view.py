"""What `probe synth show` prints: one pair the way the model sees it, with the edited tokens and
the scored targets marked, as a rich panel or one JSON document.

A probe's pair is the first one `probe run PROBE` scores: the probe is planned as `probe run`
plans it (the seed, `--quick`) against a model that plans and never scores
(`probes.adapters.planning`: the geometry and language of the shipped default checkpoint, or of
`--model`, a Transformer-XL checkpoint), and its first job's base and variant rows are shown
as the run scores them, up to their last scored token. A bare edit's pair (`--edit NAME`) is
built by `synth.pairs.make_pair`. numpy, no torch.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from typing import Any

import click
import numpy as np
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from probes.adapters.planning import PlanningModel
from probes.api import kinds, registry
from probes.api.errors import AdapterError, ModelDirError
from probes.api.paired import PairedProbe
from probes.api.probe_base import ProbeInputError
from probes.cli.errors import BadInput
from probes.framework.models import resolve_model_path
from probes.framework.runner import prepare
from probes.limits import MAX_DISTANCE, MAX_TEXT, LimitError, check_at_most
from probes.report.tables import plain_console
from synth.edits import EDITS, resolve
from synth.example import Pair
from synth.language import Language
from synth.pairs import make_pair
from synth.rng import make_rng


@dataclass
class Shown:
    """A pair as shown: its base and variant rows (`base_len`, `variant_len` tokens of them), the
    positions scored in each, and what it is."""

    pair: Pair
    base_len: int
    variant_len: int
    base_targets: np.ndarray
    variant_targets: np.ndarray
    title: str  # what made it: the probe and its pair, or the edit
    about: dict[str, Any] = field(default_factory=dict)  # JSON-friendly: where it comes from


def probes_with_pairs() -> list[str]:
    """The library's probes whose texts are pairs (`PairedProbe`: what `synth show` shows)."""
    return [n for n in registry.builtin_entries() if issubclass(registry.get(n), PairedProbe)]


def no_pairs_message(name: str) -> str:
    return (
        f"probe {name} does not score the base and variant of one edit; synth show shows the "
        f"first pair of "
        f"{', '.join(probes_with_pairs())}, or an edit's pair with --edit NAME "
        f"({', '.join(sorted(EDITS))})"
    )


def planned_pair(name: str, seed: int, quick: bool, model: str | None = None) -> Shown:
    """The first pair `probe run NAME --seed SEED [--quick] [--model MODEL]` scores: MODEL a
    Transformer-XL checkpoint (default: the shipped default model). A model of another kind
    plans with its own tokenizer and weights: its pairs are those of a run (`probe show RUN
    --pair K`)."""
    try:
        cls = registry.get(name)
    except registry.RegistryError as e:
        edit = f"; {name!r} is an edit: give --edit {name}" if name in EDITS else ""
        raise BadInput(f"{e}{edit}") from None
    if not issubclass(cls, PairedProbe) or "synth" not in cls.smoke:
        raise BadInput(no_pairs_message(cls.name))
    other_kind = BadInput(
        f"--model {model!r}: synth show plans for a Transformer-XL checkpoint; another kind of "
        f"model plans with its own tokenizer, so its pairs are a run's: probe run {name} "
        f"--model {model} --n 1, then probe show RUN_DIR --pair 0"
    )
    if model is not None and kinds.by_prefix(model) is not None:
        raise other_kind
    try:
        path = resolve_model_path(model)
        if not kinds.detect(path).fallback:  # the fallback kind is the Transformer-XL checkpoint
            raise other_kind
        planner = PlanningModel.of_checkpoint(path)
    except (ProbeInputError, ModelDirError, AdapterError) as e:
        raise BadInput(str(e)) from None
    try:
        # prepare checks that --out could be written; a plan writes nothing there
        planned = prepare(
            name, model=planner, seed=seed, quick=quick, progress=False, out=tempfile.gettempdir()
        ).instance
    except (AdapterError, ProbeInputError) as e:
        raise BadInput(str(e)) from None
    job = planned.jobs[0]
    return Shown(
        pair=job.pair,
        base_len=job.row_length("base"),
        variant_len=job.row_length("variant"),
        base_targets=np.asarray(job.base_targets),
        variant_targets=np.asarray(job.variant_targets),
        title=f"{cls.name} pair 0, seed {seed}{' --quick' if quick else ''}, {path.name}",
        about={
            "probe": cls.name,
            "model": planner.info.path,
            "seed": seed,
            "quick": quick,
            "pair": 0,
            "bin": plain(planned.groups[job.group]),
        },
    )


def edit_pair(name: str, seed: int, distance: int, length: int | None, same_length: bool) -> Shown:
    """Edit `name`'s pair on a base built for it (`synth.pairs.make_pair`)."""
    try:
        check_at_most("--distance", distance, MAX_DISTANCE, "facts lie at most that far back")
        check_at_most("--length", length or 0, MAX_TEXT, "a text has at most that many tokens")
    except LimitError as e:
        raise BadInput(str(e)) from None
    try:
        edit = resolve(name)
        pair = make_pair(
            edit,
            Language.default(),
            make_rng(seed, "probe"),
            distance=distance,
            length=length,
            same_length=same_length,
        )
    except ValueError as e:
        raise BadInput(str(e)) from None
    return Shown(
        pair,
        len(pair.base),
        len(pair.variant),
        pair.base.targets,
        pair.variant.targets,
        f"{edit}, seed {seed}",
        {"edit": edit, "seed": seed},
    )


def plain(x: Any) -> Any:
    """`x` with numpy scalars as Python numbers (JSON)."""
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [plain(v) for v in x]
    return x.item() if isinstance(x, np.generic) else x


def echo(shown: Shown, as_json: bool) -> None:
    """Print the pair: a rich panel per text, or one JSON document (`as_json`)."""
    lang = Language.default()
    if as_json:
        click.echo(json.dumps(to_json(shown, lang), sort_keys=True))
    else:
        print_shown(shown, lang)


def to_json(shown: Shown, lang: Language) -> dict:
    p = shown.pair

    def row(ex, n: int, targets: np.ndarray) -> dict:
        return {
            "tokens": ex.tokens[:n].tolist(),
            "text": lang.decode(ex.tokens[:n]),
            "doc_ids": ex.doc_ids[:n].tolist(),
            "targets": targets.tolist(),
            "distances": list(ex.distances),
        }

    return {
        **shown.about,
        "base": row(p.base, shown.base_len, shown.base_targets),
        "variant": row(p.variant, shown.variant_len, shown.variant_targets),
        "alignment": p.alignment[: shown.variant_len].tolist(),
        "meta": plain(p.meta),
    }


def print_shown(shown: Shown, lang: Language) -> None:
    pair = shown.pair
    console = plain_console()

    def render(ex, n: int, changed, targets) -> Text:
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
        for i in targets:
            style[i] = "bold green underline"
        for i in ex.doc_starts:
            style[i] = "bold yellow"
        for i in changed:
            style[i] = "bold white on red"
        t = Text()
        for i, w in enumerate(lang.vocab.words(ex.tokens[:n])):
            t.append(w, style=style[i] or None)
            t.append(" ")
        return t

    removed = np.flatnonzero(pair.inverse_alignment() < 0)
    cut = ", up to its last scored one" if shown.about.get("probe") else ""
    console.print(
        Panel(
            render(pair.base, shown.base_len, removed, shown.base_targets),
            title=f"base ({shown.base_len} tokens{cut})",
        )
    )
    console.print(
        Panel(
            render(pair.variant, shown.variant_len, pair.edited(), shown.variant_targets),
            title=f"variant ({shown.variant_len} tokens) — {shown.title}",
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
    if "bin" in shown.about:
        table.add_row("bin", str(shown.about["bin"]))
    for k, v in pair.meta.items():
        if k.endswith("value") and isinstance(v, list):
            v = f"{v} ({lang.decode(v)})"
        table.add_row(k, str(v))
    table.add_row(
        "targets (base → variant)",
        f"{shown.base_targets.tolist()} → {shown.variant_targets.tolist()}",
    )
    table.add_row(
        "distances (base → variant)",
        f"{list(pair.base.distances)} → {list(pair.variant.distances)}",
    )
    table.add_row("same length", str(pair.preserves_length))
    console.print(table)
