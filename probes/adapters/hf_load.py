"""Loading a transformers model directory as a LossModel (the `hf` extra): what `--model DIR` or
`hf:DIR` reaches. The directory is what `save_pretrained` writes; it is loaded offline
(`local_files_only`, never `trust_remote_code`), and a recurrent `model_type` goes to the `state`
adapter (`hf_state.py`), every other causal LM to the attention adapter (`hf.py`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from probes.adapters.hf import (
    DEFAULT_EVALUATOR,
    DEFAULT_SINKS,
    EVALUATORS,
    HFModel,
    max_positions_of,
    rope_type_of,
    sliding_window_of,
)
from probes.adapters.hf_dir import RECURRENT, read_config
from probes.adapters.hf_scoring import model_info
from probes.adapters.txl import DTYPES, AdapterError


def weights_sha256(path: Path) -> str:
    """sha256 of model.safetensors, or of the index and every shard it names, in order."""
    import hashlib

    from txl.io import file_sha256

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
) -> HFModel:
    """A LossModel from a transformers model directory. AdapterError (one line, naming the path)
    when it is not usable as asked."""
    from probes.adapters import hf_state

    p = Path(path)
    try:
        raw = read_config(p)
    except ValueError as e:
        raise AdapterError(str(e)) from None
    if dtype not in ("float32", "bfloat16", "float64"):
        raise AdapterError(f"--dtype {dtype!r}: use float32, bfloat16 or float64")
    recurrent = raw["model_type"] in RECURRENT
    if recurrent:
        evaluator = evaluator or hf_state.DEFAULT_STATE_EVALUATOR
        if evaluator not in hf_state.STATE_EVALUATORS:
            raise AdapterError(
                f"--evaluator {evaluator!r} does not fit the recurrent model {str(path)!r} "
                f"(model_type {raw['model_type']!r}); use "
                f"{' or '.join(hf_state.STATE_EVALUATORS)}"
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
    try:
        import transformers
        from transformers import AutoModelForCausalLM
    except ImportError:
        raise AdapterError(
            f"--model {str(path)!r} is a transformers model; install the extra: "
            "pip install -e .[hf]"
        ) from None
    if int(transformers.__version__.split(".")[0]) < 5:
        raise AdapterError(
            f"--model {str(path)!r}: transformers {transformers.__version__} is too old; "
            "need >= 5 (pip install -e .[hf])"
        )
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # stderr belongs to the run's own progress
    hf_logging.disable_progress_bar()
    placed = placement(device)
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
        msg = " ".join(str(e).split())[:300]
        raise AdapterError(f"--model {str(path)!r}: transformers cannot load it ({msg})") from None
    model = (model if placed else model.to(device)).eval()
    resolved = p.resolve()
    adapter = wrap(
        model, raw, path=resolved, sha256=weights_sha256(resolved), model_id=model_id,
        evaluator=evaluator, dtype=dtype, sinks=sinks,
    )  # fmt: skip
    adapter.tokenizer = stated_tokenizer(resolved)
    return adapter


def stated_tokenizer(path: Path) -> dict | None:
    """The directory's tokenizer.json as a JSON object (a synth language for a model trained
    here, a tokenizers-format tokenizer for a model with its own), or None; which one it is,
    and what the model reads, `probes.framework.text` decides by its content."""
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
    dtype: str = "float32", sinks: int | None = None,
):  # fmt: skip
    """The adapter around a loaded transformers model (`raw`: its config as a dict), on the
    model's device; also what training's evaluation scores a model in training with. The
    model's training flag is left as it is found."""
    from probes.adapters import hf_state

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
        },
        **common,
    )
    return HFModel(
        model,
        info,
        evaluator=evaluator,
        dtype=dtype,
        sinks=DEFAULT_SINKS if sinks is None else int(sinks),
    )
