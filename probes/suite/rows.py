"""The rows of the diagnose table: each probe run's own rows (`Probe.diagnose_rows`, recorded in
its summary.json) in suite order, with the runs, verdicts and checks behind them; with
`--models`, the rows of several models matched by probe and effect."""

from __future__ import annotations

import os
from typing import Any

from probes.framework.summary import member_view
from probes.suite.plan import SuiteRun

ROW_DOCS = {
    "value": "the row's number in its unit (see each probe's metric_docs for the definition)",
    "ci95": "95% interval: Student-t over pairs (rows with a paired test); bootstrap percentile "
    "over texts (lengths read off a sweep: a first-crossing c on its grid; descriptive, may "
    "under-cover with few texts)",
    "p_value": "two-sided Wilcoxon signed-rank p over pairs (no correction across rows)",
    "verdict": "significant | negligible | inconclusive with the row's margin (probes.stats; "
    "rows with a paired test only)",
    "margin": "the probe's minimum effect of interest, in the row's unit",
    "detail": "context from the same run",
}


def column_rows(runs: list[SuiteRun], column: int, member: dict) -> list[dict]:
    """A column's rows in suite order; the group run's as `member` sees it. Each run's summary
    records its rows (`diagnose_rows`); a run written before it did gives them from its class."""
    out: list[dict] = []
    for r in runs:
        if not r.serves(column):
            continue
        recorded = r.summary.get("diagnose_rows")
        if recorded is None:
            view = r.summary if r.column is not None else member_view(r.summary, member)
            out += r.plan.cls.diagnose_rows(view)
        else:
            out += recorded if r.column is not None else recorded[member["id"]]
    return out


def by_probe(runs: list[SuiteRun], column: int, run_dir: Any) -> dict[str, dict]:
    """runs, verdicts and checks of the runs that serve a column, each keyed by probe."""
    served = [r for r in runs if r.serves(column)]
    return {
        "runs": {r.name: os.path.relpath(r.summary["run_dir"], run_dir.path) for r in served},
        "verdicts": {r.name: r.summary["verdict"] for r in served},
        "checks": {r.name: r.summary["checks"] for r in served},
    }


# The fields of a row that differ between models (a `diagnose_models` cell); effect, probe,
# unit and measure name the row.
CELL = (
    "metric", "value", "ci95", "p_value", "verdict", "significant", "margin", "n", "detail",
    "censored",
)  # fmt: skip


def effects(columns: dict[str, list[dict]]) -> list[dict]:
    """The rows of several models matched by (probe, effect), not by metric (a group probe's
    metric path may name the model), in order of first appearance: {effect, probe, unit,
    measure, values: {model id: cell}}; a model without that row has no cell."""
    out: dict[tuple[str, str], dict] = {}
    for mid, rows in columns.items():
        for row in rows:
            entry = out.setdefault(
                (row["probe"], row["effect"]),
                {k: row[k] for k in ("effect", "probe", "unit", "measure")} | {"values": {}},
            )
            entry["values"][mid] = {k: row[k] for k in CELL}
    return list(out.values())
