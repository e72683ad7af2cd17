"""`probe rerun RUN_DIR`: repeat a run (`probe run` or `probe diagnose`) from its run.json and say
whether the numbers match.

The comparison walks both summaries and compares every number and every result string (verdicts,
details), but not timings, paths or documentation prose (metric and row docs, which may be
reworded):
"exact" (bitwise equal), "close" (max |difference| ≤ 1e-6: the same computation with another
thread count or BLAS), or "differ". A changed model file (sha256), probe version, synth
generator version or package version is noted, since any of them explains a difference, and so
is another CPU (run.json's `machine.cpu`, `cpu_kernels`: float kernels take other paths there, so
a CPU run's last bits are its CPU's); runs of another version are still compared, never refused.

The new run goes where the command line says (`out`), else under `results/` of the working
directory — never where run.json's `options.out` says: a run directory may come from anyone, and
the directory it names is not the user's choice.

A run recorded on another machine names its model either as a shipped model (`default`: found
in this installation) or by an absolute path; a path that does not exist here is mapped to the
shipped model whose weights have the recorded sha256 (and noted), else the rerun is refused.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import synth
from probes._version import __version__
from probes.api import registry
from probes.api.probe_base import ProbeInputError
from probes.framework import kernels
from probes.framework.models import PACKAGE_MODELS, shipped_by_sha256
from probes.framework.options import RunOptions
from probes.framework.provenance import machine
from probes.framework.results import (
    FINISHED,
    RunDirError,
    check_shape,
    dumps,
    load_run,
    load_samples,
    read_json,
    safe_id,
    status,
)
from probes.framework.runner import execute, prepare, run
from probes.suite.one import diagnose
from probes.suite.parallel import Worker
from probes.suite.several import diagnose_models
from probes.suite.store import (
    planned_measurement,
    recorded_measurement,
    recorded_options,
    resumed_options,
)

# timings, where things lie ("runs": diagnose's sub-run paths, "path": a model's) and prose
# (documentation strings may be reworded without any number changing)
IGNORED = {"run_dir", "runs", "elapsed_s", "plots", "started_utc", "path"}
PROSE = {"metric_docs", "row_docs", "measure", "doc", "verdict_rule", "why"}
TOLERANCE = 1e-6


def diff(a: Any, b: Any, path: str = "", added: list[str] | None = None) -> list[dict]:
    """Every place two JSON documents differ (numbers compared exactly). A key only the rerun
    has is output a newer version adds, not a changed result: it is listed in `added` (when
    given) instead; a key only the original has is a difference."""
    out: list[dict] = []
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k in IGNORED or k in PROSE:
                continue
            where = f"{path}.{k}" if path else k
            if k not in a:
                if added is not None:
                    added.append(where)
                continue
            out += diff(a.get(k), b.get(k), where, added)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += diff(x, y, f"{path}[{i}]", added)
    elif a != b:
        out.append({"path": path, "original": a, "rerun": b})
    return out


def _abs_diff(d: dict) -> float:
    a, b = d["original"], d["rerun"]
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return abs(float(a) - float(b))
    return math.inf


def rerun(
    run_dir: Path,
    out: str | None = None,
    progress=None,
    allow_file_probes: bool = False,
    plot: Callable[[Path, dict], str | None] | None = None,
    kernels_mode: str | None = None,
    resume: Path | None = None,
    jobs: int = 1,
    worker: Worker | None = None,
) -> dict:
    """Repeat the run of `run_dir` (a `probe run` or a `probe diagnose` directory) and compare.
    Raises ProbeInputError (one line) for a directory that cannot be repeated. A run.json that
    names a probe file (`path/to/file.py:Class`) is refused unless `allow_file_probes`: importing
    it runs its code, and a run directory may come from anyone. `plot`: a rerun diagnose's
    figure, as `diagnose` takes it. `kernels_mode`: compute with these kernels instead of the
    recorded ones (the process must have them: `probe rerun --kernels` restarts into them), to
    see what they change or to record a run again under them. `resume`: the unfinished run an
    earlier rerun of this one left (interrupted, killed), finished with the options and kernels
    it recorded, then compared: a diagnose in its own directory (`finish_rerun`), a probe run
    in a new directory beside it that takes back the chunks it scored
    (`check_same_measurement`). `jobs`, `worker`: a diagnose's probes side by side, as
    `diagnose` takes them (a diagnose of one model only)."""

    out = RunOptions.out if out is None else out  # never run.json's: it may come from anyone
    record, original = load_run(run_dir)
    if original is None or record.get("status") not in FINISHED:
        raise ProbeInputError(
            f"{str(run_dir)!r} did not finish (status {record.get('status')!r}"
            f"{'' if original is not None else ', no summary.json'}): only a finished run can be "
            "compared"
        )
    argv = ["probe", "rerun", str(run_dir)]
    spread = {"jobs": jobs, "worker": worker}
    if jobs > 1 and not spreads(record):
        raise ProbeInputError(
            f"--jobs runs the probes of one model's diagnose side by side; {str(run_dir)!r} is "
            "not one: drop --jobs"
        )
    if resume is not None and record.get("command") == "diagnose":
        check_shape(Path(run_dir) / "run.json", record, {"options": dict})
        argv += ["--resume", str(resume)]
        kwargs = resumed_options(Path(resume))
        pins = diagnose_auto(Path(run_dir), original, record)
        new = finish_rerun(record, Path(resume), dict(kwargs), progress, plot, argv, pins,
                           spread)  # fmt: skip
        kernels_mode = kwargs.get("kernels") or "native"
        passed = bool(new["passed"])
    elif record.get("command") == "diagnose":
        check_shape(Path(run_dir) / "run.json", record, {"options": dict})
        kwargs = dict(record["options"])
        kwargs.update(_recorded_cache(record))
        kwargs["out"] = out
        kwargs["kernels"] = kernels_mode or kwargs.get("kernels")
        kwargs["pinned_auto"] = diagnose_auto(Path(run_dir), original, record)
        if "models" in kwargs:  # `probe diagnose --models`: run.json's `models` are their infos
            models = _local_models(kwargs.pop("models"), {"group": record.get("models")})
            new = diagnose_models(models, progress=progress, argv=argv, plot=plot, **kwargs)
            kwargs["model"] = models  # what _mapped compares with the recorded names
        else:
            kwargs["model"] = _local_models(kwargs.get("model"), record)
            new = diagnose(progress=progress, argv=argv, plot=plot, **spread, **kwargs)
        passed = bool(new["passed"])
    elif isinstance(record.get("probe"), dict) and "options" in record:
        file = Path(run_dir) / "run.json"
        check_shape(file, record, {"options": dict, "params": dict})
        check_shape(file, record["probe"], {"name": str})

        spec, kwargs = rerun_options(record)

        if registry.is_file_spec(str(spec)) and not allow_file_probes:
            raise ProbeInputError(
                f"{str(run_dir)!r}: run.json names the probe file {spec!r}; rerun imports a file "
                "(and runs its code) only with --allow-file-probes"
            )
        if resume is None:
            kwargs["out"] = out
            kwargs["kernels"] = kernels_mode or kwargs.get("kernels")
            summary = run(spec, progress=progress, argv=argv, **kwargs)
        else:
            argv += ["--resume", str(resume)]
            partial = Path(resume)
            theirs = unfinished_probe_run(partial)
            kwargs["kernels"] = kernels_mode = theirs["options"].get("kernels") or "native"
            if isinstance(theirs.get("threads"), int):  # the count its chunks were scored at
                kwargs["threads"] = theirs["threads"]
            kwargs["out"] = str(partial.resolve().parents[2])  # <out>/<probe>/<model>/<run>
            prepared = prepare(spec, progress=progress, argv=argv, **kwargs)
            check_same_measurement(prepared, theirs, partial)
            summary = execute(prepared, kept=(partial, load_samples(partial)))
        new = summary.to_dict()
        passed = summary.passed
    else:
        raise ProbeInputError(
            f"{str(run_dir)!r}: run.json names neither a probe nor `probe diagnose`; give a "
            "directory written by `probe run` or `probe diagnose`"
        )
    added: list[str] = []
    differences = diff(original, new, added=added)
    worst = max((_abs_diff(d) for d in differences), default=0.0)
    match = "exact" if not differences else "close" if worst <= TOLERANCE else "differ"
    return {
        "original": str(run_dir),
        "rerun": new["run_dir"],
        "match": match,
        "max_abs_diff": 0.0 if not differences else (worst if math.isfinite(worst) else None),
        "tolerance": TOLERANCE,
        "differences": differences,
        "notes": _notes(record, original, new)
        + _cpu(
            record,
            new_machine=machine(),
            kernels_now=kernels.in_effect(),
            differs=bool(differences),
        )
        + _mapped(record, kwargs)
        + _other_kernels(record, kernels_mode)
        + _auto_today(new)
        + _added(added),
        "passed": match != "differ" and passed,
    }


def spreads(record: dict) -> bool:
    """Whether `--jobs` applies to the run of this run.json: a diagnose of one model."""
    options = record.get("options")
    return (
        record.get("command") == "diagnose"
        and isinstance(options, dict)
        and ("models" not in options)
    )


def finish_rerun(
    record: dict,
    partial: Path,
    values: dict,
    progress,
    plot,
    argv: list[str],
    pins: dict,
    spread: dict | None = None,
) -> dict:
    """Finish `partial`, the unfinished diagnose a rerun of the diagnose recorded in `record`
    started, with the options, thread count and kernels it recorded (`values`: its
    `resumed_options`), as `probe diagnose --resume` does (`pins`: its original's
    `diagnose_auto`; `spread`: its `jobs` and `worker`), and return its summary.
    ProbeInputError (one line) when it is not a rerun of this one (another option or model
    file), or when this process has not its kernels."""
    theirs = read_json(partial / "run.json")
    ours = recorded_options(record)
    for key in sorted(set(ours) | set(values)):
        if key in ("out", "threads", "kernels", "model"):
            continue  # where it runs; the count and kernels it records; models by sha256 below
        if ours.get(key) != values.get(key):
            raise ProbeInputError(
                f"--resume {str(partial)!r} is not a rerun of this diagnose (its {key} is "
                f"{values.get(key)!r}, this one's {ours.get(key)!r}); give the directory "
                "`probe rerun` started for it"
            )
    if _group_shas(theirs) != _group_shas(record):
        raise ProbeInputError(
            f"--resume {str(partial)!r} is not a rerun of this diagnose (its model files "
            "differ); give the directory `probe rerun` started for it"
        )
    skip = values.pop("skip")
    return diagnose(
        skip=skip,
        progress=progress,
        argv=argv,
        resume=partial,
        plot=plot,
        pinned_auto=pins,
        **(spread or {}),
        **values,
    )


def unfinished_probe_run(partial: Path) -> dict:
    """The run.json of `partial`, the probe run a stopped rerun wrote, for `probe rerun
    --resume`. ProbeInputError (one line) when it is not a probe run directory where `probe
    run` writes one (<out>/<probe>/<model>/<run>: its new run goes beside it), a process still
    runs in it, or it finished."""
    try:
        theirs, _ = load_run(partial)
    except RunDirError as e:
        raise ProbeInputError(f"--resume: {e}") from None
    if not isinstance(theirs.get("probe"), dict) or not isinstance(theirs.get("options"), dict):
        raise ProbeInputError(
            f"--resume {str(partial)!r} is not a probe run directory; give the one `probe "
            "rerun` started for this run"
        )
    try:
        check_shape(partial / "run.json", theirs, {"params": dict, "model": dict})
        check_shape(partial / "run.json", theirs["probe"], {"name": str, "version": int})
        check_shape(partial / "run.json", theirs["model"], {"id": str})
    except RunDirError as e:
        raise ProbeInputError(f"--resume: {e}") from None
    where = partial.resolve()
    layout = [safe_id(theirs["probe"]["name"]), safe_id(theirs["model"]["id"])]
    if [where.parent.parent.name, where.parent.name] != layout:
        raise ProbeInputError(
            f"--resume {str(partial)!r} is not where `probe rerun` wrote it (<out>/"
            f"{layout[0]}/{layout[1]}/<run>); give it there"
        )
    state = status(partial, theirs)
    if state == "running":
        raise ProbeInputError(f"--resume {str(partial)!r}: a process still runs in it")
    if state in FINISHED:
        raise ProbeInputError(f"--resume {str(partial)!r} finished ({state}): nothing to resume")
    return theirs


def check_same_measurement(prepared, theirs: dict, partial: Path) -> None:
    """That `partial` (its run.json `theirs`) measured what `prepared`, the rerun about to
    finish it, measures — the same probe version, parameters, options (but --out and
    --threads), model files as loaded now, geometry and horizon as resolved now, device, dtype
    and evaluator — so that the chunks it scored are the ones this run would score; else
    ProbeInputError (one line) naming the first difference. Its probe must keep what an
    interrupted run scored."""
    lm = prepared.model
    want = {**planned_measurement(prepared), "device": lm.info.device, "dtype": lm.info.dtype,
            "evaluator": lm.info.evaluator}  # fmt: skip
    try:
        got = {**recorded_measurement(theirs), **{k: theirs.get(k) for k in
               ("device", "dtype", "evaluator")}}  # fmt: skip
    except (KeyError, TypeError):
        got = {}
    differences = diff(json.loads(dumps(got)), json.loads(dumps(want)))
    if differences:
        d = differences[0]
        what = (
            "its model file differs from the one loaded now"
            if d["path"].startswith("models")
            else f"its {d['path'] or 'run.json'} is {d['original']!r}, this rerun's {d['rerun']!r}"
        )
        raise ProbeInputError(
            f"--resume {str(partial)!r} is not an unfinished rerun of this run ({what}); give "
            "the directory `probe rerun` started for it"
        )
    if not prepared.cls.resumes():
        raise ProbeInputError(
            f"--resume: probe {prepared.cls.name} keeps nothing of an interrupted run; rerun "
            "without --resume"
        )


def _group_shas(record: dict) -> list:
    """The sha256 of each model a diagnose's run.json names (the diagnosed one first)."""
    infos = record.get("group") or [record.get("model") or {}]
    return [i.get("sha256") if isinstance(i, dict) else None for i in infos]


def rerun_options(run_json: dict) -> tuple[str, dict[str, Any]]:
    """(probe spec, keyword arguments of `run`) that repeat the run recorded in run.json."""
    spec = run_json["probe"].get("spec") or run_json["probe"]["name"]
    kwargs = dict(run_json["options"])
    kwargs["model"] = _local_models(kwargs.get("model"), run_json)
    if kwargs.get("threads") is None and isinstance(run_json.get("threads"), int):
        # a run recorded before options held the resolved count: the count it computed with
        # (a product's last bits may depend on it; the default is this machine's)
        kwargs["threads"] = run_json["threads"]
    kwargs.update(_recorded_cache(run_json))
    kwargs.update(run_json["params"])
    kwargs["pinned_auto"] = recorded_auto(run_json)
    return spec, kwargs


def recorded_auto(run_json: dict) -> dict[str, str]:
    """What each 'auto' parameter of the recorded run stood for (run.json `auto`, as the
    parameter's own text), which its rerun repeats: a later version may resolve 'auto'
    otherwise. {} for a run recorded before runs kept it (its rerun resolves 'auto' again).
    ProbeInputError (one line) for an `auto` that is not names and texts."""
    auto = run_json.get("auto") or {}
    if not isinstance(auto, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and len(v) <= 4096 for k, v in auto.items()
    ):
        raise ProbeInputError(
            "run.json's auto is not a mapping of parameter names to their values as text (e.g. "
            '{"distance": "14-126,127-1985"}); give a run directory `probe run` wrote'
        )
    return dict(auto)


def diagnose_auto(
    run_dir: Path, summary: dict, record: dict
) -> dict[tuple[str, int], dict[str, str]]:
    """What the 'auto' parameters of each probe run of a recorded diagnose stood for ((probe,
    column) → text), for its rerun to repeat: each probe run's own run.json where its directory
    is inside `run_dir`, else what the diagnose's run.json `record` kept of it (a copy without
    its probe runs, as a curated diagnose is kept). A probe run neither has gives nothing: its
    rerun resolves 'auto' again."""
    out: dict[tuple[str, int], dict[str, str]] = {}
    kept = record.get("auto") if isinstance(record.get("auto"), dict) else {}
    for j, column in enumerate(_columns(kept, summary)):
        for probe, auto in column.items():
            out[(str(probe), j)] = recorded_auto({"auto": auto})
    for (probe, column), where in _probe_runs(run_dir, summary).items():
        if (where / "run.json").is_file():
            out[(probe, column)] = recorded_auto(read_json(where / "run.json"))
    return out


def _columns(by_model: dict, summary: dict) -> list[dict]:
    """A diagnose's per-probe mapping (summary `runs`, run.json `auto`) as one dict per column:
    itself for one model, model id → probe → … for `--models` (in the summary's order)."""
    models = summary.get("models")
    if isinstance(models, list):
        columns = [by_model.get(m.get("id")) if isinstance(m, dict) else None for m in models]
    else:
        columns = [by_model]
    return [c if isinstance(c, dict) else {} for c in columns]


def _probe_runs(run_dir: Path, summary: dict) -> dict[tuple[str, int], Path]:
    """(probe, column) → the directory of that probe run of a diagnose (its summary's `runs`),
    inside `run_dir`."""
    runs = summary.get("runs") if isinstance(summary.get("runs"), dict) else {}
    base = Path(run_dir).resolve()
    out = {}
    for j, column in enumerate(_columns(runs, summary)):
        for probe, rel in column.items():
            where = (base / rel).resolve() if isinstance(rel, str) else base
            if where != base and where.is_relative_to(base):
                out[(str(probe), j)] = where
    return out


def _auto_today(new: dict) -> list[str]:
    """A note for each 'auto' parameter the rerun repeated from its original that this version
    would resolve otherwise (`auto_today` in the run.json of the new run, or of each probe run
    of a new diagnose)."""
    if new.get("run_dir") is None:
        return []
    if new.get("command") == "diagnose":
        where = {
            f"{probe}: ": d for (probe, _), d in _probe_runs(Path(new["run_dir"]), new).items()
        }
    else:
        where = {"": Path(new["run_dir"])}
    notes = []
    for prefix, run_dir in sorted(where.items(), key=lambda kv: kv[0]):
        record = read_json(run_dir / "run.json")  # a run this process just wrote
        now = record.get("auto_today") if isinstance(record, dict) else None
        was = record.get("auto") or {}
        notes += [
            f"{prefix}--{name.replace('_', '-')} auto: repeated the recorded "
            f"{was.get(name)!r}; this version resolves it to "
            f"{value if value.startswith('nothing') else repr(value)}"
            for name, value in sorted((now or {}).items())
        ]
    return sorted(set(notes), key=notes.index)


def _recorded_cache(record: dict) -> dict[str, Any]:
    """`cache="hidden"` for a run recorded before the cached evaluator had a choice of memory
    (no `cache` option, every model on the cached evaluator without a `cache` record): it ran
    on hidden states, and repeating it so keeps the comparison bitwise. Nothing otherwise."""
    if "cache" in (record.get("options") or {}):
        return {}
    infos = [record.get("model"), *(record.get("group") or []), *(record.get("models") or [])]
    infos = [i for i in infos if isinstance(i, dict)]
    old = bool(infos) and all(i.get("evaluator") == "cached" and "cache" not in i for i in infos)
    return {"cache": "hidden"} if old else {}


def _local_models(model: Any, record: dict) -> Any:
    """The recorded model(s), each as something this installation can load: a path that exists
    here or a shipped name stays; a missing path becomes the shipped model whose weights have
    the recorded sha256; with none, ProbeInputError (one line)."""

    names = model if isinstance(model, list) else [model]
    infos = record.get("group") or [record.get("model") or {}]
    local = []
    for i, name in enumerate(names):
        here = str(name).startswith("planted:") or Path(str(name)).exists()
        if name is None or here or (PACKAGE_MODELS / str(name)).is_dir():
            local.append(name)
            continue
        sha = (infos[i] if i < len(infos) and isinstance(infos[i], dict) else {}).get("sha256")
        shipped = shipped_by_sha256(sha or "")
        if shipped is None:
            raise ProbeInputError(
                f"the recorded model {name!r} does not exist here and no shipped model has its "
                f"sha256 {str(sha)[:12]}…; put the checkpoint at that path or rerun the command "
                "with --model"
            )
        local.append(shipped)
    return local if isinstance(model, list) else local[0]


def _mapped(record: dict, kwargs: dict) -> list[str]:
    """A note for each recorded model path that was replaced by a shipped model."""
    options = record.get("options") or {}
    recorded = options["models"] if "models" in options else options.get("model")
    used = kwargs.get("model")
    pairs = zip(recorded, used, strict=False) if isinstance(recorded, list) else [(recorded, used)]
    return [
        f"model {a!r} does not exist here: used the shipped model {b!r} (same sha256)"
        for a, b in pairs
        if a != b
    ]


def _shas(summary: dict) -> list:
    """The sha256 of each model a summary diagnosed (one, or `--models`' several)."""
    return [m.get("sha256") for m in summary.get("models") or [summary.get("model") or {}]]


def _added(paths: list[str]) -> list[str]:
    """The note naming output the original run did not record (a newer version's additions),
    a few paths and their count."""
    if not paths:
        return []
    names = sorted({p.split(".")[-1].split("[")[0] for p in paths})
    return [
        f"the rerun adds {len(paths)} fields the original did not record ({', '.join(names[:6])})"
    ]


def _cpu(record: dict, new_machine: dict, kernels_now: str, differs: bool) -> list[str]:
    """A CPU run on native kernels has its CPU's last bits: float kernels take other paths
    (vector width, the BLAS's code path) on another CPU. Say so when the CPUs differ, or when a
    difference meets a record that does not name its CPU. Portable kernels on both sides take
    the same path on any x86-64 CPU (probes/framework/kernels.py): nothing to say unless the
    numbers differ all the same, and then both CPUs are named (a path the pins missed)."""

    if record.get("device") not in (None, "cpu"):
        return []
    recorded_kernels = (record.get("options") or {}).get("kernels") or "native"
    portable = recorded_kernels == "portable" and kernels_now == "portable"
    recorded_machine = record.get("machine") or {}
    old = (recorded_machine.get("cpu"), recorded_machine.get("cpu_kernels"))
    now = (new_machine.get("cpu"), new_machine.get("cpu_kernels"))
    if portable:
        if not differs:
            return []
        return [
            f"portable kernels on both sides, recorded on {old[0] or 'an unnamed CPU'} and rerun "
            f"on {now[0] or 'an unnamed CPU'}, and still the numbers differ: a code path the "
            "pins miss (probes/framework/kernels.py)"
        ]
    if old[0] is None:
        if not differs:
            return []
        return [
            "the original does not record its CPU: a run on another CPU may differ in the last "
            f"bits (this one: {now[0] or 'unknown'}, kernels {now[1] or 'unknown'}); runs "
            "recorded with --kernels portable repeat bit for bit on any x86-64 CPU"
        ]
    if old == now:
        return []
    return [
        f"recorded on another CPU ({old[0]}, kernels {old[1] or 'unknown'}; here {now[0] or 'unknown'}, "
        f"kernels {now[1] or 'unknown'}): native float kernels take other paths, so the last bits "
        "may differ; runs recorded with --kernels portable repeat bit for bit on any x86-64 CPU"
    ]


def _other_kernels(record: dict, kernels_mode: str | None) -> list[str]:
    """The note of a rerun told to compute with other kernels than the run recorded."""
    was = (record.get("options") or {}).get("kernels") or "native"
    if kernels_mode is None or kernels_mode == was:
        return []
    return [f"rerun with {kernels_mode} kernels (--kernels); the original ran {was} ones"]


def _notes(record: dict, original: dict, new: dict) -> list[str]:
    """What changed besides the numbers and could explain a difference."""

    notes = []
    if _shas(original) != _shas(new):
        notes.append("the model file changed (sha256 differs)")
    if original.get("version") != new.get("version"):
        notes.append(f"probe version changed: {original.get('version')} → {new.get('version')}")
    recorded = (record.get("synth") or {}).get("generator_version")
    if recorded is not None and recorded != getattr(synth, "GENERATOR_VERSION", None):
        notes.append(
            f"synth generator version changed: {recorded} → {synth.GENERATOR_VERSION} "
            "(the same seed now makes other text)"
        )
    if record.get("package_version") != __version__:
        notes.append(f"package version changed: {record.get('package_version')} → {__version__}")
    return notes
