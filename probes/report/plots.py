"""Plots of probe results (matplotlib, Agg backend: no display needed).

`delta_by_distance` draws each bin's mean pair delta at its mean distance with the 95 % CI as a
band, and marks the two lengths the table reports: the direct window and the layered reach
(vertical lines at the mean over the run's scored tokens, shaded from min to max, since both
depend on the token's offset in its segment). `heatmap` draws a grid (e.g. distance × depth).
`line_plot` draws curves with CI bands for the probes whose output is a curve, not a
delta-by-distance table (loss vs visible history, gain vs context, time vs attention length).
`forest` draws labelled estimates with their intervals (`probe diagnose`), `forest_models` the
same for several models side by side (`probe diagnose --models`). Bins and rows are
marked by their verdict word (VERDICT_MARKS, VERDICT_COLORS). Every plot is written atomically.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from txl.io import atomic_write_with

# How plots mark a bin's verdict word (the tables write the word itself).
VERDICT_MARKS = {"significant": "*", "negligible": "≈"}
VERDICT_COLORS = {"significant": "tab:red", "negligible": "tab:green", "inconclusive": "tab:blue"}


def deferred(plot: Callable[..., None], name: str, *args: Any, **kwargs: Any):
    """A plot to draw once the run directory exists: `draw(run_dir)` writes `run_dir / name`
    with `plot(path, *args, **kwargs)` and returns the file name (what `Outcome.plots` holds)."""

    def draw(run_dir: Path) -> str:
        plot(Path(run_dir) / name, *args, **kwargs)
        return name

    return draw


def _figure(width: float, height: float):
    """(fig, ax): a figure of its own, outside pyplot. Importing pyplot costs a third of a second
    more than the figure and the Agg canvas alone, and its global figure list is not needed to
    write a file."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _colors() -> list[str]:
    import matplotlib

    return matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]


def delta_by_distance(
    path: Path,
    bins: Sequence[dict],
    *,
    title: str,
    ylabel: str = "Δ NLL on answer tokens (nats, mean over pairs)",
    xlabel: str = "distance from the fact's last token to the first answer token (tokens)",
    direct: dict | None = None,
    reach: dict | None = None,
    x_key: str = "distance_mean",
    series_key: str | None = None,
) -> None:
    """Mean delta vs distance (or `x_key`) with its CI band, one line per value of `series_key`;
    `direct`/`reach`: {"min", "max", "mean"} spans to mark."""
    fig, ax = _figure(7, 4)
    pts = [b for b in bins if b.get("n") and b.get("delta_mean") is not None]
    series: dict = {}
    for b in pts:
        series.setdefault(b.get(series_key) if series_key else None, []).append(b)
    colors = _colors()
    all_x = []
    for i, (name, group) in enumerate(series.items()):
        group = sorted(group, key=lambda b: b[x_key])
        xs = [b[x_key] for b in group]
        ys = [b["delta_mean"] for b in group]
        lo = [b["ci95"][0] if b.get("ci95") else y for b, y in zip(group, ys, strict=True)]
        hi = [b["ci95"][1] if b.get("ci95") else y for b, y in zip(group, ys, strict=True)]
        color = colors[i % len(colors)]
        label = "mean Δ" if name is None else f"{series_key} {name}"
        ax.fill_between(xs, lo, hi, alpha=0.2, color=color)
        ax.plot(xs, ys, "o-", color=color, label=f"{label} (band: 95% CI)")
        for b, x, y in zip(group, xs, ys, strict=True):
            mark = VERDICT_MARKS.get(
                b.get("verdict") or ("significant" if b.get("significant") else "")
            )
            if mark:
                ax.annotate(mark, (x, y), textcoords="offset points", xytext=(0, 6), ha="center")
        all_x += xs
    ax.axhline(0.0, color="black", lw=0.8)
    spans = ((direct, "tab:green", "direct window"), (reach, "tab:red", "layered reach"))
    for span, color, name in spans:
        if not span:
            continue
        if span["max"] > span["min"]:
            ax.axvspan(span["min"], span["max"], color=color, alpha=0.08)
        ax.axvline(span.get("mean", span["min"]), color=color, ls="--", lw=1.2, label=name)
    if all_x and min(all_x) > 0 and max(all_x) / min(all_x) > 20:
        ax.set_xscale("log")
    _finish(fig, ax, path, title, xlabel, ylabel, legend=True)


def heatmap(
    path: Path,
    values: Sequence[Sequence[float | None]],
    *,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    title: str,
    xlabel: str,
    ylabel: str,
    cbar_label: str = "mean Δ (nats)",
    marks: Sequence[Sequence[bool]] | None = None,
) -> None:
    """A grid of numbers (None = empty cell) as a diverging heatmap centred on 0."""
    import numpy as np

    grid = np.array([[np.nan if v is None else float(v) for v in row] for row in values])
    finite = grid[np.isfinite(grid)]
    vmax = float(np.abs(finite).max()) if finite.size else 1.0
    vmax = vmax or 1.0
    fig, ax = _figure(1.2 * len(col_labels) + 3, 0.6 * len(row_labels) + 2)
    im = ax.imshow(grid, cmap="RdBu_r", vmin=-vmax, vmax=vmax, aspect="auto")
    ax.set_xticks(range(len(col_labels)), labels=list(col_labels), fontsize=8)
    ax.set_yticks(range(len(row_labels)), labels=list(row_labels), fontsize=8)
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            if np.isfinite(grid[i, j]):
                star = "*" if marks is not None and marks[i][j] else ""
                ax.text(j, i, f"{grid[i, j]:.2f}{star}", ha="center", va="center", fontsize=7)
    fig.colorbar(im, ax=ax, label=cbar_label)
    _finish(fig, ax, path, title, xlabel, ylabel, legend=False)


def line_plot(
    path: Path,
    series: dict[str, dict],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    logx: bool = False,
    logy: bool = False,
    vlines: Sequence[tuple[float, str]] = (),
    hline: float | None = None,
) -> None:
    """series: name → {"x": [...], "y": [...], optional "lo"/"hi" (a band), "style" ("o-", "s--")};
    points with y None are skipped. vlines: (x, label) marks; hline: a horizontal reference."""
    fig, ax = _figure(7, 4)
    colors = _colors()
    for i, (name, s) in enumerate(series.items()):
        color = colors[i % len(colors)]
        pts = [
            (x, y, lo, hi)
            for x, y, lo, hi in zip(
                s["x"],
                s["y"],
                s.get("lo") or [None] * len(s["x"]),
                s.get("hi") or [None] * len(s["x"]),
                strict=True,
            )
            if y is not None
        ]
        if not pts:
            continue
        xs = [p[0] for p in pts]
        ys = [p[1] for p in pts]
        if all(p[2] is not None and p[3] is not None for p in pts):
            ax.fill_between(xs, [p[2] for p in pts], [p[3] for p in pts], alpha=0.2, color=color)
        ax.plot(xs, ys, s.get("style", "o-"), color=color, label=name, ms=4)
    for x, label in vlines:
        ax.axvline(x, color="grey", ls=":", lw=1.2)
        ax.annotate(
            label,
            (x, 1.0),
            xycoords=("data", "axes fraction"),
            fontsize=7,
            rotation=90,
            va="top",
            ha="right",
        )
    if hline is not None:
        ax.axhline(hline, color="black", lw=0.8)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    _finish(fig, ax, path, title, xlabel, ylabel, legend=True)


def forest(path: Path, rows: Sequence[dict], *, title: str) -> None:
    """One line per row ({"effect", "value", "ci95", "significant"}): the estimate and its
    interval on a shared axis at 0, coloured by verdict (red significant, green negligible, blue
    inconclusive, grey: no paired test)."""
    fig, ax = _figure(7, 0.45 * len(rows) + 1.4)
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows, strict=True):
        lo, hi = r["ci95"] or (r["value"], r["value"])
        ax.errorbar(
            r["value"],
            y,
            xerr=[[r["value"] - lo], [hi - r["value"]]],
            fmt="o",
            color=VERDICT_COLORS.get(r.get("verdict") or "", "tab:gray"),
            capsize=3,
        )
    ax.axvline(0.0, color="black", lw=0.8)
    ax.set_yticks(ys, labels=[r["effect"] for r in rows], fontsize=8)
    _finish(
        fig,
        ax,
        path,
        title,
        "Δ NLL, 95% CI; red: significant, green: negligible, blue: inconclusive",
        None,
        False,
    )


def forest_models(path: Path, rows: Sequence[dict], models: Sequence[str], *, title: str) -> None:
    """One line per row ({"effect", "values": {model: {"value", "ci95", "significant"}}}), one
    marker and interval per model within it (offset vertically, coloured per model; filled:
    significant, hollow: not, or no paired test), on a shared axis at 0."""
    colors = _colors()
    fig, ax = _figure(7, (0.2 * len(models) + 0.25) * len(rows) + 1.6)
    ys = list(range(len(rows)))[::-1]
    step = 0.7 / len(models)
    for i, model in enumerate(models):
        color = colors[i % len(colors)]
        off = step * ((len(models) - 1) / 2 - i)  # the first model on top
        ax.plot([], [], "o", color=color, label=model)  # the legend's entry: a filled marker
        for y, r in zip(ys, rows, strict=True):
            v = r["values"].get(model)
            if not v or v["value"] is None:
                continue
            lo, hi = v["ci95"] or (v["value"], v["value"])
            ax.errorbar(
                v["value"],
                y + off,
                xerr=[[v["value"] - lo], [hi - v["value"]]],
                fmt="o",
                color=color,
                markerfacecolor=color if v.get("significant") else "none",
                capsize=2,
            )
    ax.axvline(0.0, color="black", lw=0.8)
    ax.set_yticks(ys, labels=[r["effect"] for r in rows], fontsize=8)
    _finish(
        fig,
        ax,
        path,
        title,
        "Δ NLL, 95% CI; filled: significant, hollow: not (or no paired test)",
        None,
        True,
    )


def _finish(fig, ax, path: Path, title: str, xlabel: str, ylabel: str | None, legend: bool):
    """Labels, title, the legend, and the file written atomically."""
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if legend:
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    _save(fig, path)


def _save(fig, path: Path) -> None:

    atomic_write_with(path, lambda tmp: fig.savefig(tmp, format="png"))
