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

from typing import Any

from probes._version import __version__

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
