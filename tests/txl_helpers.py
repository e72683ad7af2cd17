"""Shared builders for the tests/test_txl_*.py modules: one tiny model recipe and one thread."""

from __future__ import annotations

import pytest
import torch

from txl.config import TXLConfig
from txl.model import TransformerXL

POS_ENCS = ("rel", "shaw", "abs", "learned")


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models: one thread is ~50× faster than two busy-waiting OpenMP threads on shared cores.

    Import it into a test module to have it apply there (autouse, once per module)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def tiny_model(vocab_size: int, *, train: bool = False, **overrides) -> TransformerXL:
    """A float64 TransformerXL (2 layers, d_model 16, tgt_len = mem_len = 4) seeded with 0; keyword
    arguments override any TXLConfig field. Eval mode unless `train`."""
    base = dict(
        vocab_size=vocab_size,
        n_layer=2,
        d_model=16,
        n_head=2,
        d_head=8,
        d_inner=32,
        tgt_len=4,
        mem_len=4,
        init_std=0.3,
    )
    base.update(overrides)
    torch.manual_seed(0)
    model = TransformerXL(TXLConfig(**base)).double()
    return model.train() if train else model.eval()
