"""report/ reads results only: it imports neither the registry, nor a probe, nor the engine,
nor the run machinery, and draws what summary.json records; the run machinery never imports
report."""

import ast
import io
from pathlib import Path

import pytest

from probes.report.tables import print_summary

PROBES = Path(__file__).resolve().parents[1] / "probes"


def imported(package: str) -> list[tuple[str, str]]:
    """(file, module) of every import in a package, function-local ones included."""
    out = []
    for path in sorted((PROBES / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                out += [(path.name, f"{node.module}.{a.name}") for a in node.names]
            elif isinstance(node, ast.Import):
                out += [(path.name, a.name) for a in node.names]
    return out


def test_report_imports_no_registry_probe_engine_or_run_machinery():
    banned = ("probes.framework", "probes.engine", "probes.library", "probes.suite", "probes.api")
    bad = [(f, m) for f, m in imported("report") if m.startswith(banned)]
    assert bad == []


@pytest.mark.parametrize("package", ["framework", "suite"])
def test_the_run_machinery_imports_no_report(package):
    assert [(f, m) for f, m in imported(package) if m.startswith("probes.report")] == []


def summary(**extra) -> dict:
    return {
        "probe": "not-installed-here",
        "version": 1,
        "model": {"id": "m", "sha256": "0" * 64},
        "geometry": {"mem_len": 8, "tgt_len": 8, "clamp_len": 16},
        "bins": [{"distance_lo": 4, "distance_hi": 9, "n": 3, "delta_mean": 0.25, "odd": "x"}],
        "checks": {},
        "verdict": "a verdict",
        **extra,
    }


def table(s: dict) -> str:
    out = io.StringIO()
    print_summary(s, out)
    return out.getvalue()


def test_the_table_has_the_columns_the_summary_records_without_the_probe_class():
    columns = [
        {"header": "distance", "key": "distance_lo", "format": "range", "identifies": True},
        {"header": "Δ mean", "key": "delta_mean", "format": "delta", "identifies": False},
    ]
    text = table(summary(columns=columns))
    assert "Δ mean" in text and "4–9" in text and "+0.250" in text
    assert "odd" not in text  # a bin field no column shows


def test_a_summary_without_columns_shows_every_plain_bin_field():
    text = table(summary())
    assert "distance_lo" in text and "odd" in text
