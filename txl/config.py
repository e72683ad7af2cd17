"""Model configuration: the architecture and the geometry it was trained with.

Everything here is plain data (no torch import), so that configs can be read, validated and
written without loading the model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

PosEnc = Literal["rel", "shaw", "abs", "learned"]
POS_ENCODINGS: tuple[str, ...] = ("rel", "shaw", "abs", "learned")


_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {"int": int, "float": (int, float), "bool": bool}


@dataclass(frozen=True)
class TXLConfig:
    """A Transformer-XL. Defaults are the tiny CPU model's shape."""

    vocab_size: int
    n_layer: int = 2
    d_model: int = 128
    n_head: int = 4
    d_head: int = 32
    d_inner: int = 512
    dropout: float = 0.0  # on embeddings, attention output and feed-forward
    dropatt: float = 0.0  # on attention probabilities
    pre_lnorm: bool = (
        False  # post-LN as in the paper; pre-LN has no final LayerNorm (as the reference)
    )
    tie_weight: bool = (
        True  # output projection shares the embedding matrix; the output bias is separate
    )
    # u, v of §3.3: one pair shared by all layers (original PyTorch code, our default) or one per layer
    # (HF's `untie_r=True`).
    untie_r: bool = False
    # "rel": Dai et al. §3.3; "shaw": learned relative (Shaw et al.); "abs": absolute sinusoid
    # (Vaswani et al.); "learned": learned absolute per layer (Al-Rfou et al.).
    pos_enc: PosEnc = "rel"
    # Training geometry (evaluation may use another: see txl.geometry.Geometry).
    tgt_len: int = 64
    mem_len: int = 64
    # Size of the learned position tables ("shaw", "learned"); distances/positions past the end
    # reuse the last row. 0 means tgt_len + mem_len.
    max_pos: int = 0
    init_std: float = 0.02

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # a config file may hold any JSON: the type first
            v = getattr(self, f.name)
            kind = _FIELD_TYPES.get(str(f.type), str)
            if isinstance(v, bool) != (kind is bool) or not isinstance(v, kind):
                want = {int: "an integer", bool: "true or false", str: "a string"}.get(
                    kind, "a number"
                )
                raise ValueError(f"invalid model config: {f.name}={v!r}; expected {want}")
        positive = "an integer > 0"
        checks = {  # field: (holds, what would be right)
            "vocab_size": (self.vocab_size > 0, positive),
            "n_layer": (self.n_layer > 0, positive),
            "d_model": (self.d_model > 0, positive),
            "n_head": (self.n_head > 0, positive),
            "d_head": (self.d_head > 0, positive),
            "d_inner": (self.d_inner > 0, positive),
            "dropout": (0.0 <= self.dropout < 1.0, "a number in [0, 1)"),
            "dropatt": (0.0 <= self.dropatt < 1.0, "a number in [0, 1)"),
            "tgt_len": (self.tgt_len > 0, positive),
            "mem_len": (self.mem_len >= 0, "an integer >= 0"),
            "max_pos": (self.max_pos >= 0, "an integer >= 0 (0: tgt_len + mem_len)"),
            # NaN fails both comparisons
            "init_std": (0 < self.init_std < float("inf"), "a finite number > 0, e.g. 0.02"),
            "pos_enc": (self.pos_enc in POS_ENCODINGS, " | ".join(POS_ENCODINGS)),
        }
        bad = [k for k, (ok, _) in checks.items() if not ok]
        if bad:
            k = bad[0]
            raise ValueError(
                f"invalid model config: {k}={getattr(self, k)!r}; expected {checks[k][1]}"
            )

    @property
    def table_len(self) -> int:
        """Rows of a learned position table ("shaw", "learned")."""
        return self.max_pos or (self.tgt_len + self.mem_len)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TXLConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"unknown model config key(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}"
            )
        return cls(**data)
