"""What the training loop needs to know about the model it trains: how to build it, save it and
read a saved one back. The loop itself (`txl.train`) is the same for every model.

A **segment model** is an `nn.Module` called as

    model(inputs, doc_ids=..., memory=..., targets=...) -> out    inputs, doc_ids, targets (B, T)

whose `out.nll` is the (B, T) NLL of every target and `out.memory` what the next segment of the
same rows reads (None: nothing is carried). Transformer-XL carries its hidden-state memory; a model
trained on independent segments returns None. `num_parameters()` counts its parameters.

An **architecture** gives

    build(config)                      the segment model of a TrainConfig, freshly initialised
    save(path, model, *, tokenizer, training, train_state=None, rng=None, extra_files=None)
                                       a checkpoint directory at `path`, atomically; the sha256
                                       of its weights
    load(path, device)                 a saved one: `.model` (its weights), `.train_state`, `.rng`

`TRANSFORMER_XL` (the default) is txl's own model and checkpoint format. Other architectures are
the caller's (txl imports no model library): `probe train` has a transformers one, chosen by the
config's `arch` table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from txl.checkpoint import load_checkpoint, save_checkpoint
from txl.model import TransformerXL


class Architecture(Protocol):
    name: str

    def build(self, config: Any) -> nn.Module: ...

    def save(
        self,
        path: Path,
        model: nn.Module,
        *,
        tokenizer: dict,
        training: dict,
        train_state: dict | None = None,
        rng: dict | None = None,
        extra_files: dict[str, str] | None = None,
    ) -> str: ...

    def load(self, path: Path, device: torch.device | str) -> Any: ...


class TransformerXLArchitecture:
    """txl's Transformer-XL in txl's checkpoint format (`txl.checkpoint`)."""

    name = "transformer-xl"

    def build(self, config: Any) -> nn.Module:

        return TransformerXL(config.model)

    def save(self, path, model, *, tokenizer, training, train_state=None, rng=None,
             extra_files=None) -> str:  # fmt: skip

        return save_checkpoint(
            path,
            model,
            tokenizer=tokenizer,
            training=training,
            train_state=train_state,
            rng=rng,
            extra_files=extra_files,
        )

    def load(self, path, device):

        return load_checkpoint(path, device=device)


TRANSFORMER_XL = TransformerXLArchitecture()
