"""The `probe diagnose` table and its forest plot: rows as the suite's probes declared them
(`probes.framework.declarations.effect_row`), rendered without knowing any probe."""

from __future__ import annotations

from pathlib import Path


def forest_plot(path: Path, rows: list[dict], model_id: str, geometry) -> str | None:
    """The nats-valued rows with their intervals, one line each (None: no such row)."""
    pts = [r for r in rows if r["unit"].startswith("nats") and r["value"] is not None]
    if not pts:
        return None
    from probes.report import plots

    plots.forest(
        path,
        pts,
        title=f"probe diagnose · {model_id} · mem {geometry.mem_len} tgt {geometry.tgt_len}",
    )
    return path.name


def print_table(summary: dict, out=None) -> None:
    from rich.table import Table

    from probes.report.tables import console

    c = console(out)
    g = summary["geometry"]
    c.print("probe diagnose", style="bold")
    c.print(
        f"model {summary['model']['id']} ({summary['model']['sha256'][:12]}) · mem "
        f"{g['mem_len']} tgt {g['tgt_len']} clamp {g['clamp_len']}"
        + (
            f" · group: {', '.join(x['id'] for x in summary['group'][1:])}"
            if summary["group"][1:]
            else ""
        )
    )
    t = Table(show_lines=False)
    for h in ("effect", "value", "95% CI", "p", "verdict", "margin", "n", "unit", "detail"):
        t.add_column(h, justify="right" if h in ("value", "95% CI", "p", "margin", "n") else "left")
    for r in summary["rows"]:
        nats = r["unit"].startswith("nats")
        v = r["value"]
        ci = r["ci95"]
        t.add_row(
            r["effect"],
            "—"
            if v is None
            else (f"{v:+.3f}" if nats else ("≥" if r["censored"] else "") + str(v)),
            "—" if not ci else (f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if nats else f"[{ci[0]}, {ci[1]}]"),
            "—" if r["p_value"] is None else f"{r['p_value']:.2g}",
            r.get("verdict") or "—",
            "—" if r.get("margin") is None else f"±{r['margin']:g}",
            str(r["n"]),
            r["unit"],
            r["detail"],
            style="bold" if r["significant"] else None,
        )
    c.print(t)
    failed = [
        name
        for name, ch in summary["checks"].items()
        if not all(v.get("passed", True) for v in ch.values())
    ]
    if failed:
        c.print(f"checks FAILED: {', '.join(failed)}", style="bold red")
    if summary.get("skipped"):
        c.print(f"skipped: {', '.join(summary['skipped'])}")
    c.print(f"run directory: {summary['run_dir']}")
