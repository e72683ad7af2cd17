"""`Summary`: what a probe run reports; `to_dict()` is the `probe run --json` document and
summary.json (the CLI contract in docs/design.md)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from probes.framework.results import SCHEMA_VERSION


@dataclass
class Summary:
    """What a run reports; `to_dict()` is the `--json` document (docs/design.md, *CLI contract*)."""

    probe: str
    version: int
    model: dict[str, Any]
    geometry: dict[str, Any]
    n_pairs: int
    metrics: dict[str, Any]
    bins: list[dict[str, Any]]
    checks: dict[str, dict[str, Any]]
    verdict: str
    run_dir: str | None
    params: dict[str, Any] = field(default_factory=dict)
    evaluator: str = "cached"
    dtype: str = "float32"
    device: str = "cpu"
    seed: int = 0
    n: int = 0
    horizon: dict[str, Any] = field(default_factory=dict)
    metric_docs: dict[str, str] = field(default_factory=dict)
    higher_is_better: dict[str, bool] = field(default_factory=dict)
    verdict_rule: str = ""
    margin: dict[str, Any] = field(default_factory=dict)  # value, unit, source, why
    elapsed_s: float = 0.0
    plots: list[str] = field(default_factory=list)
    # the probe's bin table (`Probe.columns` as dicts), so a report needs no probe class
    columns: list[dict[str, Any]] = field(default_factory=list)
    # a diagnose probe's rows (`Probe.diagnose_rows`), so the suite reads them from the result; a
    # model_group probe's by member id (each as `member_view` sees it); None: not a diagnose probe
    diagnose_rows: list[dict[str, Any]] | dict[str, list[dict[str, Any]]] | None = None

    @property
    def passed(self) -> bool:
        return all(c.get("passed", True) for c in self.checks.values())

    def to_dict(self) -> dict[str, Any]:
        out = {"schema_version": SCHEMA_VERSION, **dataclasses.asdict(self), "passed": self.passed}
        if out["diagnose_rows"] is None:
            del out["diagnose_rows"]
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Summary:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in names})


def member_view(summary: dict, member: dict) -> dict:
    """A model's view of a group run: its summary with `model` set to that member ({id, path,
    sha256}), which is what a group probe's `diagnose_rows` reads to give that member's rows."""
    return {**summary, "model": member}
