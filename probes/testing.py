"""Helpers for tests and demos: a tiny untrained checkpoint that speaks a synth language.

    from probes.testing import tiny_checkpoint
    tiny_checkpoint(tmp_path / "m", mem_len=0)     # then: probe run fact-swap --model tmp_path/m

Never the shipped model: tests must not depend on a trained artifact.
"""

from __future__ import annotations

from pathlib import Path


def tiny_checkpoint(
    path: str | Path,
    *,
    mem_len: int = 16,
    tgt_len: int = 16,
    n_layer: int = 2,
    d_model: int = 16,
    n_head: int = 2,
    seed: int = 0,
    language=None,
    init_std: float = 0.5,
) -> Path:
    """Save a randomly initialised TransformerXL (d_model 16 by default) with `language`'s JSON
    as its tokenizer (default: synth's Language.default()). A large `init_std` makes an untrained
    model's attention far from uniform, so deltas inside its reach are clearly non-zero."""
    import torch

    from synth.language import Language
    from txl.checkpoint import save_checkpoint
    from txl.config import TXLConfig
    from txl.model import TransformerXL

    lang = language or Language.default()
    torch.manual_seed(seed)
    config = TXLConfig(
        vocab_size=lang.vocab.size,
        n_layer=n_layer,
        d_model=d_model,
        n_head=n_head,
        d_head=d_model // n_head,
        d_inner=2 * d_model,
        tgt_len=tgt_len,
        mem_len=mem_len,
        init_std=init_std,
    )
    model = TransformerXL(config)
    save_checkpoint(
        path, model, tokenizer=lang.to_json(), training={"note": "untrained, for tests"}
    )
    return Path(path)
