"""report/ reads results only: it draws what summary.json records (the import rules,
tests/test_import_rules.py, hold that it imports neither the registry, nor a probe, nor the
engine, nor the run machinery)."""

import io

from probes.report.tables import print_summary


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
