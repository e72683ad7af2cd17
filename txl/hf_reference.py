"""The Hugging Face `TransfoXLConfig` keywords of a model of the same shape as ours.

Used where HF's `TransfoXLLMHeadModel` serves as the reference implementation (the parity tests
and the training benchmark). Plain data: importing this module does not import `transformers`.
"""

from __future__ import annotations

from typing import Any

from txl.config import TXLConfig


def transfo_xl_kwargs(
    config: TXLConfig,
    *,
    mem_len: int | None = None,
    tgt_len: int | None = None,
    clamp_len: int = 0,
    same_length: bool = False,
) -> dict[str, Any]:
    """Keywords for `TransfoXLConfig`: one plain softmax (no adaptive cutoffs), the embedding as
    wide as the model, no dropout, our LayerNorm epsilon; the geometry defaults to the config's
    (clamp_len 0 = no clamping)."""
    return {
        "vocab_size": config.vocab_size,
        "cutoffs": [],
        "div_val": 1,
        "d_model": config.d_model,
        "d_embed": config.d_model,
        "n_head": config.n_head,
        "d_head": config.d_head,
        "d_inner": config.d_inner,
        "n_layer": config.n_layer,
        "pre_lnorm": config.pre_lnorm,
        "untie_r": config.untie_r,
        "tie_word_embeddings": config.tie_weight,
        "mem_len": config.mem_len if mem_len is None else mem_len,
        "tgt_len": config.tgt_len if tgt_len is None else tgt_len,
        "clamp_len": clamp_len or -1,
        "same_length": same_length,
        "attn_type": 0,
        "dropout": 0.0,
        "dropatt": 0.0,
        "layer_norm_epsilon": 1e-5,
    }
