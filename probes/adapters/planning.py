"""A LossModel that plans and never scores: a Transformer-XL checkpoint as a probe's `plan` sees
it — its default geometry, its horizon and the synth language it reads — read from its
config.json and tokenizer.json, without torch and without its weights.

A probe planned against it builds exactly the texts `probe run` builds for the checkpoint
(plans read a model's geometry, horizon and vocabulary, never its scores), which is what
`probe synth show PROBE` prints. Scoring it is a bug: `score` raises.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probes.api.errors import AdapterError
from probes.api.horizon import Horizon
from probes.api.model import ModelInfo, TokenScores
from txl import files
from txl.config import TXLConfig
from txl.geometry import Geometry


@dataclass
class PlanningModel:
    config: TXLConfig
    tokenizer: dict[str, Any]  # the synth language the checkpoint reads
    info: ModelInfo

    @classmethod
    def of_checkpoint(cls, path: str | os.PathLike) -> PlanningModel:
        """The checkpoint directory's plan-time view, its default (cached) evaluator's.
        AdapterError (one line) when its config.json or tokenizer.json cannot be read."""
        p = Path(path)
        try:
            model = files.read_json(p / "config.json", "json")["model"]
            config = TXLConfig.from_dict(model)
            tokenizer = files.read_json(p / "tokenizer.json", "tokenizer")
        except (files.FileRefused, KeyError, TypeError, ValueError) as e:
            raise AdapterError(
                f"--model {str(path)!r}: not a checkpoint to plan for ({e})"
            ) from None
        info = ModelInfo(
            id=f"{p.name}-plan",
            path=str(p),
            sha256="",
            config=config.to_dict(),
            n_layer=config.n_layer,
            train_tgt_len=config.tgt_len,
            train_mem_len=config.mem_len,
            vocab_size=config.vocab_size,
            evaluator="cached",
        )
        return cls(config, tokenizer, info)

    def default_geometry(self) -> Geometry:
        return Geometry.for_model(self.config)

    def horizon(self, geometry: Geometry) -> Horizon:
        return Horizon.of(geometry, self.config.n_layer)

    def score(self, tokens, doc_ids, positions, geometry) -> TokenScores:
        raise RuntimeError(f"{self.info.id} plans only: it has no weights to score with")
