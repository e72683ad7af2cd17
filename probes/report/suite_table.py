"""The `probe diagnose` table: the rows of a diagnose summary.json as the suite's probes wrote
them, rendered without knowing any probe; with `--models`, the same rows side by side (a column
per model)."""

from __future__ import annotations

from probes.report.tables import console


def value_text(r: dict, unit: str) -> str:
    """A row's value: nats signed to 3 places, lengths as integers (≥ when censored)."""
    v = r["value"]
    if v is None:
        return "—"
    return f"{v:+.3f}" if unit.startswith("nats") else ("≥" if r["censored"] else "") + str(v)


def ci_text(r: dict, unit: str) -> str:
    """A row's 95% interval in the same format as its value."""
    ci = r["ci95"]
    if not ci:
        return "—"
    return f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if unit.startswith("nats") else f"[{ci[0]}, {ci[1]}]"


def print_table(summary: dict, out=None) -> None:
    if "models" in summary:  # a `probe diagnose --models` run
        print_models_table(summary, out)
        return
    from rich.table import Table

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
        t.add_row(
            r["effect"],
            value_text(r, r["unit"]),
            ci_text(r, r["unit"]),
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
    _footer(c, summary, failed)


def print_models_table(summary: dict, out=None) -> None:
    """Rows = effects, columns = models: each cell the value, its 95% interval and the verdict
    word (bold: significant), in the single-model table's number formats."""
    from rich.table import Table
    from rich.text import Text

    c = console(out)
    c.print("probe diagnose", style="bold")
    for m in summary["models"]:
        g = summary["geometry"][m["id"]]
        c.print(
            f"model {m['id']} ({m['sha256'][:12]}) · mem {g['mem_len']} tgt {g['tgt_len']} "
            f"clamp {g['clamp_len']}"
        )
    ids = [m["id"] for m in summary["models"]]
    t = Table(show_lines=False)
    t.add_column("effect")
    for mid in ids:
        t.add_column(mid, justify="right")
    t.add_column("unit")
    for e in summary["effects"]:
        cells = []
        for mid in ids:
            v = e["values"].get(mid)
            if v is None:
                cells.append(Text("—"))
                continue
            words = [value_text(v, e["unit"]), ci_text(v, e["unit"])]
            words += [v["verdict"]] if v.get("verdict") else []
            cells.append(Text(" ".join(words), style="bold" if v.get("significant") else ""))
        t.add_row(Text(e["effect"]), *cells, Text(e["unit"]))
    c.print(t)
    failed = sorted(
        f"{name} ({mid})"
        for mid, by_probe in summary["checks"].items()
        for name, ch in by_probe.items()
        if not all(v.get("passed", True) for v in ch.values())
    )
    _footer(c, summary, failed)


def _footer(c, summary: dict, failed: list[str]) -> None:
    if failed:
        c.print(f"checks FAILED: {', '.join(failed)}", style="bold red")
    if summary.get("skipped"):
        c.print(f"skipped: {', '.join(summary['skipped'])}")
    c.print(f"run directory: {summary['run_dir']}")
