"""The contract of probe and model authors, the one package either imports:

- a probe: `Probe` (what a probe is: `plan`, then `execute` on a `RunContext`, giving an
  `Outcome`), `probe` (its registration; `add_probe_package` for a package of them), `param` /
  `increasing_ints` / `ints_text` (its declared options), `Column` and the column sets (its
  table), `signed` / `effect_row` (its diagnose rows), `zero_check` (its own checks), and the
  errors that refuse a run (`ProbeInputError`, `ProbeNotApplicable`);
- a paired probe (a table of per-pair deltas): `PairedProbe` and its `Job`s, planned for a fact
  edit by distance with `plan_by_distance` and its options `FactParams` (`DistanceParams`,
  `distance_param`); a probe that scores its own rows: `Rows`, `score_batches`, `score_rows`;
- a model: `LossModel` (the door every probe scores through, and every capability it looks for),
  `Horizon` (what a scored token can see), `AdapterError`, and `register_model_kind` for a new
  kind of model file (`add_kind_module` for a module registering kinds when imported).

Names are imported on first use, so `import probes.api` loads neither numpy nor torch (`probe
--help` stays fast)."""

from __future__ import annotations

import importlib
from typing import Any

# public name → the module of probes.api that defines it
_WHERE = {
    "Probe": "probe_base",
    "RunContext": "probe_base",
    "LengthLimit": "probe_base",
    "Outcome": "probe_base",
    "ProbeInputError": "probe_base",
    "ProbeNotApplicable": "probe_base",
    "PairedProbe": "paired",
    "Job": "paired",
    "FactParams": "fact_pairs",
    "DistanceParams": "fact_pairs",
    "distance_param": "fact_pairs",
    "plan_by_distance": "fact_pairs",
    "Rows": "rows",
    "score_batches": "rows",
    "zero_check": "checks",
    "probe": "registry",
    "add_probe_package": "registry",
    "RegistryError": "registry",
    "param": "params",
    "increasing_ints": "params",
    "ints_text": "params",
    "ParamError": "params",
    "Column": "declarations",
    "DISTANCE": "declarations",
    "STATS": "declarations",
    "ACCURACY": "declarations",
    "CONTRAST": "declarations",
    "REACH": "declarations",
    "PAIRED": "declarations",
    "signed": "declarations",
    "effect_row": "declarations",
    "LossModel": "model",
    "score_rows": "model",
    "ModelInfo": "model",
    "TokenScores": "model",
    "Horizon": "horizon",
    "AdapterError": "errors",
    "ModelDirError": "errors",
    "register_model_kind": "kinds",
    "add_kind_module": "kinds",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'probes.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"probes.api.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
