"""What `probe diagnose` runs: the suite (every probe with a diagnose place), the options it
takes, and every run of it prepared — inputs checked, each model loaded once, pairs built —
before anything is written. Light at import: the CLI reads `OPTIONS` for `probe --help`."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from probes.api import params as params_mod
from probes.api import registry
from probes.framework.kernels import KernelsError
from probes.framework.options import RunOptions
from txl.process_rank import ProcessRank

# The run options diagnose takes (it runs every cache policy it needs itself, so no
# --reset/--carry, and the cached evaluator only, with its choice of memory); `model` may be a
# list: the group.
OPTIONS = (
    "model", "mem", "tgt_len", "clamp_len", "same_length", "n", "seed", "device", "dtype",
    "threads", "out", "quick", "language", "haystack", "haystack_documents", "tokenizer",
    "opening_token",
    "cache", "kernels",
)  # fmt: skip


def suite() -> list[str]:
    """The probes of `probe diagnose`, in row order (read without importing them)."""
    entries = [e for e in registry.entries() if e.diagnose is not None]
    return [e.name for e in sorted(entries, key=lambda e: (e.diagnose, e.name))]


@dataclasses.dataclass
class SuiteRun:
    """One probe run of the suite: `column` is the model it diagnoses (an index into the
    diagnosed models); None for the group run, which serves every column."""

    name: str
    plan: Any  # runner.Prepared
    column: int | None
    summary: dict | None = None

    def serves(self, column: int) -> bool:
        return self.column is None or self.column == column


def ident(info: Any) -> dict[str, str]:
    """A model as the summaries name it: its id, path and sha256."""
    return {"id": info.id, "path": info.path, "sha256": info.sha256}


def check_options(skip, values: dict[str, Any]):
    """What both diagnose modes check first: --skip, the run options and --out."""
    from probes.api.probe_base import ProbeInputError  # lazy: numpy
    from probes.framework.results import RunDirError, check_writable  # lazy: numpy

    if ProcessRank.from_env().enabled:
        raise ProbeInputError(
            "probe diagnose runs in one process (its sweeps do not divide among processes); "
            "run it without torchrun, or run its paired probes one by one under torchrun"
        )
    names = suite()
    unknown = [s for s in skip if s not in names]
    if unknown:
        raise ProbeInputError(
            f"--skip {unknown[0]!r}: not a diagnose probe; choose from {', '.join(names)}"
        )
    extra = sorted(set(values) - set(OPTIONS))
    if extra:
        raise ProbeInputError(f"diagnose takes no option {extra[0]!r}; its options: {OPTIONS}")
    try:
        opts = RunOptions.build(values).as_computed()
    except (params_mod.ParamError, KernelsError) as e:
        raise ProbeInputError(str(e)) from None
    try:
        check_writable(Path(opts.out))
    except RunDirError as e:
        raise ProbeInputError(str(e)) from None
    return {name: registry.get(name) for name in names}, opts


def prepare(
    classes, skip, columns: list, group: list, opts, progress, argv, distance=None, pinned=None
):
    """Every run of the suite, prepared (nothing written): each non-group probe once per column
    (a diagnosed model), the group probe once on `group`; `distance` (--distance) goes to every
    probe with distance bins; `pinned` ((probe, column) → what its 'auto' parameters stand for:
    a rerun's, from its original's probe runs; the group run's is column 0's). Returns (runs,
    skipped, the models of the columns a probe did not apply to); `runs` may be empty
    (`require_runs`)."""
    pinned = pinned or {}
    from probes.api.probe_base import ProbeNotApplicable  # lazy: numpy
    from probes.framework import runner  # lazy: numpy, torch
    from probes.framework.models import ModelCache, model_name  # lazy: numpy

    models = ModelCache()
    common = {k: v for k, v in dataclasses.asdict(opts).items() if k in OPTIONS and k != "model"}
    runs: list[SuiteRun] = []
    unserved: dict[int, Any] = {}  # column → its model, where a probe did not apply to it
    skipped = [name for name in classes if name in skip]
    for name, cls in classes.items():
        if name in skip:
            continue
        fields = {f.name for f in dataclasses.fields(cls.Params)}
        own = {"distance": distance} if distance is not None and "distance" in fields else {}
        if not cls.model_group:
            # a probe that does not apply to one model (a boundary probe on a recurrent state)
            # runs on the others; that model's column has no row of it
            mine, refused = [], []
            for j, source in enumerate(columns):
                try:
                    plan = runner.prepare(name, model=source, progress=progress, argv=argv,
                                          models=models, **own_options(common, source, opts),
                                          pinned_auto=pinned.get((name, j)), **own)  # fmt: skip
                except ProbeNotApplicable as e:
                    refused.append((model_name(source), e.reason))
                    if e.model is not None:
                        unserved[j] = e.model
                    continue
                mine.append(SuiteRun(name, plan, j))
            if not mine:
                skipped.append(f"{name} ({refused[0][1]})")
                continue
            skipped += [f"{name} on {who} ({why})" for who, why in refused]
            runs += mine
        elif len(group) < 2:
            skipped.append(f"{name} (no model group)")
        else:
            try:
                plan = runner.prepare(
                    name, model=group, progress=progress, argv=argv, models=models, **common,
                    pinned_auto=pinned.get((name, 0)), **own,
                )  # fmt: skip
            except ProbeNotApplicable as e:
                skipped.append(f"{name} ({e.reason})")
                continue
            runs.append(SuiteRun(name, plan, None))
    return runs, skipped, unserved


def require_runs(runs: list[SuiteRun], skipped: list[str]) -> None:
    """A suite with nothing left to run is bad input (ProbeInputError, one line)."""
    from probes.api.probe_base import ProbeInputError  # lazy: numpy

    if not runs:
        raise ProbeInputError(f"nothing left to run (skipped: {', '.join(skipped)}); skip fewer")


def own_options(common: dict, source: Any, opts: Any) -> dict:
    """A column's run options: `common`, without `--mem` for a model scored by its state
    (`models.carries_state`)."""
    from probes.framework.models import carries_state  # lazy: numpy

    return {**common, "mem": None} if carries_state(source, opts.evaluator) else common


def column_model(runs: list[SuiteRun], column: int, unserved: dict[int, Any]) -> Any:
    """The loaded LossModel of a column: from its own runs, else its place in the group run,
    else as loaded by a probe that did not apply to it."""
    own = next((r.plan.model for r in runs if r.column == column), None)
    if own is not None:
        return own
    group = next((r for r in runs if r.column is None), None)
    return group.plan.ctx.group[column] if group is not None else unserved[column]
