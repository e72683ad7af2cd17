"""One probe run, from options to a run directory and a `Summary`: what `probe run` and
`probes.run(...)` both call, in two steps:

    prepare(probe, **options) -> Prepared   check every input, load the model(s), plan the pairs
    execute(prepared) -> Summary            create the run directory and run

Order matters for the promise "bad input leaves nothing behind": everything that can be wrong
with the input (probe name, parameters, geometry, model path, vocabulary, device, --out) is
checked and the pairs are built in `prepare`, before any directory exists; `probe diagnose`
prepares all of its probes (sharing one `ModelCache`) before it creates its own. From `execute`
on a failure is internal (exit 3) or an interruption (exit 130), and the directory keeps what was
done, with the status in run.json (a file the disk refuses is exit 2, naming it). The model
is reached only through the LossModel protocol
(probes.api.model): a checkpoint path is loaded by probes.adapters.txl, a LossModel object is used
as given.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import synth
from probes._version import __version__
from probes.api import params as params_mod
from probes.api import registry
from probes.api.errors import AdapterError
from probes.api.model import geometry as geometry_of
from probes.api.model import horizon as horizon_of
from probes.api.model import row_bytes
from probes.api.probe_base import ProbeInputError, ProbeNotApplicable, RunContext
from probes.framework import provenance, scored_chunks, token_strings
from probes.framework.background_imports import start_background_imports
from probes.framework.kernels import KernelsError
from probes.framework.models import ModelCache, model_name, model_sources
from probes.framework.options import RunOptions
from probes.framework.progress import Progress
from probes.framework.results import SCHEMA_VERSION, RunDir, RunDirError, check_writable
from probes.framework.summary import Summary, member_view
from probes.limits import LimitError, require_memory
from probes.stats import VERDICT_RULE
from probes.texts import choose
from txl.process_rank import ProcessRank


@dataclass
class Prepared:
    """A run whose every input was checked and whose pairs are built; nothing written yet.
    `execute` creates its run directory and runs it."""

    cls: type
    spec: str  # what repeats it (a name, or an absolute path/to/file.py:Class)
    params: Any
    instance: Any  # the probe, planned
    ctx: RunContext
    sources: list[Any]  # Paths or LossModel objects, the probe's model first
    options: RunOptions  # the run's options, models named (run.json, `probe rerun`)
    argv: list[str] | None
    prepare_s: float  # the time `prepare` took; a run's elapsed_s adds its own execution
    texts: Any = None  # probes.texts.choose.TextSetup: what the texts are written in

    @property
    def model(self) -> Any:
        return self.ctx.model


def prepare(
    probe: str,
    *,
    progress: Progress | bool | None = None,
    argv: list[str] | None = None,
    models: ModelCache | None = None,
    pinned_auto: dict[str, str] | None = None,
    **values: Any,
) -> Prepared:
    """Check every input, load the model(s) and plan the probe; write nothing. Raises
    ProbeInputError (one line) for bad input. `values`: the run options (`RunOptions`: `model`
    is a checkpoint directory or shipped model name, a LossModel object, or a list of them for a
    model group) and the probe's own parameters. `models` shares loaded checkpoints between
    several prepared runs. `pinned_auto`: what each 'auto' parameter stands for in this run
    instead of what this version resolves it to (a rerun's: its original's run.json `auto`)."""
    t0 = time.perf_counter()
    try:
        cls = registry.get(probe)
    except registry.RegistryError as e:
        raise ProbeInputError(str(e)) from None
    shared = set(RunOptions.fields())
    try:
        opts = RunOptions.build({k: v for k, v in values.items() if k in shared})
        opts = opts.as_computed()
    except (params_mod.ParamError, KernelsError) as e:
        raise ProbeInputError(str(e)) from None
    try:
        params = params_mod.build(cls.Params, {k: v for k, v in values.items() if k not in shared})
    except params_mod.ParamError as e:
        raise ProbeInputError(f"probe {cls.name}: {e}") from None
    if opts.reset is not None and cls.runs_every_policy:
        raise ProbeInputError(
            f"probe {cls.name} runs every cache policy (reset, carry and a foreign cache) on "
            f"the same tokens; drop --{'reset' if opts.reset else 'carry'}"
        )
    try:
        check_writable(Path(opts.out))
    except RunDirError as e:
        raise ProbeInputError(str(e)) from None
    ranks = ProcessRank.from_env()
    if ranks.enabled and not cls.shards:
        raise ProbeInputError(
            f"probe {cls.name} does not divide its scoring among processes (only probes that "
            "score through score_batches do: the paired fact probes, boundary, cross-doc); run "
            "it in one process, without torchrun"
        )
    sources = model_sources(cls, opts.model)
    if progress is None or isinstance(progress, bool):
        progress = Progress.auto(quiet=progress is False or not ranks.is_main)
    models = models if models is not None else ModelCache()
    dev = opts.device
    if any(isinstance(s, Path) for s in sources):
        from probes.adapters.base import resolve_device  # lazy: torch

        try:
            dev = resolve_device(opts.device)
        except AdapterError as e:
            raise ProbeInputError(str(e)) from None
    ranks.join("cuda" if dev == "cuda" else "cpu")  # before a model lands on a GPU: its own
    loaded = [
        models.get(
            s,
            evaluator=opts.evaluator,
            device=dev,
            dtype=opts.dtype,
            sinks=opts.sinks,
            cache=opts.cache,
            cache_positions=opts.cache_positions,
            log=progress.log,
        )
        for s in sources
    ]
    lm = loaded[0]
    texts = None
    if cls.needs_language:
        texts = choose.setup(cls, opts, sources, loaded)
    from dataclasses import replace

    try:
        geometry = geometry_of(lm, **opts.geometry_overrides())
        for i, m in enumerate(loaded):  # an adapter's own limits (probes.adapters.hf: no clamp_len)
            own = getattr(m, "check_geometry", None)
            if own is not None:  # a group's other members are scored at their own default
                own(geometry if i == 0 else replace(m.default_geometry(), reset=geometry.reset))
    except ValueError as e:
        raise ProbeInputError(f"bad evaluation geometry: {e}") from None
    check_row_memory(loaded, geometry)
    group = loaded if getattr(cls, "model_group", False) else []
    ctx = RunContext(
        model=lm,
        geometry=geometry,
        horizon=horizon_of(lm, geometry),
        texts=texts.texts if texts else None,
        n=opts.n or (cls.quick_n if opts.quick else cls.default_n),
        seed=opts.seed,
        quick=opts.quick,
        progress=progress,
        group=group,
        margin=cls.margin if opts.min_effect is None else opts.min_effect,
        margin_source="probe" if opts.min_effect is None else "--min-effect",
        ranks=ranks,
        token_view=opts.token_view or 0,
        pinned_auto=dict(pinned_auto or {}),
    )
    instance = cls(params)
    try:
        instance.plan(ctx)
    except ProbeNotApplicable as e:
        e.model = lm  # `probe diagnose --models` still has a column for it
        raise
    except ProbeInputError:
        raise
    except ValueError as e:
        raise ProbeInputError(f"probe {cls.name}: {e}") from None
    check_row_length(instance, ctx)
    names = [model_name(s) for s in sources]
    opts = dataclasses.replace(opts, model=names if group else names[0])
    if (
        texts is not None
        and texts.record is not None
        and isinstance(texts.record["haystack"], list)
    ):
        hay = texts.record["haystack"]  # absolute: a rerun from elsewhere reads the same files
        opts = dataclasses.replace(opts, haystack=hay if len(hay) > 1 else hay[0])
    spec = probe
    if registry.is_file_spec(probe):
        file, attr = probe.rsplit(":", 1)
        spec = f"{Path(file).resolve()}:{attr}"
    prepare_s = time.perf_counter() - t0
    return Prepared(cls, spec, params, instance, ctx, sources, opts, argv, prepare_s, texts)


def check_row_length(instance, ctx) -> None:
    """Refuse planned texts longer than a row of the model can hold (its optional
    `max_row_length`: learned absolute positions), before any run directory exists."""
    longest_row = getattr(instance, "longest_row", None)
    models = ctx.model if isinstance(ctx.model, list | tuple) else [ctx.model]
    for m in models:
        fn = getattr(m, "max_row_length", None)
        limit = fn(ctx.geometry) if fn is not None else None
        if limit is None or longest_row is None:
            continue
        longest = longest_row()
        if longest > limit:
            raise ProbeInputError(
                f"probe {instance.name}: its texts reach {longest:,} tokens, beyond the "
                f"{limit:,} positions of {m.info.id}; use shorter --distance bins or "
                "--evaluator window"
            )


def check_row_memory(models: list, geometry) -> None:
    """Refuse a geometry whose single forward row would not fit in memory, before any text is
    built or scored (ProbeInputError naming the sizes)."""

    for m in models:
        need = row_bytes(m, geometry)
        if need is None:
            continue
        try:
            require_memory(
                f"one row of {m.info.id} at mem {geometry.mem_len:,}, tgt_len {geometry.tgt_len:,}",
                need,
                "lower --mem or --tgt-len",
            )
        except LimitError as e:
            raise ProbeInputError(str(e)) from None


def _threads(n: int | None):
    """torch's thread count for the run, restored after it (no torch loaded: nothing to set)."""
    if "torch" not in sys.modules:
        from contextlib import nullcontext

        return nullcontext(None)
    from probes.adapters import txl as adapters  # lazy: torch, loaded only once a model is

    return adapters.threads(n)


def execute(
    prepared: Prepared, *, out: str | Path | None = None, kept: tuple[Path, list] | None = None
) -> Summary:
    """Create the run directory (under `out`, default: the prepared --out) and run. From here
    a failure is internal, an interruption, or a file the disk refused (ProbeInputError naming
    it: disk full, read-only), and run.json records the status. `kept`: an interrupted run of
    this very measurement and its samples, for a probe that `resumes()` (its samples, or the
    chunks it scored: run.json records where they came from and how many chunks were taken)."""
    p = prepared
    lm = p.ctx.model
    options = p.options if out is None else dataclasses.replace(p.options, out=str(out))
    if kept is not None:
        p.ctx.kept_samples = list(kept[1])
        p.ctx.kept_chunks = scored_chunks.Kept(kept[0])
    if p.ctx.ranks is not None and not p.ctx.ranks.is_main:
        return _execute(p, None, options)  # its share of the scoring; rank 0 writes
    try:
        run_dir = RunDir.create(Path(options.out), p.cls.name, lm.info.id)
        return _execute(p, run_dir, options, kept)
    except RunDirError as e:  # bad --out, or a file the disk refused (RunWriteError)
        raise ProbeInputError(str(e)) from None


def _execute(
    p: Prepared, run_dir: RunDir | None, options: RunOptions, kept: tuple[Path, list] | None = None
) -> Summary:
    """Run the probe into `run_dir`; None (a rank other than 0): run it and write nothing."""
    cls, ctx = p.cls, p.ctx
    started = time.perf_counter()  # not prepare's start: a diagnose prepares every probe first
    with _threads(options.threads) as n_threads:
        if run_dir is None:
            return _summary(p, p.instance.execute(ctx), None, [], started)
        record = run_record(cls, p.spec, p.params, options, ctx, n_threads, p.argv, p.texts)
        if kept is not None:
            # relative to this run's directory: both move together inside a diagnose
            where = os.path.relpath(Path(kept[0]).resolve(), run_dir.path.resolve())
            record["kept_samples"] = {"from": where, "samples": len(kept[1])}
        with run_dir.recording(record, began=started - p.prepare_s):
            ctx.run_dir = run_dir
            ctx.log(f"run directory {run_dir.path}")
            if options.dtype == "bfloat16":
                ctx.log(BFLOAT16_NOTE)

            start_background_imports()  # the plots' and the statistics' imports, during the scoring
            outcome = p.instance.execute(ctx)
            if ctx.texts is not None and ctx.texts.reports_unmatched:
                outcome.metrics["unmatched_pairs"] = ctx.unmatched
                outcome.metric_docs["unmatched_pairs"] = UNMATCHED_DOC
            if ctx.bins_cut:
                outcome.metrics["bins_cut"] = ctx.bins_cut
                outcome.metric_docs["bins_cut"] = BINS_CUT_DOC
            if outcome.arrays:
                run_dir.write_npz("tokens.npz", outcome.arrays)
            if outcome.texts:
                strings = token_strings.arrays(outcome.texts, p.texts)  # for `probe show`
                run_dir.write_npz("texts.npz", {**outcome.texts, **strings})
            with run_dir.writing("*.png"):
                plots = [draw(run_dir.path) for draw in outcome.plots]
            summary = _summary(p, outcome, run_dir, plots, started)
            run_dir.write_json("summary.json", summary.to_dict())
            if kept is not None:
                record["kept_samples"]["chunks"] = ctx.kept_chunks.taken
            run_dir.finish(record, passed=summary.passed, elapsed_s=summary.elapsed_s)
            return summary


BINS_CUT_DOC = (
    "the auto distance bins the run cut (or left out) so that its texts fit the model's "
    "positions and the haystack, and the limit that cut them"
)

BFLOAT16_NOTE = (
    "note: bfloat16 moves per-pair deltas by tenths of a nat against float32 (SmolLM2-135M: up "
    "to 0.33); report float32 numbers (run.json records the dtype)"
)

UNMATCHED_DOC = (
    "pairs (or texts) drawn but not scored: their base and variant did not keep the same "
    "tokens outside the edit in the model's tokenizer, or no draw put their distance in its "
    "bin (run.json's vocabulary names the tokenizer)"
)


def _summary(
    p: Prepared, outcome, run_dir: RunDir | None, plots: list[str], started: float
) -> Summary:
    """The run's Summary (its run_dir None on a rank that writes nothing); `started`: when its
    execution began."""
    cls, ctx, lm = p.cls, p.ctx, p.ctx.model
    summary = Summary(
        probe=cls.name,
        version=cls.version,
        model={"id": lm.info.id, "path": lm.info.path, "sha256": lm.info.sha256},
        geometry=ctx.geometry.to_dict(),
        n_pairs=outcome.n_pairs,
        metrics=outcome.metrics,
        bins=outcome.bins,
        checks=outcome.checks,
        verdict=outcome.verdict,
        run_dir=str(run_dir.path) if run_dir is not None else None,
        params=params_mod.to_dict(p.params),
        evaluator=lm.info.evaluator,
        dtype=lm.info.dtype,
        device=lm.info.device,
        seed=ctx.seed,
        n=ctx.n,
        horizon=ctx.horizon.to_dict(),
        metric_docs=outcome.metric_docs,
        higher_is_better=outcome.higher_is_better,
        verdict_rule=_verdict_rule(),
        margin=margin_record(cls, ctx),
        elapsed_s=round(p.prepare_s + time.perf_counter() - started, 3),
        plots=plots,
        columns=[dataclasses.asdict(c) for c in cls.columns],
    )
    if cls.diagnose is not None:
        summary.diagnose_rows = _diagnose_rows(cls, ctx, summary.to_dict())
    return summary


def _diagnose_rows(cls, ctx, summary: dict) -> list[dict] | dict[str, list[dict]]:
    """A diagnose probe's rows; a model_group probe's for each member of its group."""
    if not cls.model_group:
        return cls.diagnose_rows(summary)
    members = [{"id": m.info.id, "path": m.info.path, "sha256": m.info.sha256} for m in ctx.group]
    return {m["id"]: cls.diagnose_rows(member_view(summary, m)) for m in members}


def run(probe: str, **options: Any) -> Summary:
    """Run a probe and return its Summary: `prepare(probe, **options)` (every option of `probe
    run`, see there), then `execute`. Raises ProbeInputError (one line) for bad input, before
    anything is written. Under torchrun every rank calls it and leaves the process group after."""
    ranks = ProcessRank.from_env()
    try:
        return execute(prepare(probe, **options))
    finally:
        ranks.leave()


def _verdict_rule() -> str:

    return VERDICT_RULE


def margin_record(cls, ctx: RunContext) -> dict[str, Any]:
    """The run's minimum effect: its value, unit, and where it comes from."""
    own = ctx.margin_source == "probe"
    return {
        "value": ctx.margin,
        "unit": cls.margin_unit,
        "source": "probe" if own else "--min-effect",
        "why": cls.margin_why if own else "given with --min-effect",
    }


def run_record(
    cls, spec: str, params, options: RunOptions, ctx: RunContext, threads, argv, texts=None
) -> dict[str, Any]:
    """run.json: everything needed to know where a result came from and to repeat it."""

    lm = ctx.model
    lang = None if ctx.texts is None else ctx.texts.lang  # the synth language they are drawn in
    synth_info = None
    if lang is not None:
        config = lang.config.to_dict()
        synth_info = {
            "generator_version": getattr(synth, "GENERATOR_VERSION", None),
            "language_fingerprint": lang.fingerprint,
            "language_config": config,
            "language_config_sha256": lang.config.sha256,
        }
    return {
        "schema_version": SCHEMA_VERSION,
        "status": "running",
        "argv": provenance.portable_argv(argv),
        "command": ["probe", "run", spec, *options.argv(), *params_mod.argv(params)],
        "probe": {
            "name": cls.name,
            "version": cls.version,
            "class": f"{cls.__module__}:{cls.__qualname__}",
            "spec": spec,
        },
        "params": params_mod.to_dict(params),
        "auto": dict(ctx.auto),  # what each 'auto' parameter stood for
        **({"auto_today": dict(ctx.auto_today)} if ctx.auto_today else {}),
        "options": options.record(),
        "model": lm.info.to_dict(),
        **({"group": [m.info.to_dict() for m in ctx.group]} if ctx.group else {}),
        "geometry": ctx.geometry.to_dict(),
        "horizon": ctx.horizon.to_dict(),
        "evaluator": lm.info.evaluator,
        "dtype": lm.info.dtype,
        "device": lm.info.device,
        "threads": threads,
        "seeds": {"seed": options.seed, "namespace": "probe"},
        "n_per_group": ctx.n,
        "processes": (ctx.ranks or ProcessRank()).record(),
        "margin": margin_record(cls, ctx),
        "git": provenance.git_state(),
        "package_version": __version__,
        "synth": synth_info,
        "vocabulary": texts.vocabulary.record() if texts is not None else None,
        "text": texts.record if texts is not None else None,
        **({"bridge": ctx.texts.record()} if ctx.texts and ctx.texts.record() else {}),
        "versions": provenance.versions(),
        "machine": provenance.machine(),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
