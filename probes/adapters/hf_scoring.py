"""What the transformers adapters (attention: `hf.py`; recurrent state: `hf_state.py`) share: the
fields every adapter object holds, the per-token NLL of logits, the empty result a `score` call
fills, and the ModelInfo they record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from probes.adapters.base import DTYPES
from probes.api.horizon import doc_starts
from probes.api.model import ModelInfo


class HFBase:
    """A loaded transformers model and what every adapter around it records. `tokenizer`: the
    JSON of the directory's tokenizer.json when it has one (`hf_load.stated_tokenizer`: a synth
    language, or a tokenizer of the model's own, which probes reach through the tokenizer
    bridge), else None (the model reads synth ids; the runner checks the vocabulary's size)."""

    def __init__(self, model, info: ModelInfo, *, evaluator: str, dtype: str) -> None:
        self.model = model
        self.info = info
        self.tokenizer = None
        self.evaluator = evaluator
        self.dtype_name = dtype
        self.dtype = DTYPES[dtype]
        self.config = model.config
        self.n_layer = int(self.config.num_hidden_layers)
        self.device = next(model.parameters()).device


def token_nll(logits: torch.Tensor, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(NLL in float64, argmax == target) of `targets` under `logits` (..., vocab)."""
    t = torch.from_numpy(np.ascontiguousarray(targets, dtype=np.int64)).to(logits.device)
    logp = torch.log_softmax(logits, dim=-1)
    nll = -logp.gather(-1, t[..., None])[..., 0]
    correct = logits.argmax(-1) == t
    return nll.double().cpu().numpy(), correct.cpu().numpy()


def window_jobs(doc_ids, positions, window: int, reset: bool) -> list[tuple[int, int, int]]:
    """(row, scored token t, window start a) for every scored token of a truncated-context
    evaluation: the `window` tokens before t, from its query's document start under reset."""
    jobs = []
    for r in range(doc_ids.shape[0]):
        starts = doc_starts(doc_ids[r])
        for t in np.flatnonzero(positions[r]):
            a = max(0, int(t) - window)
            if reset:
                a = max(a, int(starts[t - 1]))
            jobs.append((r, int(t), a))
    return jobs


def blank_scores(tokens, doc_ids, positions):
    """(tokens with padding clipped to id 0, doc ids, NaN NLLs, False corrects, whether nothing
    is to be scored): what every `score` starts from."""
    tokens = np.maximum(np.asarray(tokens, dtype=np.int64), 0)
    doc_ids = np.asarray(doc_ids, dtype=np.int64)
    R, N = tokens.shape
    nll = np.full((R, N), np.nan)
    correct = np.zeros((R, N), dtype=bool)
    return tokens, doc_ids, nll, correct, N < 2 or R == 0 or not positions.any()


def model_info(
    model, raw: dict, resolved: Path, sha: str, *, model_id: str | None, evaluator: str,
    dtype: str, device: str, train_tgt_len: int, extra: dict[str, Any],
) -> ModelInfo:  # fmt: skip
    """The ModelInfo of a loaded transformers model (`extra`: what its adapter adds)."""
    import transformers

    return ModelInfo(
        id=model_id or f"{resolved.name}-{sha[:8]}",
        path=str(resolved),
        sha256=sha,
        config=raw,
        n_layer=int(model.config.num_hidden_layers),
        train_tgt_len=train_tgt_len,
        train_mem_len=0,
        vocab_size=int(model.config.vocab_size),
        evaluator=evaluator,
        dtype=dtype,
        device=torch.device(device).type,
        extra={
            "library": "transformers",
            "transformers_version": transformers.__version__,
            "model_type": raw["model_type"],
            "architecture": type(model).__name__,
            **extra,
        },
    )
