"""Loading a transformers model as a LossModel (the `hf` extra): what `--model DIR`, `hf:DIR` or
`--model FILE.gguf` reaches. A directory is what `save_pretrained` writes; a GGUF file (or a
directory holding one and no config.json) is read by transformers' GGUF loader (`gguf_file=`: the
`real` extra adds gguf and accelerate), its weights dequantized to `--dtype`, its tokenizer built
from the same file. Both load offline (`local_files_only`, never `trust_remote_code`), and only
after config.json (or the GGUF header) has been checked against the weights and the memory they
need; a recurrent `model_type` goes to the `state` adapter (`hf_state.py`), every other causal LM
to the attention adapter (`hf.py`)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from pathlib import Path

from probes.adapters import hf_state
from probes.adapters.base import DTYPES
from probes.adapters.families import RECURRENT
from probes.adapters.hf import (
    DEFAULT_EVALUATOR,
    DEFAULT_SINKS,
    EVALUATORS,
    HFModel,
    max_positions_of,
    rope_type_of,
    sliding_window_of,
)
from probes.adapters.hf_dir import (
    config_size,
    gguf_file,
    read_config,
    stored_elements,
)
from probes.adapters.hf_scoring import model_info
from probes.api.errors import AdapterError, ModelDirError
from probes.limits import LimitError, require_memory
from txl.io import file_sha256

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float64": 8}
LOAD_FACTOR = 1.25  # peak memory of a directory's load over its weights at --dtype
# A GGUF load holds every tensor dequantized and then the model's own copy, and converts the
# tokenizer: measured over the weights at float32, 1.8x (SmolLM2-135M, Q4_1) and 2.8x (Gemma 3
# 270M, Q4_K_M, whose 262,144-token vocabulary is most of it).
GGUF_LOAD_FACTOR = 3.0
ERROR_CHARS = 400  # how much of transformers' own message a refusal quotes


def error_text(e: BaseException, limit: int = ERROR_CHARS) -> str:
    """An exception's message on one line, whole sentences up to `limit` characters (a first
    sentence longer than that is cut at a word and marked), without pointers to output that a
    one-line refusal does not show ("look at the above report")."""
    import re

    text = " ".join(str(e).split()) or type(e).__name__
    sentences = [
        s
        for s in re.split(r"(?<=[.!?])\s+", text)
        if not re.search(r"\b(above|below) (report|error|traceback)", s, re.I)
    ] or [type(e).__name__]
    out = sentences[0]
    if len(out) > limit:
        return out[:limit].rsplit(" ", 1)[0] + " …"
    for s in sentences[1:]:
        if len(out) + 1 + len(s) > limit:
            break
        out += " " + s
    return out


def check_load_memory(where: str, parameters: int, dtype: str, factor: float = LOAD_FACTOR) -> None:
    """Refuse (AdapterError) a model whose load (`factor` times its weights at `dtype`) would not
    fit in memory, before anything is loaded."""

    try:
        require_memory(
            f"model {where} ({parameters:,} parameters in {dtype})",
            int(factor * parameters * DTYPE_BYTES[dtype]),
            "give a smaller model" + (" or --dtype bfloat16" if dtype != "bfloat16" else ""),
        )
    except LimitError as e:
        raise AdapterError(str(e)) from None


def weights_sha256(path: Path) -> str:
    """sha256 of model.safetensors, or of the index and every shard it names, in order."""
    import hashlib

    single = path / "model.safetensors"
    if single.is_file():
        return file_sha256(single)
    index = json.loads((path / "model.safetensors.index.json").read_text(encoding="utf-8"))
    h = hashlib.sha256()
    for shard in sorted(set(index.get("weight_map", {}).values())):
        h.update(file_sha256(path / shard).encode())
    return h.hexdigest()


def placement(device: str) -> dict:
    """from_pretrained's placement: on `cuda` (what --device auto or cuda resolves to) with
    several GPUs and accelerate installed, `device_map="auto"` spreads the layers over them
    (inputs go to the first layer's GPU; accelerate moves activations between them); otherwise
    nothing, and the model is moved to `device` whole. An explicit `cuda:N` stays on that GPU."""
    import importlib.util

    if device != "cuda":
        return {}
    import torch

    if torch.cuda.device_count() > 1 and importlib.util.find_spec("accelerate") is not None:
        return {"device_map": "auto"}
    return {}


def load(
    path: str | os.PathLike,
    *,
    evaluator: str | None = None,
    device: str = "cpu",
    dtype: str = "float32",
    sinks: int | None = None,
    model_id: str | None = None,
    cache_positions: bool = False,
) -> HFModel:
    """A LossModel from a transformers model directory or a GGUF file (or a directory holding
    one). AdapterError (one line, naming the path) when it is not usable as asked."""
    p = Path(path)
    try:
        gguf = gguf_file(p)
        if gguf is not None:
            return _load_gguf(
                path, gguf, evaluator=evaluator, device=device, dtype=dtype, sinks=sinks,
                model_id=model_id, cache_positions=cache_positions,
            )  # fmt: skip
        raw = read_config(p)
    except ModelDirError as e:
        raise AdapterError(str(e)) from None
    if dtype not in DTYPE_BYTES:
        raise AdapterError(f"--dtype {dtype!r}: use float32, bfloat16 or float64")
    evaluator = _evaluator_for(raw["model_type"], evaluator, path, sinks, cache_positions)
    size = config_size(raw)
    check_load_memory(
        repr(str(path)), max(stored_elements(p), size["lower_bound"] if size else 0), dtype
    )
    AutoModelForCausalLM = _transformers(path)
    placed = placement(device)
    recurrent = raw["model_type"] in RECURRENT
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(p),
            local_files_only=True,
            trust_remote_code=False,
            use_safetensors=True,
            dtype=DTYPES[dtype],
            **({} if recurrent else {"attn_implementation": "eager"}),
            **placed,
        )
    except Exception as e:  # transformers raises many kinds; all mean "not usable"
        raise AdapterError(
            f"--model {str(path)!r}: transformers cannot load it ({error_text(e)})"
        ) from None
    model = (model if placed else model.to(device)).eval()
    resolved = p.resolve()
    adapter = wrap(
        model, raw, path=resolved, sha256=weights_sha256(resolved), model_id=model_id,
        evaluator=evaluator, dtype=dtype, sinks=sinks, cache_positions=cache_positions,
    )  # fmt: skip
    adapter.tokenizer = stated_tokenizer(resolved)
    return adapter


def _evaluator_for(
    model_type: str, evaluator: str | None, path, sinks: int | None, cache_positions=False
) -> str:
    """The evaluator a model of `model_type` is scored with (its default when None), refused
    when it does not fit — before the weights are read."""

    if model_type in RECURRENT:
        evaluator = evaluator or hf_state.DEFAULT_STATE_EVALUATOR
        if evaluator not in hf_state.STATE_EVALUATORS:
            raise AdapterError(
                f"--evaluator {evaluator!r} does not fit the recurrent model {str(path)!r} "
                f"(model_type {model_type!r}); use {' or '.join(hf_state.STATE_EVALUATORS)}"
            )
    else:
        evaluator = evaluator or DEFAULT_EVALUATOR
        if evaluator not in EVALUATORS:
            raise AdapterError(
                f"--evaluator {evaluator!r} does not fit a transformers model ({str(path)!r}); "
                f"use {', '.join(EVALUATORS)}"
                + (" (state is for recurrent models: mamba, rwkv)" if evaluator == "state" else "")
            )
    if sinks is not None and evaluator != "sinks":
        raise AdapterError(f"--sinks applies to --evaluator sinks only, not {evaluator}")
    if cache_positions and evaluator not in ("stream", "sinks"):
        raise AdapterError(
            f"--cache-positions re-indexes the cached keys of --evaluator stream or sinks, "
            f"not {evaluator}"
        )
    return evaluator


def _transformers(path, *, gguf: bool = False):
    """AutoModelForCausalLM, with transformers' own logging kept off stderr; AdapterError when
    transformers (>= 5) — and for a GGUF file gguf and accelerate — are not installed."""
    import importlib.util

    extra = "real" if gguf else "hf"
    try:
        import transformers
        from transformers import AutoModelForCausalLM
    except ImportError:
        raise AdapterError(
            f"--model {str(path)!r} is a transformers model; install the extra: "
            f"pip install -e .[{extra}]"
        ) from None
    if int(transformers.__version__.split(".")[0]) < 5:
        raise AdapterError(
            f"--model {str(path)!r}: transformers {transformers.__version__} is too old; "
            f"need >= 5 (pip install -e .[{extra}])"
        )
    if gguf:
        missing = [m for m in ("gguf", "accelerate") if importlib.util.find_spec(m) is None]
        if missing:
            raise AdapterError(
                f"--model {str(path)!r} is a GGUF file, which transformers reads with "
                f"{' and '.join(missing)}; install the extra: pip install -e .[real]"
            )
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # stderr belongs to the run's own progress
    hf_logging.disable_progress_bar()
    return AutoModelForCausalLM


def gguf_header(file: Path) -> dict:
    """What a GGUF file's header says (read without its tensor data): architecture, file
    (quantization) type, the tensor types with their counts, and how many values its tensors
    hold once dequantized."""
    import collections

    import gguf

    try:
        reader = gguf.GGUFReader(str(file))
        fields = reader.fields

        def field(name):
            f = fields.get(name)
            return f.contents() if f is not None else None

        file_type = field("general.file_type")
        try:
            quant = gguf.LlamaFileType(int(file_type)).name.removeprefix("MOSTLY_")
        except (TypeError, ValueError):
            quant = None
        types = collections.Counter(t.tensor_type.name for t in reader.tensors)
        values = sum(int(t.n_elements) for t in reader.tensors)
    except Exception as e:  # the reader raises ValueError, KeyError, struct errors…
        raise AdapterError(
            f"--model {str(file)!r} is not a readable GGUF file ({error_text(e, 200)})"
        ) from None
    return {
        "architecture": field("general.architecture"),
        "file_type": quant,
        "tensor_types": dict(sorted(types.items())),
        "values": values,
    }


@contextlib.contextmanager
def _gguf_parsed_once():
    """transformers parses a GGUF file's whole header once for the config, once for the
    tokenizer and once for the weights, and builds gguf's tensor-name table once per tensor; the
    header holds the vocabulary string by string, so that is most of a load (Gemma 3 270M: 65 s
    of 93 s). Inside this block a file is parsed once (readers are kept by resolved path) and
    the table once per architecture; the readers are read-only views of the file."""
    import functools

    import gguf

    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict = {}

    def parsed(path, mode="r"):
        key = (str(Path(path).resolve()), mode)
        if key not in readers:
            readers[key] = reader(path, mode)
        return readers[key]

    gguf.GGUFReader = parsed
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


@contextlib.contextmanager
def _no_gguf_progress_bar():
    """transformers' GGUF reader draws its own tqdm bar, which its logging switch does not
    reach: stderr belongs to the run's progress, so the bar is a plain iteration while loading."""
    try:
        from transformers import modeling_gguf_pytorch_utils as reader
    except ImportError:
        yield
        return
    bar = getattr(reader, "tqdm", None)
    reader.tqdm = lambda iterable, *args, **kwargs: iterable
    try:
        yield
    finally:
        reader.tqdm = bar


def _load_gguf(
    path, file: Path, *, evaluator: str | None, device: str, dtype: str, sinks: int | None,
    model_id: str | None, cache_positions: bool = False,
) -> HFModel:  # fmt: skip
    """A LossModel from a GGUF file (module docstring); run.json's `model.extra.weights` says
    what was read: the file, its sha256, its quantization and that the weights were dequantized
    to `dtype`."""
    if dtype not in DTYPE_BYTES:
        raise AdapterError(f"--dtype {dtype!r}: use float32, bfloat16 or float64")
    with _gguf_parsed_once():
        return _load_gguf_parsed(
            path, file, evaluator=evaluator, device=device, dtype=dtype, sinks=sinks,
            model_id=model_id, cache_positions=cache_positions,
        )  # fmt: skip


def _load_gguf_parsed(
    path, file: Path, *, evaluator: str | None, device: str, dtype: str, sinks: int | None,
    model_id: str | None, cache_positions: bool = False,
) -> HFModel:  # fmt: skip
    AutoModelForCausalLM = _transformers(path, gguf=True)
    header = gguf_header(file)
    arch = str(header["architecture"] or "")
    early = arch if arch in RECURRENT else arch or "gguf"
    _evaluator_for(early, evaluator, path, sinks, cache_positions)  # before the weights
    check_load_memory(repr(str(path)), header["values"], dtype, GGUF_LOAD_FACTOR)
    placed = placement(device)
    where = dict(local_files_only=True, trust_remote_code=False, gguf_file=file.name)
    try:
        with _no_gguf_progress_bar():
            model = AutoModelForCausalLM.from_pretrained(
                str(file.parent), dtype=DTYPES[dtype], attn_implementation="eager", **where,
                **placed,
            )  # fmt: skip
    except Exception as e:  # transformers raises many kinds; all mean "not usable"
        raise AdapterError(
            f"--model {str(path)!r}: transformers cannot load this GGUF file ({error_text(e)})"
        ) from None
    raw = model.config.to_dict()
    raw.pop("quantization_config", None)  # the dequantized model is not quantized
    evaluator = _evaluator_for(raw.get("model_type", ""), evaluator, path, sinks, cache_positions)
    model = (model if placed else model.to(device)).eval()
    resolved = file.resolve()

    sha = file_sha256(resolved)
    adapter = wrap(
        model, raw, path=resolved, sha256=sha, model_id=model_id, evaluator=evaluator,
        dtype=dtype, sinks=sinks, cache_positions=cache_positions,
    )  # fmt: skip
    weights = {
        "format": "gguf",
        "file": str(resolved),
        "sha256": sha,
        "architecture": header["architecture"],
        "quantization": header["file_type"],
        "tensor_types": header["tensor_types"],
        "dequantized": True,
        "dequantized_to": dtype,
    }
    adapter.info = dataclasses.replace(
        adapter.info, extra={**adapter.info.extra, "weights": weights}
    )
    adapter.tokenizer, adapter.special_tokens = gguf_tokenizer(file, path)
    adapter.tokenizer_origin = f"{resolved} (its tokenizer, converted by transformers)"
    return adapter


def gguf_tokenizer(file: Path, path) -> tuple[dict, dict]:
    """The tokenizer a GGUF file holds, as a tokenizers-format JSON (transformers converts it),
    and the special tokens it names (`bos`, `eos`: None where it names none)."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(
            str(file.parent), gguf_file=file.name, local_files_only=True, trust_remote_code=False
        )
        data = json.loads(tok.backend_tokenizer.to_str())
    except Exception as e:  # transformers raises many kinds; all mean "not usable"
        raise AdapterError(
            f"--model {str(path)!r}: the GGUF file's tokenizer cannot be built ({error_text(e)})"
        ) from None
    special = {k: getattr(tok, f"{k}_token", None) for k in ("bos", "eos")}
    return data, {k: v if isinstance(v, str) and v else None for k, v in special.items()}


def stated_tokenizer(path: Path) -> dict | None:
    """The directory's tokenizer.json as a JSON object (a synth language for a model trained
    here, a tokenizers-format tokenizer for a model with its own), or None; which one it is,
    and what the model reads, `probes.texts.choose` decides by its content."""
    f = path / "tokenizer.json"
    if not f.is_file():
        return None
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise AdapterError(
            f"--model {str(path)!r}: tokenizer.json is not readable JSON ({e})"
        ) from None
    return data if isinstance(data, dict) else None


def wrap(
    model, raw: dict, *, path: Path, sha256: str, model_id: str | None, evaluator: str,
    dtype: str = "float32", sinks: int | None = None, cache_positions: bool = False,
):  # fmt: skip
    """The adapter around a loaded transformers model (`raw`: its config as a dict), on the
    model's device; also what training's evaluation scores a model in training with. The
    model's training flag is left as it is found."""

    device = str(next(model.parameters()).device)
    device_map = "auto" if getattr(model, "hf_device_map", None) else None  # placement()
    config = model.config
    common = dict(model_id=model_id, evaluator=evaluator, dtype=dtype, device=device)
    if raw["model_type"] in RECURRENT:
        info = model_info(
            model, raw, path, sha256, train_tgt_len=0,
            extra={**hf_state.info_extra(model, raw), "device_map": device_map}, **common,
        )  # fmt: skip
        return hf_state.HFStateModel(model, info, evaluator=evaluator, dtype=dtype)
    limit = max_positions_of(config)
    info = model_info(
        model,
        raw,
        path,
        sha256,
        train_tgt_len=int(limit or 0),
        extra={
            "max_positions": limit,
            "sliding_window": sliding_window_of(config),
            "positions": "rotary"
            if any("rotary" in n.lower() for n, _ in model.named_modules())
            else "absolute",
            "rope_type": rope_type_of(config),
            "attn_implementation": config._attn_implementation,
            "device_map": device_map,
            **(
                {"sinks": DEFAULT_SINKS if sinks is None else int(sinks)}
                if evaluator == "sinks"
                else {}
            ),
            **(
                {"cached_positions": "cache" if cache_positions else "text"}
                if evaluator in ("stream", "sinks")
                else {}
            ),
        },
        **common,
    )
    return HFModel(
        model,
        info,
        evaluator=evaluator,
        dtype=dtype,
        sinks=DEFAULT_SINKS if sinks is None else int(sinks),
        cache_positions=cache_positions,
    )
