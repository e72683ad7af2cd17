"""`probe diagnose --models A,B,…`: the diagnose suite on several models side by side: every
non-group probe once per model, the group probe once with the models as its group, each model's
row of it read from that one run (`member_view`). One run directory,
`<out>/diagnose/<id1>+<id2>+…/<UTC-time>-<8 hex>/` (`dir_name` shortens long lists), with the
figure its caller draws (`probe diagnose`: `diagnose_models.png`); summary.json matches the
models' rows by probe and effect (`rows.effects`). Every step is the single-model suite's own.
With `--models`, a probe that does not apply to one of them (boundary repair on a recurrent
state) runs on the others, and `skipped` names the model it left out.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from probes.api.model import geometry as geometry_of
from probes.api.probe_base import ProbeInputError
from probes.framework.models import (
    carries_state,
    is_loss_model,
    model_name,
    model_source,
    split_models,
)
from probes.suite.execute import resolve_progress, run_suite
from probes.suite.plan import check_options, column_model, ident, prepare, require_runs
from probes.suite.rows import by_probe, column_rows, effects
from probes.suite.store import auto_of, close, create, start_record


def dir_name(ids: list[str]) -> str:
    """The run directory's model part: the ids joined by `+`; past 96 characters the first id,
    how many more and a hash of them all (`a+2-more-1f2e3d4c`)."""
    joined = "+".join(ids)
    if len(joined) <= 96:
        return joined
    return f"{ids[0]}+{len(ids) - 1}-more-{hashlib.sha256(joined.encode()).hexdigest()[:8]}"


def diagnose_models(
    models: list[Any] | tuple[Any, ...] | str,
    *,
    skip: tuple[str, ...] | list[str] = (),
    progress: Any = None,
    argv: list[str] | None = None,
    plot: Callable[[Path, dict], str | None] | None = None,
    pinned_auto: dict | None = None,
    **values: Any,
) -> dict[str, Any]:
    """`probe diagnose --models A,B,…`: the suite on each model, side by side. `models`: two or
    more distinct model specs (what `--model` takes, or LossModel objects; or one comma string,
    `models.split_models`); `values`: the run options of `OPTIONS` but `model`, applied to every
    model.

    Every non-group probe runs once per model; the group probe runs once, on `models` as
    its group, and each model's row is read from that run (`member_view`). Everything is
    prepared before the run directory `<out>/diagnose/<id1>+<id2>+…/<UTC-time>-<hex>/` exists
    (`dir_name`), so bad input raises ProbeInputError and leaves nothing behind. The summary:
    `models` (id, path, sha256, in order), `effects` (`effects`), `runs`, `verdicts` and
    `checks` (model id → probe → …; the group run under every member), `geometry` (model id →
    geometry), `passed`, `skipped`, `elapsed_s`, `row_docs`, `plots` (what `plot` drew, as in
    `diagnose`). `pinned_auto`: as `diagnose` takes it, a column per model in order."""
    t0 = time.perf_counter()
    if values.get("model") is not None:
        raise ProbeInputError(
            "--models and --model: give one (--models A,B,… diagnoses each model; --model "
            "repeated gives the group probe's model group)"
        )
    values.pop("model", None)
    models = split_models(models) if isinstance(models, str) else list(models)
    text = ",".join(m if isinstance(m, str) else model_name(m) for m in models)
    if any(isinstance(m, str) and not m.strip() for m in models):
        raise ProbeInputError(f"--models {text!r}: an empty model name; e.g. default,default-mem0")
    if len(models) < 2:
        raise ProbeInputError(
            f"--models {text!r}: give at least two models, e.g. default,default-mem0 "
            "(one model: --model)"
        )
    distance = values.pop("distance", None)
    classes, opts = check_options(skip, values)
    sources = [m if is_loss_model(m) else model_source(m, "--models") for m in models]
    # the same checkpoint or planted spec twice; a LossModel object is itself
    keys = [
        s.resolve() if isinstance(s, Path) else m if isinstance(m, str) else id(m)
        for m, s in zip(models, sources, strict=True)
    ]
    twice = next((m for m, k in zip(models, keys, strict=True) if keys.count(k) > 1), None)
    if twice is not None:
        raise ProbeInputError(f"--models names {str(twice)!r} twice; give each model once")
    progress = resolve_progress(progress)
    runs, skipped, unserved = prepare(
        classes, skip, sources, sources, opts, progress, argv, distance, pinned_auto
    )
    require_runs(runs, skipped)
    lms = [column_model(runs, j, unserved) for j in range(len(sources))]
    ids = [lm.info.id for lm in lms]
    same = next((i for i in ids if ids.count(i) > 1), None)
    if same is not None:
        raise ProbeInputError(
            f"--models: two models have the id {same!r}; the columns need distinct ids (a "
            "planted model's id is its seed: give each its own)"
        )
    stateful = [lm.info.id for lm, s in zip(lms, sources, strict=True)
                if carries_state(s, opts.evaluator)]  # fmt: skip
    try:  # each model's own geometry with the options' overrides, as each of its runs has
        geometry = {
            lm.info.id: geometry_of(
                lm, **{**opts.geometry_overrides(), **({"mem_len": None} if lm.info.id in
                                                       stateful else {})}
            ).to_dict()
            for lm in lms
        }  # fmt: skip
    except ValueError as e:
        raise ProbeInputError(f"bad evaluation geometry: {e}") from None
    run_dir = create(opts, dir_name(ids))

    record = start_record(
        opts,
        skip,
        argv,
        models=[lm.info.to_dict() for lm in lms],
        geometry=geometry,
        auto={lm.info.id: auto_of(runs, j) for j, lm in enumerate(lms)},
    )
    record["options"]["models"] = [model_name(s) for s in sources]
    record["options"]["distance"] = distance or "auto"
    with run_dir.recording(record):
        progress.log(f"diagnose: run directory {run_dir.path}")
        run_suite(runs, run_dir, progress)
        members = [ident(lm.info) for lm in lms]
        per_model = [by_probe(runs, j, run_dir) for j in range(len(ids))]
        summary = {
            "schema_version": 1,
            "command": "diagnose",
            "models": members,
            "geometry": geometry,
            "mem_not_applicable": stateful,
            "effects": effects({m["id"]: column_rows(runs, j, m) for j, m in enumerate(members)}),
            **{
                k: {i: p[k] for i, p in zip(ids, per_model, strict=True)}
                for k in ("runs", "verdicts", "checks")
            },
            "skipped": skipped,
            "run_dir": str(run_dir.path),
        }
        drawn = plot(run_dir.path, summary) if plot is not None else None
        return close(run_dir, record, summary, runs, t0, drawn)
