"""Evaluation geometry: how a stream is cut into segments and what each query may see.

Independent of the training geometry: a model trained with mem 128 can be evaluated with mem 640.
Plain data, no torch import (the probes and the CLI read it without loading a model).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from txl.config import TXLConfig


@dataclass(frozen=True)
class Geometry:
    tgt_len: int  # tokens per segment
    mem_len: int  # cached positions per layer (0: no recurrence)
    clamp_len: int | None = (
        None  # relative distances above this reuse this distance; None: no clamp
    )
    same_length: bool = False  # every query sees exactly mem_len keys, itself included
    reset: bool = True  # True: queries see only keys of their own document; False: "carry"

    def __post_init__(self) -> None:
        if self.tgt_len <= 0:
            raise ValueError(f"tgt_len must be a positive integer, got {self.tgt_len}")
        if self.mem_len < 0:
            raise ValueError(f"mem_len must be >= 0, got {self.mem_len}")
        if self.clamp_len is not None and self.clamp_len <= 0:
            raise ValueError(f"clamp_len must be a positive integer or None, got {self.clamp_len}")
        if self.same_length and self.mem_len == 0:
            raise ValueError("same_length needs mem_len > 0 (each query sees exactly mem_len keys)")

    @property
    def policy(self) -> str:
        return "reset" if self.reset else "carry"

    @classmethod
    def for_model(cls, config: TXLConfig, **overrides: Any) -> Geometry:
        """The default evaluation geometry of a model: its training tgt_len and mem_len, clamp at
        its training attention length (mem + tgt: unseen distances reuse the largest trained one),
        same_length off, reset on. Keyword overrides replace single fields."""
        base = dict(
            tgt_len=config.tgt_len,
            mem_len=config.mem_len,
            clamp_len=config.tgt_len + config.mem_len,
            same_length=False,
            reset=True,
        )
        base.update(overrides)
        return cls(**base)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
