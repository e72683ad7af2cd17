"""One probe run, from options to a run directory and a `Summary`: what `probe run` and
`probes.run(...)` both call, in two steps:

    prepare(probe, **options) -> Prepared   check every input, load the model(s), plan the pairs
    execute(prepared) -> Summary            create the run directory and run

Order matters for the promise "bad input leaves nothing behind": everything that can be wrong
with the input (probe name, parameters, geometry, model path, vocabulary, device, --out) is
checked and the pairs are built in `prepare`, before any directory exists; `probe diagnose`
prepares all of its probes (sharing one `ModelCache`) before it creates its own. From `execute`
on a failure is internal (exit 3) or an interruption (exit 130), and the directory keeps what was
done, with the status in run.json. The model is reached only through the LossModel protocol
(probes.protocol): a checkpoint path is loaded by probes.adapters.txl, a LossModel object is used
as given.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probes.framework import params as params_mod
from probes.framework import registry
from probes.framework.probe import ProbeInputError, Progress, RunContext
from probes.framework.results import SCHEMA_VERSION, RunDir, RunDirError, check_writable, dumps

PACKAGE_MODELS = Path(__file__).resolve().parent.parent / "models"
DEFAULT_MODEL = "default"


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


def is_loss_model(model: Any) -> bool:
    """A LossModel object given directly (the Python API), not a checkpoint path or name."""
    return not isinstance(model, str | os.PathLike) and hasattr(model, "score")


def model_sources(cls: type, model: Any) -> list[Any]:
    """The models of a run: checkpoint directories (Path) or LossModel objects. A probe compares
    a group (`model_group = True`) of the models given (`--model` repeated), or, when one or none
    is given, of that model (default: the shipped one) and its no-recurrence sibling when it
    exists; every other probe takes one."""
    if isinstance(model, list | tuple):
        given = [m for m in model if m is not None]
    else:
        given = [] if model is None else [model]
    if not getattr(cls, "model_group", False) and len(given) > 1:
        raise ProbeInputError(f"probe {cls.name} takes one --model, got {len(given)}; give it once")
    sources = [m if is_loss_model(m) else resolve_model_path(m) for m in given] or [
        resolve_model_path(None)
    ]
    if not getattr(cls, "model_group", False):
        return sources
    if len(sources) == 1 and isinstance(sources[0], Path):
        sibling = sibling_path(sources[0])
        if sibling is not None:
            sources.append(sibling)
    keys = [s.resolve() if isinstance(s, Path) else id(s) for s in sources]
    if len(set(keys)) != len(keys):
        raise ProbeInputError(
            f"probe {cls.name}: the model group names one checkpoint twice; give each once"
        )
    return sources


def int_option(name: str, value: Any, minimum: int | None) -> int | None:
    """An integer option (None stays None); ProbeInputError naming --name when it is not one."""
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


def load_language(language: str | os.PathLike | None):
    """The synth language the probe writes its text in (default: Language.default())."""
    import json

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
    try:
        return Language.from_json(json.loads(p.read_text(encoding="utf-8")))
    except (ValueError, OSError) as e:
        raise ProbeInputError(f"--language {str(language)!r}: {e}") from None


def check_language(lm: Any, lang: Any, where: str) -> None:
    """Refuse (one line) a model that does not read the probe's language: its tokenizer JSON
    (when it states one) must be this language, and its vocabulary must hold every token."""
    tokenizer = getattr(lm, "tokenizer", None)
    if tokenizer is not None:
        try:
            lang.check_compatible(tokenizer, what=f"model {where!r}")
        except ValueError as e:
            raise ProbeInputError(f"--model {where!r}: {e}") from None
    size = lm.info.vocab_size
    if size is not None and size < lang.vocab.size:
        raise ProbeInputError(
            f"--model {where!r}: vocab_size {size} is smaller than the language's "
            f"{lang.vocab.size} tokens"
        )


class ModelCache:
    """Checkpoints loaded as LossModels, each once per (path, evaluator, device, dtype): `probe
    diagnose` prepares seven probes on one model and loads it once."""

    def __init__(self) -> None:
        self._loaded: dict[tuple, Any] = {}

    def get(self, source: Any, *, evaluator: str, device: str, dtype: str, log=None) -> Any:
        """The LossModel of `source` (a LossModel object is its own); `log(message)` hears of
        a checkpoint being loaded."""
        if not isinstance(source, Path):
            return source  # a LossModel object
        key = (str(source.resolve()), evaluator, device, dtype)
        if key not in self._loaded:
            from probes.adapters import txl as adapters

            if log is not None:
                log(f"loading {source} …")

            try:
                self._loaded[key] = adapters.load(
                    source, evaluator=evaluator, device=device, dtype=dtype
                )
            except adapters.AdapterError as e:
                raise ProbeInputError(str(e)) from None
        return self._loaded[key]


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
    options: dict[str, Any]  # the run's options as given (run.json, `probe rerun`)
    threads: int | None
    argv: list[str] | None
    t0: float

    @property
    def model(self) -> Any:
        return self.ctx.model


def prepare(
    probe: str,
    *,
    model: Any = None,
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
    models: ModelCache | None = None,
    **probe_params: Any,
) -> Prepared:
    """Check every input, load the model(s) and plan the probe; write nothing. Raises
    ProbeInputError (one line) for bad input. `model`: a checkpoint directory or shipped model
    name, a LossModel object, or a list of them for a model group. `models` shares loaded
    checkpoints between several prepared runs."""
    t0 = time.perf_counter()
    try:
        cls = registry.get(probe)
    except registry.RegistryError as e:
        raise ProbeInputError(str(e)) from None
    try:
        params = params_mod.build(cls.Params, probe_params)
    except params_mod.ParamError as e:
        raise ProbeInputError(f"probe {cls.name}: {e}") from None
    mem = int_option("mem", mem, 0)
    tgt_len = int_option("tgt_len", tgt_len, 1)
    clamp_len = int_option("clamp_len", clamp_len, 1)
    n = int_option("n", n, 1)
    seed = int_option("seed", seed, 0)
    threads = int_option("threads", threads, 1)
    if evaluator not in ("cached", "recompute"):
        raise ProbeInputError(f"--evaluator {evaluator!r}: use cached or recompute")
    if device not in ("auto", "cpu", "cuda"):
        raise ProbeInputError(f"--device {device!r}: use auto, cpu or cuda")
    if dtype not in ("float32", "float64", "bfloat16"):
        raise ProbeInputError(f"--dtype {dtype!r}: use float32, float64 or bfloat16")
    if reset is not None and cls.runs_every_policy:
        raise ProbeInputError(
            f"probe {cls.name} runs every cache policy (reset, carry and a foreign cache) on "
            f"the same tokens; drop --{'reset' if reset else 'carry'}"
        )
    try:
        check_writable(Path(out))
    except RunDirError as e:
        raise ProbeInputError(str(e)) from None
    sources = model_sources(cls, model)
    if progress is None or isinstance(progress, bool):
        progress = Progress.auto(quiet=progress is False)
    models = models if models is not None else ModelCache()
    dev = device
    if any(isinstance(s, Path) for s in sources):
        from probes.adapters import txl as adapters  # torch from here on

        try:
            dev = adapters.resolve_device(device)
        except adapters.AdapterError as e:
            raise ProbeInputError(str(e)) from None
    loaded = [
        models.get(s, evaluator=evaluator, device=dev, dtype=dtype, log=progress.log)
        for s in sources
    ]
    lm = loaded[0]
    lang = None
    if cls.needs_language:
        lang = load_language(language)
        for s, m in zip(sources, loaded, strict=True):
            check_language(m, lang, str(s) if isinstance(s, Path) else m.info.id)
    from probes.protocol import geometry as geometry_of
    from probes.protocol import horizon as horizon_of

    try:
        geometry = geometry_of(
            lm,
            mem_len=mem,
            tgt_len=tgt_len,
            clamp_len=clamp_len,
            same_length=same_length,
            reset=reset,
        )
    except ValueError as e:
        raise ProbeInputError(f"bad evaluation geometry: {e}") from None
    group = loaded if getattr(cls, "model_group", False) else []
    hz = horizon_of(lm, geometry)
    ctx = RunContext(
        model=lm,
        geometry=geometry,
        horizon=hz,
        lang=lang,
        n=n or (cls.quick_n if quick else cls.default_n),
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
    names = [
        str(s) if isinstance(s, Path) else m.info.path for s, m in zip(sources, loaded, strict=True)
    ]
    options = {
        "model": names if group else names[0],
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
    return Prepared(cls, spec, params, instance, ctx, sources, options, threads, argv, t0)


def _threads(n: int | None):
    """torch's thread count for the run, restored after it (no torch loaded: nothing to set)."""
    if "torch" not in sys.modules:
        from contextlib import nullcontext

        return nullcontext(None)
    from probes.adapters import txl as adapters

    return adapters.threads(n)


def execute(prepared: Prepared, *, out: str | os.PathLike | None = None) -> Summary:
    """Create the run directory (under `out`, default: the prepared --out) and run. From here
    a failure is internal or an interruption, and run.json records the status."""
    p = prepared
    cls, ctx, lm = p.cls, p.ctx, p.ctx.model
    options = dict(p.options)
    if out is not None:
        options["out"] = str(out)
    try:
        run_dir = RunDir.create(Path(options["out"]), cls.name, lm.info.id)
    except RunDirError as e:
        raise ProbeInputError(str(e)) from None
    with _threads(p.threads) as n_threads:
        record = run_record(cls, p.spec, p.params, options, ctx, n_threads, p.argv)
        run_dir.write_json("run.json", record)
        ctx.run_dir = run_dir
        ctx.log(f"run directory {run_dir.path}")
        try:
            outcome = p.instance.execute(ctx)
            if outcome.arrays:
                run_dir.write_npz("tokens.npz", outcome.arrays)
            plots = [draw(run_dir.path) for draw in outcome.plots]
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
                run_dir=str(run_dir.path),
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
                elapsed_s=round(time.perf_counter() - p.t0, 3),
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


def run(probe: str, **options: Any) -> Summary:
    """Run a probe and return its Summary: `prepare(probe, **options)` (every option of `probe
    run`, see there), then `execute`. Raises ProbeInputError (one line) for bad input, before
    anything is written."""
    return execute(prepare(probe, **options))


def _verdict_rule() -> str:
    from probes.stats import VERDICT_RULE

    return VERDICT_RULE


def run_record(cls, spec, params, options, ctx: RunContext, threads, argv) -> dict[str, Any]:
    """run.json: everything needed to know where a result came from and to repeat it."""
    from probes import __version__
    from probes.framework import provenance

    lm, lang = ctx.model, ctx.lang
    synth_info = None
    if lang is not None:
        import synth

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
        **({"group": [m.info.to_dict() for m in ctx.group]} if ctx.group else {}),
        "geometry": ctx.geometry.to_dict(),
        "horizon": ctx.horizon.to_dict(),
        "evaluator": lm.info.evaluator,
        "dtype": lm.info.dtype,
        "device": lm.info.device,
        "threads": threads,
        "seeds": {"seed": options["seed"], "namespace": "probe"},
        "n_per_group": ctx.n,
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
