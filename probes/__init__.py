"""Paired, per-token probes of a long-context language model.

    import probes
    summary = probes.run("fact-swap", mem=640, n=40)     # the same as `probe run fact-swap --mem 640 --n 40`
    summary.bins[0]["delta_mean"], summary.verdict, summary.run_dir

`probes.run` takes the options of `probe run` as keyword arguments (probe-specific ones too:
`distance="16-64,700-900"`), writes the same run directory and returns the `Summary` whose
`to_dict()` is what `probe run --json` prints. Bad input raises `probes.ProbeInputError`.
`model=` also takes any object with the `probes.api.model.LossModel` protocol (an external
model), or a list of them for a model group. torch's thread count is restored after the run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probes._version import __version__
from probes.api import kinds as _kinds
from probes.api import registry as _registry

# The built-in probes, model kinds and paired engine, named to the contract here, at the top, so
# that the contract names nothing above it: each is imported only when it is first asked for.
_registry.add_probe_package("probes.library", Path(__file__).resolve().parent / "library")
_registry.set_paired_engine("probes.engine.paired")
_kinds.add_kind_module("probes.adapters.kinds")

__all__ = ["ProbeInputError", "__version__", "run"]


def run(probe: str, **options: Any):
    """Run a probe (see `probes.framework.runner.run` for the options) and return its Summary."""
    from probes.framework.runner import run as _run  # lazy: `import probes` stays light

    return _run(probe, **options)


def __getattr__(name: str):
    if name == "ProbeInputError":
        from probes.api.probe_base import ProbeInputError  # lazy: `import probes` stays light

        return ProbeInputError
    raise AttributeError(f"module 'probes' has no attribute {name!r}")
