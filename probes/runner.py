"""One probe run, from options to a run directory and a `Summary`: what `probe run` and
`probes.run(...)` both call.

Order matters for the promise "bad input leaves nothing behind": everything that can be wrong
with the input (probe name, parameters, geometry, model path, vocabulary, device, --out) is
checked and the pairs are built before the run directory is created. From then on a failure is
internal (exit 3) or an interruption (exit 130), and the directory keeps what was done, with the
status in run.json.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probes import params as params_mod
from probes import registry
from probes.base import ProbeInputError, Progress, RunContext
from probes.results import SCHEMA_VERSION, RunDir, RunDirError, check_writable, dumps

PACKAGE_MODELS = Path(__file__).resolve().parent / "models"
DEFAULT_MODEL = "default"

# The common options of `probe run` (their names may not be used by a probe's Params).
COMMON = (
    "model",
    "mem",
    "tgt_len",
    "clamp_len",
    "same_length",
    "reset",
    "n",
    "seed",
    "device",
    "evaluator",
    "dtype",
    "threads",
    "out",
    "quick",
    "language",
    "json",
    "quiet",
)


@dataclass
class Summary:
    """What a run reports; `to_dict()` is the `--json` document (DESIGN.md, "CLI contract")."""

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
    elapsed_s: float = 0.0
    plots: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c.get("passed", True) for c in self.checks.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "probe": self.probe,
            "version": self.version,
            "model": self.model,
            "geometry": self.geometry,
            "horizon": self.horizon,
            "evaluator": self.evaluator,
            "dtype": self.dtype,
            "device": self.device,
            "params": self.params,
            "seed": self.seed,
            "n": self.n,
            "n_pairs": self.n_pairs,
            "metrics": self.metrics,
            "metric_docs": self.metric_docs,
            "higher_is_better": self.higher_is_better,
            "bins": self.bins,
            "checks": self.checks,
            "passed": self.passed,
            "verdict": self.verdict,
            "verdict_rule": self.verdict_rule,
            "run_dir": self.run_dir,
            "plots": self.plots,
            "elapsed_s": self.elapsed_s,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Summary:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in names})


def resolve_model_path(model: str | os.PathLike | None) -> Path:
    """A checkpoint directory from --model: a path, or the name of a shipped model."""
    if model is None:
        model = DEFAULT_MODEL
    p = Path(model).expanduser()
    if p.exists():
        return p
    shipped = PACKAGE_MODELS / str(model)
    if str(model) and "/" not in str(model) and shipped.exists():
        return shipped
    names = (
        sorted(x.name for x in PACKAGE_MODELS.iterdir() if x.is_dir())
        if PACKAGE_MODELS.is_dir()
        else []
    )
    known = f"shipped models: {', '.join(names)}" if names else "no model is shipped yet"
    raise ProbeInputError(
        f"--model {str(model)!r} does not exist; give a checkpoint directory ({known})"
    )


def sibling_path(path: Path) -> Path | None:
    """The no-recurrence sibling of a checkpoint: the directory `<name>-mem0` beside it (the
    shipped `default` has `default-mem0`), or None when there is none."""
    candidate = Path(path).parent / f"{Path(path).name}-mem0"
    return candidate if candidate.is_dir() else None


def group_paths(cls: type, model: Any) -> list[Path]:
    """The checkpoint directories of a run. A probe compares a group (`model_group = True`) of
    the models given (`--model` repeated), or, when one or none is given, of that model (default:
    the shipped one) and its no-recurrence sibling when it exists; every other probe takes one."""
    if isinstance(model, list | tuple):
        given = [m for m in model if m is not None]
    else:
        given = [] if model is None else [model]
    if not getattr(cls, "model_group", False):
        if len(given) > 1:
            raise ProbeInputError(
                f"probe {cls.name} takes one --model, got {len(given)}; give it once"
            )
        return [resolve_model_path(given[0] if given else None)]
    paths = [resolve_model_path(m) for m in given] or [resolve_model_path(None)]
    if len(paths) == 1:
        sibling = sibling_path(paths[0])
        if sibling is not None:
            paths.append(sibling)
    resolved = [p.resolve() for p in paths]
    if len(set(resolved)) != len(resolved):
        raise ProbeInputError(
            f"probe {cls.name}: the model group names one checkpoint twice; give each once"
        )
    return paths


def _int_option(name: str, value: Any, minimum: int | None) -> int | None:
    if value is None:
        return None
    opt = "--" + name.replace("_", "-")
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value), 10)
        except ValueError:
            raise ProbeInputError(f"{opt}: {value!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise ProbeInputError(f"{opt}: {value} is below the minimum {minimum}")
    return value


def _load_language(language: str | os.PathLike | None):
    """The synth language the probe writes its text in (default: Language.default())."""
    from synth.language import Language

    if language is None:
        return Language.default()
    p = Path(language)
    if p.is_dir():
        p = p / "tokenizer.json"
    if not p.is_file():
        raise ProbeInputError(
            f"--language {str(language)!r} does not exist; give a language JSON or a checkpoint"
        )
    import json

    try:
        return Language.from_json(json.loads(p.read_text(encoding="utf-8")))
    except (ValueError, OSError) as e:
        raise ProbeInputError(f"--language {str(language)!r}: {e}") from None


def run(
    probe: str,
    *,
    model: str | os.PathLike | list | tuple | None = None,
    mem: int | None = None,
    tgt_len: int | None = None,
    clamp_len: int | None = None,
    same_length: bool | None = None,
    reset: bool | None = None,
    n: int | None = None,
    seed: int = 0,
    device: str = "auto",
    evaluator: str = "cached",
    dtype: str = "float32",
    threads: int | None = None,
    out: str | os.PathLike = "results",
    quick: bool = False,
    language: str | os.PathLike | None = None,
    progress: Progress | bool | None = None,
    argv: list[str] | None = None,
    **probe_params: Any,
) -> Summary:
    """Run a probe and return its Summary (see the module docstring and `probe run --help`).

    Raises ProbeInputError (one line) for bad input, before anything is written."""
    t0 = time.perf_counter()
    # ---------------------------------------------------------------- inputs, nothing written
    try:
        cls = registry.get(probe)
    except registry.RegistryError as e:
        raise ProbeInputError(str(e)) from None
    try:
        params = params_mod.build(cls.Params, probe_params)
    except params_mod.ParamError as e:
        raise ProbeInputError(f"probe {cls.name}: {e}") from None
    mem = _int_option("mem", mem, 0)
    tgt_len = _int_option("tgt_len", tgt_len, 1)
    clamp_len = _int_option("clamp_len", clamp_len, 1)
    n = _int_option("n", n, 1)
    seed = _int_option("seed", seed, 0)
    threads = _int_option("threads", threads, 1)
    if evaluator not in ("cached", "recompute"):
        raise ProbeInputError(f"--evaluator {evaluator!r}: use cached or recompute")
    if device not in ("auto", "cpu", "cuda"):
        raise ProbeInputError(f"--device {device!r}: use auto, cpu or cuda")
    if dtype not in ("float32", "float64", "bfloat16"):
        raise ProbeInputError(f"--dtype {dtype!r}: use float32, float64 or bfloat16")
    try:
        check_writable(Path(out))
    except RunDirError as e:
        raise ProbeInputError(str(e)) from None
    paths = group_paths(cls, model)
    model_path = paths[0]
    if progress is None or isinstance(progress, bool):
        progress = Progress.auto(quiet=progress is False)
    progress.log(f"loading {model_path} …")

    from probes import adapters  # torch from here on

    try:
        dev = adapters.resolve_device(device)
        n_threads = adapters.set_threads(threads)
        lm = adapters.load(model_path, evaluator=evaluator, device=dev, dtype=dtype)
    except adapters.AdapterError as e:
        raise ProbeInputError(str(e)) from None
    lang = None
    if cls.needs_language:
        lang = _load_language(language)
        try:
            lang.check_compatible(lm.tokenizer, what=f"model {str(model_path)!r}")
        except ValueError as e:
            raise ProbeInputError(f"--model {str(model_path)!r}: {e}") from None
        if lm.config.vocab_size < lang.vocab.size:
            raise ProbeInputError(
                f"--model {str(model_path)!r}: vocab_size {lm.config.vocab_size} is smaller than "
                f"the language's {lang.vocab.size} tokens"
            )
    try:
        geometry = lm.geometry(
            mem_len=mem,
            tgt_len=tgt_len,
            clamp_len=clamp_len,
            same_length=same_length,
            reset=reset,
        )
    except ValueError as e:
        raise ProbeInputError(f"bad evaluation geometry: {e}") from None
    group = []
    if getattr(cls, "model_group", False):
        group = [lm]
        for p in paths[1:]:
            progress.log(f"loading {p} (model group) …")
            try:
                other = adapters.load(p, evaluator=evaluator, device=dev, dtype=dtype)
            except adapters.AdapterError as e:
                raise ProbeInputError(str(e)) from None
            if lang is not None:
                try:
                    lang.check_compatible(other.tokenizer, what=f"model {str(p)!r}")
                except ValueError as e:
                    raise ProbeInputError(f"--model {str(p)!r}: {e}") from None
            group.append(other)
    from probes.loss_model import horizon as horizon_of

    hz = horizon_of(lm, geometry)
    n_pairs = n or (cls.quick_n if quick else cls.default_n)
    ctx = RunContext(
        model=lm,
        geometry=geometry,
        horizon=hz,
        lang=lang,
        n=n_pairs,
        seed=seed,
        quick=quick,
        progress=progress,
        group=group,
    )
    instance = cls(params)
    try:
        instance.plan(ctx)
    except ProbeInputError:
        raise
    except ValueError as e:
        raise ProbeInputError(f"probe {cls.name}: {e}") from None
    try:
        run_dir = RunDir.create(Path(out), cls.name, lm.info.id)
    except RunDirError as e:
        raise ProbeInputError(str(e)) from None

    # ---------------------------------------------------------------- the run
    options = {
        "model": [str(p) for p in paths] if group else str(model_path),
        "mem": mem,
        "tgt_len": tgt_len,
        "clamp_len": clamp_len,
        "same_length": same_length,
        "reset": reset,
        "n": n,
        "seed": seed,
        "device": device,
        "evaluator": evaluator,
        "dtype": dtype,
        "threads": threads,
        "out": str(out),
        "quick": quick,
        "language": None if language is None else str(language),
    }
    spec = probe
    if registry.is_file_spec(probe):
        file, attr = probe.rsplit(":", 1)
        spec = f"{Path(file).resolve()}:{attr}"
    record = run_record(
        cls, spec, params, options, lm, geometry, hz, lang, dev, n_threads, n_pairs, argv
    )
    if group:
        record["group"] = [m.info.to_dict() for m in group]
    run_dir.write_json("run.json", record)
    ctx.run_dir = run_dir
    progress.log(f"run directory {run_dir.path}")
    try:
        outcome = instance.execute(ctx)
        plots = []
        if outcome.arrays:
            run_dir.write_npz("tokens.npz", outcome.arrays)
        for draw in outcome.plots:
            plots.append(draw(run_dir.path))
        summary = Summary(
            probe=cls.name,
            version=cls.version,
            model={"id": lm.info.id, "path": lm.info.path, "sha256": lm.info.sha256},
            geometry=geometry.to_dict(),
            n_pairs=outcome.n_pairs,
            metrics=outcome.metrics,
            bins=outcome.bins,
            checks=outcome.checks,
            verdict=outcome.verdict,
            run_dir=str(run_dir.path),
            params=params_mod.to_dict(params),
            evaluator=evaluator,
            dtype=dtype,
            device=dev,
            seed=seed,
            n=n_pairs,
            horizon=hz.to_dict(),
            metric_docs=outcome.metric_docs,
            higher_is_better=outcome.higher_is_better,
            verdict_rule=_verdict_rule(),
            elapsed_s=round(time.perf_counter() - t0, 3),
            plots=plots,
        )
        run_dir.write_json("summary.json", summary.to_dict())
        record["status"] = "complete" if summary.passed else "failed-check"
        record["elapsed_s"] = summary.elapsed_s
        run_dir.write_json("run.json", record)
        return summary
    except KeyboardInterrupt:
        record["status"] = "interrupted"
        run_dir.write_json("run.json", record)
        raise
    except BaseException as e:
        record["status"] = "error"
        record["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:500]
        run_dir.write_json("run.json", record)
        raise
    finally:
        run_dir.close()


def _verdict_rule() -> str:
    from probes.stats import VERDICT_RULE

    return VERDICT_RULE


def run_record(cls, spec, params, options, lm, geometry, hz, lang, device, threads, n_pairs, argv):
    """run.json: everything needed to know where a result came from and to repeat it."""
    from probes import __version__, provenance

    synth_info = None
    if lang is not None:
        import hashlib
        import json

        import synth

        config = lang.config.to_dict()
        canon = json.dumps(config, sort_keys=True, separators=(",", ":"))
        synth_info = {
            "generator_version": getattr(synth, "GENERATOR_VERSION", None),
            "language_fingerprint": lang.fingerprint,
            "language_config": config,
            "language_config_sha256": hashlib.sha256(canon.encode()).hexdigest(),
        }
    return {
        "schema_version": SCHEMA_VERSION,
        "status": "running",
        "argv": list(argv) if argv is not None else None,
        "command": command_line(cls.name, options, params_mod.to_dict(params)),
        "probe": {
            "name": cls.name,
            "version": cls.version,
            "class": f"{cls.__module__}:{cls.__qualname__}",
            "spec": spec,
        },
        "params": params_mod.to_dict(params),
        "options": options,
        "model": lm.info.to_dict(),
        "geometry": geometry.to_dict(),
        "horizon": hz.to_dict(),
        "evaluator": lm.info.evaluator,
        "dtype": lm.info.dtype,
        "device": device,
        "threads": threads,
        "seeds": {"seed": options["seed"], "namespace": "probe"},
        "n_per_group": n_pairs,
        "git": provenance.git_state(),
        "package_version": __version__,
        "synth": synth_info,
        "versions": provenance.versions(),
        "machine": provenance.machine(),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def command_line(name: str, options: dict, params: dict) -> list[str]:
    """The `probe run` argv that repeats a run (what `probe rerun` executes)."""
    argv = ["probe", "run", name]
    for key in ("model", "mem", "tgt_len", "clamp_len", "n", "seed", "device", "evaluator"):
        if key == "model" and isinstance(options.get(key), list):  # a model group
            for m in options[key]:
                argv += ["--model", str(m)]
            continue
        if options.get(key) is not None:
            argv += ["--" + key.replace("_", "-"), str(options[key])]
    for key in ("dtype", "threads", "out", "language"):
        if options.get(key) is not None:
            argv += ["--" + key.replace("_", "-"), str(options[key])]
    if options.get("same_length") is not None:
        argv.append("--same-length" if options["same_length"] else "--no-same-length")
    if options.get("reset") is not None:
        argv.append("--reset" if options["reset"] else "--carry")
    if options.get("quick"):
        argv.append("--quick")
    for key, value in params.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + key.replace("_", "-"))
        else:
            argv += [flag, str(value)]
    return argv


def rerun_options(run_json: dict) -> tuple[str, dict[str, Any]]:
    """(probe spec, keyword arguments of `run`) that repeat the run recorded in run.json."""
    spec = run_json["probe"].get("spec") or run_json["probe"]["name"]
    kwargs = dict(run_json["options"])
    kwargs.update(run_json["params"])
    return spec, kwargs


def print_json(obj: Any, file=None) -> None:
    (file or sys.stdout).write(dumps(obj) + "\n")
