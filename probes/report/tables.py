"""Tables for people: one run (`probe run`), several side by side (`probe report`), a rerun
comparison (`probe rerun`). Machine-readable output is the summary JSON itself."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any


def console(file=None):
    import sys

    from rich.console import Console

    f = file or sys.stdout
    tty = hasattr(f, "isatty") and f.isatty()
    return Console(file=f, width=None if tty else 160, highlight=False, soft_wrap=False)


def _num(x: Any, fmt: str = "{:+.3f}") -> str:
    if x is None:
        return "—"
    if isinstance(x, float) and not math.isfinite(x):
        return "—"
    return fmt.format(x)


def _ci(ci: Sequence[float] | None) -> str:
    return "—" if not ci else f"[{ci[0]:+.3f}, {ci[1]:+.3f}]"


def _p(p: float | None) -> str:
    if p is None:
        return "—"
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"


def _distance(b: dict) -> str:
    lo, hi = b.get("distance_lo"), b.get("distance_hi")
    if lo is None:
        return "—"
    return str(lo) if lo == hi else f"{lo}–{hi}"


def _window(b: dict) -> str:
    w, r = b.get("direct_window"), b.get("layered_reach")
    if not w or not r:
        return "—"

    def span(s):
        return str(s["min"]) if s["min"] == s["max"] else f"{s['min']}–{s['max']}"

    return f"{span(w)} / {span(r)}"


def _contrast(b: dict) -> str:
    c = b.get("contrast_shift")
    return "—" if not c else _num(c.get("mean"), "{:+.2f}")


# (header, present-if key, cell)
COLUMNS: list[tuple[str, str, Callable[[dict], str]]] = [
    ("distance", "distance_lo", _distance),
    ("depth", "depth", lambda b: str(b.get("depth", "—"))),
    ("kind", "kind", lambda b: str(b.get("kind", "—"))),
    ("k", "k", lambda b: str(b.get("k", "—"))),
    # identifying columns of the probes whose rows are not distance bins
    ("tokens", "tokens", lambda b: str(b.get("tokens", "—"))),
    ("positions", "positions", lambda b: str(b.get("positions", "—"))),
    ("c", "c", lambda b: str(b.get("c", "—"))),
    ("model", "model", lambda b: str(b.get("model", "—"))),
    ("r", "r", lambda b: _num(b.get("r"), "{:g}")),
    ("attn len", "attn_len", lambda b: str(b.get("attn_len", "—"))),
    ("n", "n", lambda b: str(b.get("n", "—"))),
    ("Δ mean", "delta_mean", lambda b: _num(b.get("delta_mean"))),
    ("95% CI", "ci95", lambda b: _ci(b.get("ci95"))),
    ("p (Holm)", "p_value", lambda b: _p(b.get("p_value"))),
    ("sig", "significant", lambda b: "yes" if b.get("significant") else "no"),
    ("mdd80", "mdd80", lambda b: _num(b.get("mdd80"), "{:.3f}")),
    ("acc", "accuracy", lambda b: _num(b.get("accuracy"), "{:.2f}")),
    ("acc var", "accuracy_variant", lambda b: _num(b.get("accuracy_variant"), "{:.2f}")),
    ("contrast shift", "contrast_shift", _contrast),
    ("reach", "reach", lambda b: str(b.get("reach") or "—")),
    ("window / reach", "direct_window", _window),
    # value columns of fact-update, context-sweep, recl and speed
    ("stale share", "stale_share", lambda b: _num(b.get("stale_share"), "{:.2f}")),
    ("share w/o", "stale_share_without", lambda b: _num(b.get("stale_share_without"), "{:.2f}")),
    ("answer NLL", "answer_nll", lambda b: _num(b.get("answer_nll"), "{:.3f}")),
    ("answer CI", "answer_ci95", lambda b: _ci(b.get("answer_ci95"))),
    ("ordinary NLL", "ordinary_nll", lambda b: _num(b.get("ordinary_nll"), "{:.3f}")),
    ("ordinary CI", "ordinary_ci95", lambda b: _ci(b.get("ordinary_ci95"))),
    ("stream answer", "stream_answer_nll", lambda b: _num(b.get("stream_answer_nll"), "{:.3f}")),
    (
        "stream ordinary",
        "stream_ordinary_nll",
        lambda b: _num(b.get("stream_ordinary_nll"), "{:.3f}"),
    ),
    ("answer acc", "answer_accuracy", lambda b: _num(b.get("answer_accuracy"), "{:.2f}")),
    ("fact visible", "fact_visible", lambda b: _num(b.get("fact_visible"), "{:.2f}")),
    ("RECL", "recl", lambda b: ("≥" if b.get("censored") else "") + str(b.get("recl", "—"))),
    ("RECL 95% CI", "recl_ci95", lambda b: _span(b.get("recl_ci95"))),
    (
        "cached ms/tok",
        "cached_ms_per_token",
        lambda b: _num(b.get("cached_ms_per_token"), "{:.4f}"),
    ),
    (
        "recompute ms/tok",
        "recompute_ms_per_token",
        lambda b: _num(b.get("recompute_ms_per_token"), "{:.4f}"),
    ),
    ("ratio", "ratio", lambda b: _num(b.get("ratio"), "{:.1f}×")),
]


def _span(v) -> str:
    return "—" if not v else f"[{v[0]}, {v[1]}]"


def bins_table(summary: dict, title: str | None = None):
    from rich.table import Table

    bins = summary.get("bins") or []
    cols = [c for c in COLUMNS if any(c[1] in b for b in bins)]
    table = Table(title=title, title_justify="left", show_lines=False)
    for header, _, _ in cols:
        table.add_column(header, justify="right" if header not in ("reach", "kind") else "left")
    for b in bins:
        style = "bold" if b.get("significant") else None
        table.add_row(*[cell(b) for _, _, cell in cols], style=style)
    return table


def geometry_line(summary: dict) -> str:
    g = summary.get("geometry", {})
    m = summary.get("model", {})
    return (
        f"model {m.get('id')} ({str(m.get('sha256', ''))[:12]}) · {summary.get('evaluator')} "
        f"{summary.get('dtype')} on {summary.get('device')} · mem {g.get('mem_len')} "
        f"tgt {g.get('tgt_len')} clamp {g.get('clamp_len')} "
        f"{'same_length ' if g.get('same_length') else ''}{'reset' if g.get('reset') else 'carry'}"
        f" · {summary.get('n_pairs')} pairs, seed {summary.get('seed')}"
    )


def print_summary(summary: dict, out=None) -> None:
    c = console(out)
    title = f"{summary['probe']} v{summary['version']}"
    c.print(title, style="bold")
    c.print(geometry_line(summary))
    if summary.get("bins"):
        c.print(bins_table(summary))
    m = summary.get("metrics", {})
    if "delta_mean" in m:
        c.print(
            f"all pairs: Δ {_num(m.get('delta_mean'))} {_ci(m.get('delta_ci95'))}, "
            f"p {_p(m.get('p_value'))}"
            + (f", accuracy {_num(m.get('accuracy'), '{:.2f}')}" if "accuracy" in m else "")
        )
    failed = [k for k, v in summary.get("checks", {}).items() if not v.get("passed", True)]
    if failed:
        c.print(f"checks FAILED: {', '.join(failed)}", style="bold red")
    c.print(summary.get("verdict", ""), style="bold", soft_wrap=True)
    if summary.get("run_dir"):
        c.print(f"run directory: {summary['run_dir']}")


def _sort_key(key: tuple) -> tuple:
    """Bins of several runs in one order: by distance, then depth, kind, k (None last)."""
    return tuple(
        (x is None, x if isinstance(x, str) else "", x if isinstance(x, int | float) else 0)
        for x in key
    )


def _bin_key(b: dict) -> tuple:
    return tuple(b.get(k) for k in ("distance_lo", "distance_hi", "depth", "kind", "k"))


def print_side_by_side(summaries: Sequence[dict], names: Sequence[str], out=None) -> None:
    from rich.table import Table

    c = console(out)
    runs = Table(title="runs", title_justify="left")
    for h in (
        "#",
        "probe",
        "model",
        "mem",
        "tgt",
        "clamp",
        "policy",
        "evaluator",
        "pairs",
        "verdict",
    ):
        runs.add_column(h)
    for i, s in enumerate(summaries):
        g = s.get("geometry", {})
        runs.add_row(
            str(i + 1),
            f"{s['probe']} v{s['version']}",
            str(s.get("model", {}).get("id")),
            str(g.get("mem_len")),
            str(g.get("tgt_len")),
            str(g.get("clamp_len")),
            ("same_length " if g.get("same_length") else "")
            + ("reset" if g.get("reset") else "carry"),
            str(s.get("evaluator")),
            str(s.get("n_pairs")),
            s.get("verdict", ""),
        )
    c.print(runs)
    keys: list[tuple] = []
    for s in summaries:
        for b in s.get("bins", []):
            if _bin_key(b) not in keys:
                keys.append(_bin_key(b))
    table = Table(
        title="bins side by side (Δ mean [95% CI] · reach · * significant)", title_justify="left"
    )
    lead = [
        c_ for c_ in COLUMNS[:4] if any(c_[1] in b for s in summaries for b in s.get("bins", []))
    ]
    for header, _, _ in lead:
        table.add_column(header, justify="right")
    for i in range(len(summaries)):
        table.add_column(f"#{i + 1}", justify="right")
    for key in sorted(keys, key=_sort_key):
        row_bins = [
            next((b for b in s.get("bins", []) if _bin_key(b) == key), None) for s in summaries
        ]
        any_b = next(b for b in row_bins if b is not None)
        cells = [cell(any_b) for _, _, cell in lead]
        for b in row_bins:
            if b is None:
                cells.append("—")
            else:
                star = "*" if b.get("significant") else ""
                cells.append(
                    f"{_num(b.get('delta_mean'))}{star} {_ci(b.get('ci95'))} · {b.get('reach') or '—'}"
                )
        table.add_row(*cells)
    c.print(table)
    for i, name in enumerate(names):
        c.print(f"#{i + 1}: {name}")


def print_rerun(result: dict, out=None) -> None:
    c = console(out)
    c.print(f"original: {result['original']}")
    c.print(f"rerun:    {result['rerun']}")
    if result["match"] == "exact":
        c.print("numbers match exactly", style="bold green")
    elif result["match"] == "close":
        c.print(
            f"numbers match within {result['tolerance']:g} (max |difference| "
            f"{result['max_abs_diff']:.3g})",
            style="bold yellow",
        )
    else:
        worst = result["max_abs_diff"]
        how = "non-numeric values differ" if worst is None else f"max |difference| {worst:.3g}"
        c.print(f"numbers DIFFER ({how})", style="bold red")
        for d in result["differences"][:20]:
            c.print(f"  {d['path']}: {d['original']} → {d['rerun']}")
    for note in result.get("notes", []):
        c.print(note)
