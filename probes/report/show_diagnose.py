"""`probe show DIAG_DIR`'s page: a `probe diagnose` run as one self-contained static page in the
style of a probe run's (probes/report/show_page.py: the same head and Content-Security-Policy,
its plots inside it, nothing asked of the network).

It holds the run's provenance, the diagnose table — every row summary.json holds and every field
of a row (the value in the row's unit, ≥ when censored; bold when significant; the row docs as
the headers' titles), or with `--models` a row per effect and a column per model — the diagnose
plot(s), and an entry per probe run the diagnose names (`runs`): the probe, its verdict, and a
relative link to that run's own page, or the one line saying why it has none. Which probe runs
are in the directory and whose page was written is the caller's (probes/cli/show.py); this
module reads summary.json as `probe report` does (probes/report/suite_table.py) and knows no
probe by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probes.report.show_page import command_html, document, esc, plots_html, run_parts
from probes.report.show_run import ShowError
from probes.report.suite_table import ci_text, value_text

STYLE = """
table.diag{border-collapse:collapse;font-size:12.5px;margin:6px 0}
table.diag td,table.diag th{border-bottom:1px solid #ddd;padding:3px 8px;vertical-align:top}
table.diag th{text-align:left}table.diag td.n{text-align:right;white-space:nowrap}
table.diag tr.sig td.v,table.diag td.sig{font-weight:600}
table.diag td.doc,table.diag td .doc{color:#555;max-width:320px}table.diag td.doc{min-width:160px}
table.diag td.m{text-align:right;min-width:110px}table.diag td.m .doc{font-weight:400}
table.diag td.e{min-width:180px}table.diag td.e .doc{font-size:11.5px}
ul.runs{padding-left:18px}ul.runs li{margin:4px 0}.reason{color:#8a3b12}
.failed{color:#b2182b;font-weight:600}.plots img{max-width:900px}
"""

# A row's fields, in the table's order: (key, header, numeric); any other field a row holds
# follows them. `measure` is written under the effect, `censored` and `significant` are shown
# by the value (≥, bold).
ROW_COLUMNS = (
    ("effect", "effect", False), ("probe", "probe", False), ("value", "value", True),
    ("ci95", "95% CI", True), ("p_value", "p", True), ("verdict", "verdict", False),
    ("margin", "margin", True), ("n", "n", True), ("unit", "unit", False),
    ("detail", "detail", False), ("metric", "metric", False),
)  # fmt: skip
SHOWN_BY_VALUE = ("censored", "significant")
# What a --models cell shows in its text; its other fields are in its title.
CELL_SHOWN = ("value", "ci95", "verdict", "detail", *SHOWN_BY_VALUE)


def is_models(summary: dict) -> bool:
    """A `probe diagnose --models` run: a column per model."""
    return "models" in summary


def check(summary: dict, file: Path) -> None:
    """ShowError (one line) unless summary.json has the table `probe diagnose` writes."""

    def refuse(what: str) -> ShowError:
        return ShowError(
            f"{str(file)!r}: {what}; expected the summary.json `probe diagnose` writes (run it "
            "again)"
        )

    if is_models(summary):
        models, effects = summary.get("models"), summary.get("effects")
        if not isinstance(models, list) or not all(
            isinstance(m, dict) and isinstance(m.get("id"), str) for m in models
        ):
            raise refuse("`models` is not a list of models with ids")
        if not isinstance(effects, list) or not all(
            isinstance(e, dict) and isinstance(e.get("values"), dict) for e in effects
        ):
            raise refuse("`effects` is not a list of effects with values")
        runs = summary.get("runs", {})
        if not isinstance(runs, dict) or not all(
            isinstance(v, dict) and all(isinstance(p, str) for p in v.values())
            for v in runs.values()
        ):
            raise refuse("`runs` is not {model: {probe: directory}}")
    else:
        rows = summary.get("rows")
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise refuse("`rows` is not a list of rows")
        runs = summary.get("runs", {})
        if not isinstance(runs, dict) or not all(isinstance(p, str) for p in runs.values()):
            raise refuse("`runs` is not {probe: directory}")


@dataclass
class SubRun:
    """One probe run of the diagnose, as summary.json names it."""

    probe: str
    model: str | None  # its column's model (a --models run); None for one model
    rel: str  # its directory, relative to the diagnose directory
    verdict: str
    link: str | None = None  # the relative address of its page, when it has one
    reason: str | None = None  # why it has none, one line


def sub_runs(summary: dict) -> list[SubRun]:
    """The probe runs summary.json names (`runs`), in its order; a group run (RECL) that serves
    every column of a --models run is named once per model."""
    runs, verdicts = summary.get("runs") or {}, summary.get("verdicts") or {}
    if not is_models(summary):
        return [SubRun(p, None, rel, str(verdicts.get(p, ""))) for p, rel in runs.items()]
    out = []
    for mid, by_probe in runs.items():
        said = verdicts.get(mid) if isinstance(verdicts.get(mid), dict) else {}
        out += [SubRun(p, mid, rel, str(said.get(p, ""))) for p, rel in by_probe.items()]
    return out


def _docs(summary: dict) -> dict[str, str]:
    docs = summary.get("row_docs")
    return {str(k): str(v) for k, v in docs.items()} if isinstance(docs, dict) else {}


def _th(key: str, header: str, docs: dict[str, str]) -> str:
    title = f' title="{esc(docs[key])}"' if key in docs else ""
    return f'<th data-key="{esc(key)}"{title}>{esc(header)}</th>'


def _text(r: dict, key: str, unit: str) -> str:
    """A field of a row (or a --models cell) as the terminal table writes it."""
    v = r.get(key)
    try:
        if key == "value":
            return value_text({"value": v, "censored": r.get("censored")}, unit)
        if key == "ci95":
            return ci_text({"ci95": v}, unit)
        if key == "p_value":
            return "—" if v is None else f"{v:.2g}"
        if key == "margin":
            return "—" if v is None else f"±{v:g}"
    except (TypeError, ValueError, IndexError):
        pass  # a field not of its usual type is shown as it is
    return "—" if v is None else str(v)


def rows_table(summary: dict) -> str:
    """One model's table: a row per effect, a column per field of the rows."""
    rows, docs = summary["rows"], _docs(summary)
    known = [k for k, _, _ in ROW_COLUMNS]
    extra = sorted({k for r in rows for k in r} - {*known, "measure", *SHOWN_BY_VALUE})
    cols = [c for c in ROW_COLUMNS if any(c[0] in r for r in rows)] + [(k, k, False) for k in extra]
    head = "".join(_th(k, "effect · measure" if k == "effect" else h, docs) for k, h, _ in cols)
    body = []
    for r in rows:
        unit = str(r.get("unit", ""))
        cells = "".join(
            f'<td class="e">{esc(_text(r, k, unit))}<div class="doc">'
            f"{esc(r.get('measure', ''))}</div></td>"
            if k == "effect"
            else f'<td class="{"n " if num else ""}{"v" if k == "value" else ""}'
            f'{" doc" if k == "detail" else ""}">{esc(_text(r, k, unit))}</td>'
            for k, _, num in cols
        )
        sig = ' class="sig"' if r.get("significant") else ""
        body.append(
            f'<tr{sig} data-effect="{esc(r.get("effect", ""))}" '
            f'data-probe="{esc(r.get("probe", ""))}">{cells}</tr>'
        )
    return f'<table class="diag" id="diagnose-table"><tr>{head}</tr>{"".join(body)}</table>'


def models_table(summary: dict) -> str:
    """A --models run's table: a row per effect, a column per model; each cell the value, its
    95% interval and verdict (bold: significant), its other fields in its title."""
    ids = [m["id"] for m in summary["models"]]
    docs = _docs(summary)
    head = (
        _th("effect", "effect · measure", docs) + _th("probe", "probe", docs)
        + "".join(f'<th data-model="{esc(m)}">{esc(m)}</th>' for m in ids)
        + _th("unit", "unit", docs)
    )  # fmt: skip
    body = []
    for e in summary["effects"]:
        unit = str(e.get("unit", ""))
        cells = []
        for mid in ids:
            v = e["values"].get(mid)
            if not isinstance(v, dict):
                cells.append(f'<td class="n" data-model="{esc(mid)}">—</td>')
                continue
            lines = [_text(v, "value", unit), _text(v, "ci95", unit)]
            lines += [str(v["verdict"])] if v.get("verdict") else []
            rest = [f"{k} {_text(v, k, unit)}" for k in v if k not in CELL_SHOWN]
            cells.append(
                f'<td class="m{" sig" if v.get("significant") else ""}" data-model="{esc(mid)}" '
                f'title="{esc(" · ".join(rest))}">{"<br>".join(map(esc, lines))}'
                f'<div class="doc">{esc(v.get("detail", ""))}</div></td>'
            )
        body.append(
            f'<tr data-effect="{esc(e.get("effect", ""))}" data-probe="{esc(e.get("probe", ""))}">'
            f'<td class="e">{esc(e.get("effect", ""))}<div class="doc">'
            f"{esc(e.get('measure', ''))}</div></td><td>{esc(e.get('probe', ''))}</td>"
            f"{''.join(cells)}<td>{esc(unit)}</td></tr>"
        )
    return f'<table class="diag" id="diagnose-table"><tr>{head}</tr>{"".join(body)}</table>'


def _geometry(g: Any) -> str:
    if not isinstance(g, dict):
        return ""
    return f"mem {g.get('mem_len')} tgt {g.get('tgt_len')} clamp {g.get('clamp_len')}"


def _model(m: Any) -> str:
    m = m if isinstance(m, dict) else {}
    return f"model {m.get('id')} ({str(m.get('sha256', ''))[:12]})"


def failed_checks(summary: dict) -> list[str]:
    """The probes whose own check failed (with the model, for a --models run)."""

    def failed(ch: Any) -> bool:
        return isinstance(ch, dict) and not all(
            v.get("passed", True) for v in ch.values() if isinstance(v, dict)
        )

    checks = summary.get("checks") or {}
    if not is_models(summary):
        return [name for name, ch in checks.items() if failed(ch)]
    return sorted(
        f"{name} ({mid})"
        for mid, by_probe in checks.items()
        if isinstance(by_probe, dict)
        for name, ch in by_probe.items()
        if failed(ch)
    )


def provenance(run: dict, summary: dict, run_dir: Path) -> str:
    lines = []
    if is_models(summary):
        geometry = summary.get("geometry") or {}
        for m in summary["models"]:
            lines.append(f"{_model(m)} · {_geometry(geometry.get(m['id']))}")
    else:
        group = [g.get("id") for g in (summary.get("group") or [])[1:] if isinstance(g, dict)]
        lines.append(
            f"{_model(summary.get('model'))} · {_geometry(summary.get('geometry'))}"
            + (f" · group: {', '.join(map(str, group))}" if group else "")
        )
    resumed = run.get("resumed_utc") or []
    git, started, status = run_parts(run)
    parts = [
        git,
        started,
        f"resumed {', '.join(map(str, resumed))}" if resumed else "",
        f"{summary.get('elapsed_s')} s" if summary.get("elapsed_s") is not None else "",
        status,
    ]
    lines.append(" · ".join(p for p in parts if p))
    argv = run.get("argv")
    command = " ".join(map(str, argv)) if isinstance(argv, list) else "probe diagnose"
    return "".join(f'<p class="prov">{esc(line)}</p>' for line in lines) + command_html(
        command, run_dir
    )


def runs_html(entries: Sequence[SubRun], present: bool) -> str:
    """An entry per probe run: the probe, its verdict, a link to its page or why it has none."""
    if not entries:
        return ""
    items = []
    for s in entries:
        who = f" ({esc(s.model)})" if s.model else ""
        tail = (
            f' · <a href="{esc(s.link)}">its page</a>'
            if s.link
            else f' · <span class="reason">{esc(s.reason)}</span>'
            if s.reason
            else ""
        )
        items.append(
            f'<li data-probe="{esc(s.probe)}" data-model="{esc(s.model or "")}" '
            f'data-run="{esc(s.rel)}"><b>{esc(s.probe)}</b>{who}: {esc(s.verdict)}{tail}</li>'
        )
    note = (
        ""
        if present
        else '<p class="note">The probe runs\' directories are not in this copy (it keeps the '
        "table, the plot and the record); each verdict is the one the diagnose recorded.</p>"
    )
    return f'<h2>The probe runs</h2>{note}<ul class="runs">{"".join(items)}</ul>'


def page(run: dict, summary: dict, run_dir: Path, entries: Sequence[SubRun], present: bool) -> str:
    """The whole page (module docstring); `present`: whether any probe run's directory is in
    the diagnose directory."""
    if is_models(summary):
        title = "probe diagnose · " + ", ".join(m["id"] for m in summary["models"])
        table = models_table(summary)
    else:
        title = f"probe diagnose · {(summary.get('model') or {}).get('id')}"
        table = rows_table(summary)
    body = [f"<h1>{esc(title)}</h1>", provenance(run, summary, run_dir), table]
    failed = failed_checks(summary)
    if failed:
        body.append(f'<p class="failed">checks FAILED: {esc(", ".join(failed))}</p>')
    if summary.get("skipped"):
        body.append(f'<p class="note">skipped: {esc(", ".join(map(str, summary["skipped"])))}</p>')
    if summary.get("mem_not_applicable"):
        body.append(
            '<p class="note">--mem does not apply to (a recurrent state, at its own geometry): '
            f"{esc(', '.join(map(str, summary['mem_not_applicable'])))}</p>"
        )
    body.append(plots_html(run_dir, summary.get("plots") or []))
    body.append(runs_html(entries, present))
    return document(title, body, STYLE)
