"""Line plots with CI bands for the probes whose output is a curve, not a delta-by-distance table
(context-sweep: loss vs visible history; recl: gain vs context; speed: time vs attention length).
matplotlib with the Agg backend; written atomically like every other plot (probes.plots)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


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
    from probes.plots import _pyplot, _save

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
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
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    _save(fig, path)
