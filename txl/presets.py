"""Named training presets: layered under a config file and command-line overrides.

Each preset is a partial, nested dict of `txl.train_config.TrainConfig` keys. `model.vocab_size`
is never set here (it comes from the tokenizer); `data` and `eval` are opaque to txl and are read
by whoever builds the stream and the evaluation callback (the `probe train` command).
Plain data, no torch import.
"""

from __future__ import annotations

import copy
from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    # The shipped default model: trains on 2 CPU cores. A memory of 256 makes an evaluation with
    # --mem 640 a plausible extrapolation. Pre-LN and an init std of 0.06 (the reference uses 0.02, at
    # d_model 410 and more): at d_model 128 with std 0.02 neither post- nor pre-LN formed an
    # in-context lookup on bursty text within 1,500 steps; with 0.06 a pre-LN model did by ~500.
    "tiny": {
        "model": dict(
            n_layer=2,
            d_model=128,
            n_head=4,
            d_head=32,
            d_inner=512,
            dropout=0.0,
            dropatt=0.0,
            pre_lnorm=True,
            init_std=0.06,
            tgt_len=64,
            mem_len=256,
        ),
        "steps": 9000,
        "batch_size": 32,
        "lr": 2e-3,
        "min_lr_ratio": 0.1,
        "warmup_steps": 200,
        "weight_decay": 0.0,
        "eval_every": 500,
        "checkpoint_every": 500,
        # More in-context-lookup text than the stream's default mixture: short bursty key→value
        # documents and sparse facts teach the lookup; corpus documents keep the filler language.
        "data": {"p_corpus": 0.4, "p_bursty": 0.3, "p_sparse": 0.3, "bursty_len": [32, 128]},
        "eval": {"mem_len": 640},  # also report recall with the longer evaluation memory
    },
    # A GPU model of tens of millions of parameters (about 26M besides the embedding).
    "small": {
        "model": dict(
            n_layer=8,
            d_model=512,
            n_head=8,
            d_head=64,
            d_inner=2048,
            dropout=0.1,
            dropatt=0.0,
            pre_lnorm=False,
            tgt_len=256,
            mem_len=256,
        ),
        "steps": 20000,
        "batch_size": 32,
        "lr": 5e-4,
        "min_lr_ratio": 0.05,
        "warmup_steps": 1000,
        "weight_decay": 0.01,
        "eval_every": 1000,
        "checkpoint_every": 1000,
    },
    # The shape of the paper's WikiText-103 base model (run_wt103_base.sh; the adaptive softmax
    # is not used: the synthetic vocabulary is small).
    "base": {
        "model": dict(
            n_layer=16,
            d_model=410,
            n_head=10,
            d_head=41,
            d_inner=2100,
            dropout=0.1,
            dropatt=0.0,
            pre_lnorm=False,
            tgt_len=150,
            mem_len=150,
        ),
        "steps": 200000,
        "batch_size": 60,
        "lr": 2.5e-4,
        "min_lr_ratio": 0.0,
        "warmup_steps": 0,
        "weight_decay": 0.0,
        "eval_every": 4000,
        "checkpoint_every": 4000,
    },
}

# The no-recurrence sibling of the default model: the same recipe and budget at mem_len 0 (no
# longer evaluation memory either: a memory-less model has nothing to extend).
PRESETS["tiny-mem0"] = {
    **copy.deepcopy(PRESETS["tiny"]),
    "model": {**PRESETS["tiny"]["model"], "mem_len": 0},
    "eval": {},
}

DEFAULT_PRESET = "tiny"


def preset(name: str) -> dict[str, Any]:
    """A deep copy of the preset's dict; KeyError (with the known names) if unknown."""
    if name not in PRESETS:
        raise KeyError(name)
    return copy.deepcopy(PRESETS[name])
