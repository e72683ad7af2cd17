"""results/curated/real/index.json, the record the docs cite for every real-model run's command,
kernels and wall: each entry names a run directory this repository ships, and says what that
run recorded. A diagnose's probe runs are not shipped, so they are listed inside its entry."""

import json
from pathlib import Path

import pytest

from probes.api import registry

REAL = Path(__file__).resolve().parents[1] / "results" / "curated" / "real"
INDEX = json.loads((REAL / "index.json").read_text(encoding="utf-8"))


def minutes(wall: str) -> float:
    """'h:mm:ss', 'm:ss.ss' or 'mmm:ss.ss' (as /usr/bin/time writes it) in minutes."""
    seconds = 0.0
    for part in wall.split(":"):
        seconds = seconds * 60 + float(part)
    return seconds / 60


def test_the_index_has_one_entry_per_name_and_per_directory():
    assert len({e["name"] for e in INDEX}) == len(INDEX)
    assert len({e["dir"] for e in INDEX}) == len(INDEX)


@pytest.mark.parametrize("entry", INDEX, ids=[e["name"] for e in INDEX])
def test_each_entry_names_a_shipped_run_with_the_kernels_and_threads_it_recorded(entry):
    run_dir = REAL / entry["dir"]
    assert (run_dir / "run.json").is_file() and (run_dir / "summary.json").is_file(), run_dir
    record = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    options = record.get("options") or {}
    assert entry["kernels"] == (options.get("kernels") or "native")
    assert entry["threads"] == options["threads"]
    assert entry["command"][:2] in (["probe", "run"], ["probe", "rerun"], ["probe", "diagnose"])


@pytest.mark.parametrize(
    "entry", [e for e in INDEX if "runs" in e], ids=lambda e: e["name"]
)  # fmt: skip
def test_a_diagnose_entry_lists_each_of_its_probe_runs_and_they_fit_in_its_wall(entry):
    summary = json.loads((REAL / entry["dir"] / "summary.json").read_text(encoding="utf-8"))
    assert sorted(r["probe"] for r in entry["runs"]) == sorted(summary["runs"])
    assert all(r["probe"] in registry.names() for r in entry["runs"])
    assert all(r["command"][:3] == ["probe", "run", r["probe"]] for r in entry["runs"])
    walls = [minutes(r["wall"]) for r in entry["runs"]]
    total, jobs = minutes(entry["wall"]), entry.get("jobs", 1)
    assert max(walls) <= total + 0.01
    if jobs == 1:  # one probe run after another: together they are the diagnose's wall
        assert sum(walls) == pytest.approx(total, abs=0.01)
    else:  # side by side: together at most `jobs` of them at every moment of its wall
        assert sum(walls) <= jobs * total + 0.01
