"""Which models a run scores, and in which language: `--model` resolved to checkpoint
directories (a path, or a shipped model's name) or LossModel objects, the model group of a
group probe, each checkpoint loaded once (`ModelCache`), and the language check. Bad input raises
ProbeInputError (one line) before anything is written."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from probes.api import kinds
from probes.api.errors import AdapterError, ModelDirError
from probes.api.probe_base import ProbeInputError
from txl import files
from txl.io import file_sha256

PACKAGE_MODELS = Path(__file__).resolve().parent.parent / "models"
DEFAULT_MODEL = "default"


def resolve_model_path(model: str | os.PathLike | None, option: str = "--model") -> Path:
    """A checkpoint directory from --model: a path, or the name of a shipped model. `option`:
    the flag that gave it, for the error message."""
    if model is None:
        model = DEFAULT_MODEL
    p = Path(model).expanduser()
    if p.exists():
        return check_model_files(p, f"{option} {str(model)!r}")
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
        f"{option} {str(model)!r} does not exist; give a checkpoint directory ({known})"
    )


# The JSON files of a model directory that loaders read whole (a Transformer-XL checkpoint's, a
# transformers directory's), each checked to be a regular file within its limit before any
# loader opens it (txl.files).
MODEL_JSON = {
    "config.json": "json",
    "tokenizer.json": "tokenizer",
    "tokenizer_config.json": "json",
    "special_tokens_map.json": "json",
    "generation_config.json": "json",
    "model.safetensors.index.json": "json",
    "rng.json": "json",
}


def check_model_files(path: Path, label: str) -> Path:
    """`path`, once every JSON file of it that a loader reads whole is a regular file within
    its limit (ProbeInputError naming the file otherwise)."""
    if not path.is_dir():
        return path
    for name, kind in MODEL_JSON.items():
        f = path / name
        if f.exists() or f.is_symlink():
            try:
                files.check_file(f, kind)
            except files.FileRefused as e:
                raise ProbeInputError(f"{label}: {e}") from None
    return path


def shipped_name(path: Path) -> str | None:
    """The name of a shipped model (`default`) when `path` is one, else None."""
    p = Path(path).resolve()
    return p.name if p.parent == PACKAGE_MODELS.resolve() and p.is_dir() else None


def shipped_by_sha256(sha256: str) -> str | None:
    """The shipped model whose weights have this sha256 (how `probe rerun` finds the model of
    a run recorded on another machine), or None."""

    if not sha256 or not PACKAGE_MODELS.is_dir():
        return None
    for d in sorted(PACKAGE_MODELS.iterdir()):
        weights = d / "model.safetensors"
        if weights.is_file() and file_sha256(weights) == sha256:
            return d.name
    return None


def model_name(source: Any) -> str:
    """How run.json names a model: a shipped model by its name (portable), a checkpoint by its
    absolute path, a LossModel object by its own `info.path`."""
    if not isinstance(source, Path):
        return source.info.path
    return shipped_name(source) or str(source.resolve())


def sibling_path(path: Path) -> Path | None:
    """The no-recurrence sibling of a checkpoint: the directory `<name>-mem0` beside it (the
    shipped `default` has `default-mem0`), or None when there is none."""
    candidate = Path(path).parent / f"{Path(path).name}-mem0"
    return candidate if candidate.is_dir() else None


def carries_state(source: Any, evaluator: str | None) -> bool:
    """Whether `source` is a recurrent model scored by its state (`--evaluator state`, the
    default for one): no memory length applies to it, so a `--mem` given for the models beside
    it in `--models` leaves it at its own geometry (the summary lists it under
    `mem_not_applicable`)."""
    if evaluator not in (None, "state"):
        return False
    if is_loss_model(source):
        return getattr(source, "evaluator", None) == "state"
    try:
        kind = kinds.detect(Path(source))
        return kind.is_recurrent(Path(source))
    except ModelDirError:
        return False
    except files.FileRefused as e:
        raise ProbeInputError(f"--model: {e}") from None


def is_loss_model(model: Any) -> bool:
    """A LossModel object given directly (the Python API), not a checkpoint path or name."""
    return not isinstance(model, str | os.PathLike) and hasattr(model, "score")


def model_source(model: str | os.PathLike, option: str = "--model") -> Any:
    """One `--model`: a spec with a model kind's prefix (`planted:FIELD=V,…`, a planted LossModel
    with known effects and no torch; `hf:PATH`, a transformers model directory or GGUF file),
    else a checkpoint directory, a transformers model directory, a GGUF file (or a directory
    holding one) or a shipped model's name — what it is (`probes.api.kinds`), and what is wrong
    with it, told here before anything is loaded."""
    spec = str(model)
    prefixed = kinds.by_prefix(spec)
    if prefixed is not None and prefixed[1][0].builds_from_spec:
        try:
            return prefixed[1][0].build(spec)
        except ValueError as e:
            raise ProbeInputError(f"{option} {spec!r}: {e}") from None
    try:
        if prefixed is not None:
            prefix, among = prefixed
            path = check_model_files(Path(spec[len(prefix) :]).expanduser(), f"{option} {spec!r}")
        else:
            among, path = None, resolve_model_path(model, option)
        kinds.detect(path, among).check_path(path)
    except ModelDirError as e:
        raise ProbeInputError(str(e).replace("--model", option, 1)) from None
    return path


def split_models(text: str) -> list[str]:
    """The model specs of `--models A,B,…`, in order. A planted spec keeps its own fields:
    `planted:seed=1,copy=2,default` is two models, since an item `field=value` after a planted
    spec belongs to it (a directory named `x=y` must come first or be given as `./x=y`)."""
    import re

    specs: list[str] = []
    for item in (x.strip() for x in text.split(",")):
        if specs and specs[-1].startswith("planted:") and re.fullmatch(r"[A-Za-z_]\w*=.*", item):
            specs[-1] += f",{item}"
        else:
            specs.append(item)
    return specs


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
    sources = [m if is_loss_model(m) else model_source(m) for m in given] or [
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


def check_object_options(
    lm: Any, evaluator, device, dtype, sinks, cache, cache_positions=False
) -> None:
    """Refuse (one line) an option that a LossModel object (a planted model, one built in
    Python) would ignore: it scores as it was built, and run.json must not record an evaluator,
    a precision or a device that did not score it."""
    info = lm.info
    given = [
        ("--cache", cache, cache is None),
        ("--sinks", sinks, sinks is None),
        ("--cache-positions", "", not cache_positions),
        ("--evaluator", evaluator, evaluator in (None, info.evaluator)),
        # float32 is the option's default: what every model that has a choice is scored in
        ("--dtype", dtype, dtype in ("float32", info.dtype)),
        ("--device", device, device in ("auto", info.device or "cpu")),
    ]
    for flag, value, applies in given:
        if not applies:
            raise ProbeInputError(
                f"{flag} {value} does not apply to the model object {info.id!r}: it scores as "
                f"it was built (evaluator {info.evaluator}, {info.dtype}); drop {flag}"
            )


class ModelCache:
    """Checkpoints loaded as LossModels, each once per (path, evaluator, device, dtype): `probe
    diagnose` prepares seven probes on one model and loads it once."""

    def __init__(self) -> None:
        self._loaded: dict[tuple, Any] = {}

    def get(
        self,
        source: Any,
        *,
        evaluator: str | None,
        device: str,
        dtype: str,
        sinks: int | None = None,
        cache: str | None = None,
        cache_positions: bool = False,
        log=None,
    ) -> Any:
        """The LossModel of `source` (a LossModel object is its own); `log(message)` hears of
        a checkpoint being loaded. A path goes to the loader of its kind (`probes.api.kinds`),
        which refuses the per-kind options it does not take; `evaluator` None is the loader's
        default; `cache` (kv | hidden | auto; None: auto) is the Transformer-XL cached
        evaluator's."""
        if not isinstance(source, Path):
            check_object_options(source, evaluator, device, dtype, sinks, cache, cache_positions)
            return source  # a LossModel object
        key = (str(source.resolve()), evaluator, device, dtype, sinks, cache, cache_positions)
        if key not in self._loaded:
            if log is not None:
                log(f"loading {source} …")
            try:
                kind = kinds.detect(source)
            except ModelDirError as e:
                raise ProbeInputError(str(e)) from None
            options = {"cache": cache, "sinks": sinks, "cache_positions": cache_positions}
            refused = kind.refusal(options, source)
            if refused is not None:
                raise ProbeInputError(refused)
            try:
                lm = kind.load_model(
                    source, evaluator=evaluator, device=device, dtype=dtype, **options
                )
            except AdapterError as e:
                raise ProbeInputError(str(e)) from None
            name = shipped_name(source)
            if name is not None:  # recorded by name: results travel to other machines
                lm.info = dataclasses.replace(lm.info, path=name)
            self._loaded[key] = lm
        return self._loaded[key]
