"""Tables for people: one run (`probe run`), several side by side (`probe report`), a rerun
comparison (`probe rerun`). Machine-readable output is the summary JSON itself."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple


def plain_console(**kwargs: Any):
    """A rich Console for stdout whose broken pipe is a BrokenPipeError (rich's own exits 1, the
    code for a failed check), for the CLI to answer once (probes/cli/errors.py: 141)."""
    import errno

    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, "stdout's reader is gone")

    return PipeConsole(**kwargs)


def console(file=None):
    import sys

    f = file or sys.stdout
    tty = hasattr(f, "isatty") and f.isatty()
    return plain_console(file=f, width=None if tty else 160, highlight=False, soft_wrap=False)


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


def _mean(x: Any) -> str:
    return "—" if not x else _num(x.get("mean"), "{:+.2f}")


def _span(v) -> str:
    return "—" if not v else f"[{v[0]}, {v[1]}]"


def _text(x: Any) -> str:
    return "—" if x is None or x == "" else str(x)


# How a declared column writes its value (`TableColumn.format`); the whole bin is passed for
# the formats that combine fields.
FORMATS: dict[str, Callable[[dict, str], str]] = {
    "text": lambda b, k: _text(b.get(k)),
    "left": lambda b, k: _text(b.get(k)),
    "range": lambda b, k: _distance(b),
    "delta": lambda b, k: _num(b.get(k)),
    "ci": lambda b, k: _ci(b.get(k)),
    "p": lambda b, k: _p(b.get(k)),
    "yes/no": lambda b, k: "yes" if b.get(k) else "no",
    "f2": lambda b, k: _num(b.get(k), "{:.2f}"),
    "f3": lambda b, k: _num(b.get(k), "{:.3f}"),
    "f4": lambda b, k: _num(b.get(k), "{:.4f}"),
    "g": lambda b, k: _num(b.get(k), "{:g}"),
    "prob": lambda b, k: _num(b.get(k), "{:.2g}"),
    "times": lambda b, k: _num(b.get(k), "{:.1f}×"),
    "mean": lambda b, k: _mean(b.get(k)),
    "window": lambda b, k: _window(b),
    "span": lambda b, k: _span(b.get(k)),
    "lower-bound": lambda b, k: ("≥" if b.get("censored") else "") + _text(b.get(k)),
}


class TableColumn(NamedTuple):
    """A column of a bin table as summary.json records it (`columns`, the probe's declared
    Columns): its header, the bin field shown, how it is written (`FORMATS`), and whether it
    names the bin."""

    header: str
    key: str
    format: str = "text"
    identifies: bool = False


def declared_columns(summary: dict) -> list[TableColumn]:
    """The columns the run's probe declared (summary.json's `columns`), or, for a run that
    records none, one text column per bin field."""
    if "columns" in summary:
        return [TableColumn(**c) for c in summary["columns"]]
    keys = dict.fromkeys(k for b in summary.get("bins") or [] for k in b)
    return [
        TableColumn(k, k)
        for k in keys
        if not isinstance(next((b[k] for b in summary["bins"] if k in b), None), dict | list)
    ]


def coverage(checks: dict[str, dict[str, Any]]) -> str:
    """One line for people: each check's status and what it covered."""
    parts = []
    for name, c in checks.items():
        status = c.get("status") or ("passed" if c.get("passed", True) else "failed")
        covered = f" ({c['covered']} {c.get('unit', 'tokens')})" if "covered" in c else ""
        why = f": {c['why']}" if c.get("why") else ""
        parts.append(f"{name} {status}{covered}{why}")
    return "; ".join(parts)


def _cell(col, b: dict) -> str:
    return FORMATS[col.format](b, col.key)


def bins_table(summary: dict, title: str | None = None):
    from rich.table import Table

    bins = summary.get("bins") or []
    cols = [c for c in declared_columns(summary) if any(c.key in b for b in bins)]
    table = Table(title=title, title_justify="left", show_lines=False)
    for c in cols:
        table.add_column(c.header, justify="left" if c.format == "left" else "right")
    for b in bins:
        style = "bold" if b.get("significant") else None
        table.add_row(*[_cell(c, b) for c in cols], style=style)
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
    if m.get("unmatched_pairs"):  # real text or the tokenizer bridge: drawn, not scored
        c.print(
            f"unmatched: {m['unmatched_pairs']} pairs not scored (not aligned in the model's "
            "tokens)"
        )
    if m.get("bins_cut"):
        c.print(f"bins: {m['bins_cut']}", soft_wrap=True)
    checks = summary.get("checks") or {}
    failed = any(not v.get("passed", True) for v in checks.values())
    line = coverage(checks) if checks else "none (this probe has no self-check)"
    c.print(f"checks: {line}", style="bold red" if failed else None, soft_wrap=True)
    c.print(summary.get("verdict", ""), style="bold", soft_wrap=True)
    if summary.get("run_dir"):
        c.print(f"run directory: {summary['run_dir']}")


def _ident_key(b: dict, cols: list) -> tuple:
    """The identifying values of a bin (a distance column stands for its lo and hi)."""
    out: list = []
    for c in cols:
        if c.format == "range":
            out += [b.get("distance_lo"), b.get("distance_hi")]
        else:
            out.append(b.get(c.key))
    return tuple(out)


def _sort_key(key: tuple) -> tuple:
    """Bins of several runs in one order: by their identifying values (None last)."""
    return tuple(
        (x is None, x if isinstance(x, str) else "", x if isinstance(x, int | float) else 0)
        for x in key
    )


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
    lead: list = []  # the identifying columns of every run's probe, each once
    for summ in summaries:
        for col in declared_columns(summ):
            present = any(col.key in b for b in summ.get("bins", []))
            if col.identifies and present and col.key not in [x.key for x in lead]:
                lead.append(col)
    keys: list[tuple] = []
    for summ in summaries:
        for b in summ.get("bins", []):
            if _ident_key(b, lead) not in keys:
                keys.append(_ident_key(b, lead))
    table = Table(
        title="bins side by side (Δ mean [95% CI] · reach · * significant, ≈ negligible)",
        title_justify="left",
    )
    for col in lead:
        table.add_column(col.header, justify="right")
    for i in range(len(summaries)):
        table.add_column(f"#{i + 1}", justify="right")
    for key in sorted(keys, key=_sort_key):
        row_bins = [
            next((b for b in summ.get("bins", []) if _ident_key(b, lead) == key), None)
            for summ in summaries
        ]
        any_b = next(b for b in row_bins if b is not None)
        cells = [_cell(col, any_b) for col in lead]
        for b in row_bins:
            if b is None:
                cells.append("—")
            else:
                star = {"significant": "*", "negligible": "≈"}.get(
                    b.get("verdict") or ("significant" if b.get("significant") else ""), ""
                )
                cells.append(
                    f"{_num(b.get('delta_mean'))}{star} {_ci(b.get('ci95'))} · {b.get('reach') or '—'}"
                )
        table.add_row(*cells)
    c.print(table)
    for i, name in enumerate(names):
        c.print(f"#{i + 1}: {name}")


RERUN_MATCHES = ("exact", "close", "differ", "refused")


def print_reruns(doc: dict, out=None) -> None:
    """`probe rerun` of several runs: a line per run (match, largest difference, notes), then
    the reasons of those refused and every note."""
    c = console(out)
    for r in doc["reruns"]:
        worst = r.get("max_abs_diff")
        size = "" if r["match"] in ("exact", "refused") or worst is None else f" {worst:.3g}"
        style = {"exact": "green", "close": "yellow"}.get(r["match"], "bold red")
        c.print(f"[{style}]{r['match']:<7}[/{style}]{size:<10} {r['original']}", soft_wrap=True)
    for r in doc["reruns"]:
        for note in ([r["error"]] if "error" in r else []) + r.get("notes", []):
            c.print(f"{r['original']}: {note}", highlight=False, markup=False, soft_wrap=True)
    matches = [r["match"] for r in doc["reruns"]]
    counts = [f"{matches.count(m)} {m}" for m in RERUN_MATCHES if m in matches]
    c.print(f"{', '.join(counts)} of {len(matches)} runs")


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
