"""The `probe diagnose` figures, drawn from a diagnose summary: the rows in nats with their
intervals (`diagnose.png`), or with `--models` one marker per model in each row
(`diagnose_models.png`)."""

from __future__ import annotations

from pathlib import Path

from probes.report import plots


def in_nats(row: dict) -> bool:
    """A row the forest plots draw: a loss difference (the lengths have another axis)."""
    return row["unit"].startswith("nats")


def suite_plot(run_dir: Path, summary: dict) -> str | None:
    """The figure of a diagnose summary, drawn into its run directory: `diagnose_models.png` for
    a `--models` run, else `diagnose.png`. Returns the file name (None: no row in nats)."""
    if "models" in summary:
        return models_plot(run_dir / "diagnose_models.png", summary)
    return forest_plot(run_dir / "diagnose.png", summary)


def forest_plot(path: Path, summary: dict) -> str | None:
    """The nats-valued rows of a one-model summary with their intervals, one line each (None:
    no such row)."""
    pts = [r for r in summary["rows"] if in_nats(r) and r["value"] is not None]
    if not pts:
        return None
    g = summary["geometry"]
    title = f"probe diagnose · {summary['model']['id']} · mem {g['mem_len']} tgt {g['tgt_len']}"
    plots.forest(path, pts, title=title)
    return path.name


def models_plot(path: Path, summary: dict) -> str | None:
    """The nats-valued effects of a `--models` summary, one marker per model in each row
    (None: no such effect)."""
    pts = [
        e
        for e in summary["effects"]
        if in_nats(e) and any(v["value"] is not None for v in e["values"].values())
    ]
    if not pts:
        return None
    ids = [m["id"] for m in summary["models"]]
    g = summary["geometry"]
    g = next(iter(g.values())) if g and "mem_len" not in g else g  # per model: the first's
    where = f" · mem {g['mem_len']} tgt {g['tgt_len']}" if g and "mem_len" in g else ""
    # the legend names the models; the title stays one line however many there are
    plots.forest_models(path, pts, ids, title=f"probe diagnose · {len(ids)} models{where}")
    return path.name
