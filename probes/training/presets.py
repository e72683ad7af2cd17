"""Named training presets: layered under a config file and command-line overrides.

Each preset is a partial, nested dict of `txl.train_config.TrainConfig` keys. `model.vocab_size`
is never set here (it comes from the tokenizer); `data` and `eval` are opaque to txl and are read
by whoever builds the stream and the evaluation callback (the `probe train` command).
Plain data, no torch import.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from txl.train_config import resolve_dict as resolve


def _shape(
    n_layer: int,
    d_model: int,
    n_head: int,
    d_head: int,
    d_inner: int,
    tgt_len: int,
    mem_len: int,
    *,
    dropout: float,
    pre_lnorm: bool,
    **more: Any,
) -> dict[str, Any]:
    """A preset's `model` table (dropatt 0 throughout; `more`: e.g. init_std)."""
    return dict(
        n_layer=n_layer,
        d_model=d_model,
        n_head=n_head,
        d_head=d_head,
        d_inner=d_inner,
        dropout=dropout,
        dropatt=0.0,
        pre_lnorm=pre_lnorm,
        tgt_len=tgt_len,
        mem_len=mem_len,
        **more,
    )


def _schedule(
    steps: int,
    batch_size: int,
    *,
    lr: float,
    min_lr_ratio: float,
    warmup: int,
    decay: float,
    every: int,
) -> dict[str, Any]:
    """A preset's optimisation keys; it evaluates and checkpoints `every` steps."""
    return {
        "steps": steps,
        "batch_size": batch_size,
        "lr": lr,
        "min_lr_ratio": min_lr_ratio,
        "warmup_steps": warmup,
        "weight_decay": decay,
        "eval_every": every,
        "checkpoint_every": every,
    }


PRESETS: dict[str, dict[str, Any]] = {
    # The shipped default model: trains on 2 CPU cores. A memory of 256 makes an evaluation with
    # --mem 640 a plausible extrapolation. What makes it retrieve (docs/results.md, "The shipped models"):
    # - the language's queries put the answer right after the entity (synth language v2): with
    #   "ENTITY : VALUE" no recipe tried matched the query's entity to its statement;
    # - pre-LN and init std 0.06, not the reference's 0.02 (tuned for d_model 410+): at d_model 128
    #   with 0.02 no in-context lookup formed on bursty text within 1,500 steps, post- or pre-LN;
    #   with 0.06 a pre-LN model forms one by ~600;
    # - a curriculum: each row's first 1,000 segments are plain bursty documents only, 64 tokens
    #   long (in a mixture from the start the lookup had not formed by step 2,500), then the
    #   mixture, where the lookup carries over to facts within a few hundred steps;
    # - topic filler in every document with filler, and 16,000 steps: the filler language is
    #   learned close to its floor.
    "tiny": {
        "model": _shape(2, 128, 4, 32, 512, 64, 256, dropout=0.0, pre_lnorm=True, init_std=0.06),
        **_schedule(16000, 32, lr=3e-3, min_lr_ratio=0.1, warmup=100, decay=0.0, every=1000),
        # More in-context-lookup text than the stream's default mixture: bursty key→value
        # documents and sparse facts keep the lookup sharp. Corpus documents are the majority and
        # sparse ones use the same topic filler, so the filler language is the same everywhere
        # (with i.i.d. filler in sparse documents a document's first words are ambiguous).
        "data": {
            "p_corpus": 0.6,
            "p_bursty": 0.2,
            "p_sparse": 0.2,
            "sparse_filler": "markov",
            "bursty_len": [64, 64],
            "bursty_first": 64000,  # tokens per row = 1,000 segments of 64
        },
        "eval": {"mem_len": 640},  # also report recall with the longer evaluation memory
    },
    # A GPU model of tens of millions of parameters (about 26M besides the embedding).
    "small": {
        "model": _shape(8, 512, 8, 64, 2048, 256, 256, dropout=0.1, pre_lnorm=False),
        **_schedule(20000, 32, lr=5e-4, min_lr_ratio=0.05, warmup=1000, decay=0.01, every=1000),
    },
    # The shape of the paper's WikiText-103 base model (run_wt103_base.sh; the adaptive softmax
    # is not used: the synthetic vocabulary is small).
    "base": {
        "model": _shape(16, 410, 10, 41, 2100, 150, 150, dropout=0.1, pre_lnorm=False),
        **_schedule(200000, 60, lr=2.5e-4, min_lr_ratio=0.0, warmup=0, decay=0.0, every=4000),
    },
}

# The no-recurrence sibling of the default model: the same recipe and budget at mem_len 0 (no
# longer evaluation memory either: a memory-less model has nothing to extend).
PRESETS["tiny-mem0"] = {
    **copy.deepcopy(PRESETS["tiny"]),
    "model": {**PRESETS["tiny"]["model"], "mem_len": 0},
    "eval": {},
}

# The ablation group of the paper's Table 6 at the default model's size, recipe and budget; only
# the position encoding (and, for the Al-Rfou row, the recurrence) differs from "tiny" / "tiny-mem0".
# The paper trains its absolute-encoding rows with the "half" loss (only the second half of each
# segment is scored); these train on the full loss like the rest of the group.
PRESETS["tiny-shaw"] = {  # Shaw et al. learned relative encoding + recurrence
    **copy.deepcopy(PRESETS["tiny"]),
    "model": {**PRESETS["tiny"]["model"], "pos_enc": "shaw"},
}
PRESETS["tiny-abs"] = {  # Vaswani et al. sinusoid, window-relative, + recurrence
    **copy.deepcopy(PRESETS["tiny"]),
    "model": {**PRESETS["tiny"]["model"], "pos_enc": "abs"},
}
PRESETS["tiny-learned-mem0"] = {  # Al-Rfou et al. learned absolute positions, no recurrence
    **copy.deepcopy(PRESETS["tiny-mem0"]),
    "model": {**PRESETS["tiny-mem0"]["model"], "pos_enc": "learned"},
}

# A deeper Transformer-XL whose layered reach (n_layer x mem_len + offset: 384-448 tokens) lies far
# beyond its direct window (mem_len + offset: 64-128): can a fact climb through cached states?
# Corpus facts are queried mostly from the layered band, and sparse documents span six segments
# (facts in the first three, queries in the last three), so most training answers need a fact the
# last layer cannot attend to.
PRESETS["deep"] = {
    **copy.deepcopy(PRESETS["tiny"]),
    "model": {**PRESETS["tiny"]["model"], "n_layer": 6, "mem_len": 64},
    "data": {
        **PRESETS["tiny"]["data"],
        "distance_bins": [[6, 128, 0.3], [128, 448, 0.7]],
        "doc_len": [256, 1024],
        "sparse_len": 384,
    },
    "eval": {"edges": [6, 64, 128, 192, 256, 320, 384, 448, 640]},
}

# The second attempt at the layered question, after "deep" learned in-window lookup only halfway
# (recall ~50% at 6-64 tokens, flat from step 3,000): four layers (layered reach 320), half the
# corpus facts queried inside the direct window so the lookup itself is learned as in "tiny", and
# the other half from the layered band 128-320 only.
PRESETS["deep4"] = {
    **copy.deepcopy(PRESETS["tiny"]),
    "model": {**PRESETS["tiny"]["model"], "n_layer": 4, "mem_len": 64},
    "data": {
        **PRESETS["tiny"]["data"],
        "distance_bins": [[6, 128, 0.5], [128, 320, 0.5]],
        "doc_len": [256, 1024],
        "sparse_len": 320,
    },
    "eval": {"edges": [6, 64, 128, 192, 256, 320, 448, 640]},
}

# Other architectures on the same stream, recipe and token budget, trained by the same loop
# (probes.training.hf_arch; the `hf` extra). Nothing is carried between segments (mem_len 0), so a
# training row is one segment of 384 tokens, longer than the window: 8 rows × 384 = 3,072 tokens
# an update (the default's 32 × 64 = 2,048), and the curriculum's 2M tokens of bursty text.
_HF_MODEL = _shape(2, 128, 4, 32, 512, 384, 0, dropout=0.0, pre_lnorm=True, init_std=0.02)
# A sliding-window transformer (Mistral-style: rotary, RMSNorm, SwiGLU) whose window equals the
# default model's training attention length (tgt 64 + mem 256 = 320), on the default's token
# budget. Its recipe differs where the default's did not form the lookup: with bursty pairs first
# (the default's curriculum) it formed none through 10,667 updates (recall 0.1-0.25 at every
# distance, init std 0.02 or 0.06, lr 3e-3; a Llama with attention biases likewise). So:
# - 150 updates of repeated random spans first (`repeat_first`): the copy forms within ~100;
# - then 1,500 updates of bursty pairs (a third of them in the default's curriculum gave a bursty
#   NLL still falling fast at its end);
# - lr 1e-3: at 3e-3 the switch from spans to pairs twice left the model stuck at the unigram
#   level (bursty NLL 3.4 for hundreds of updates);
# - rope_theta 1e6: with the usual 1e4 and 32 dims per head, only ~5 of a head's 16 rotary
#   frequencies turn by less than half a radian over 256 tokens, and recall fell with distance
#   even on the bursty pairs (53 / 31 / 19 % at 5-16 / 16-32 / 32-64); at 1e6 about 9 do, so
#   more of each head can match content across the window.
PRESETS["tiny-window"] = {
    **copy.deepcopy(PRESETS["tiny"]),
    "model": {**_HF_MODEL, "init_std": 0.06},
    **_schedule(10667, 8, lr=1e-3, min_lr_ratio=0.1, warmup=100, decay=0.0, every=500),
    "data": {
        **PRESETS["tiny"]["data"],
        "repeat_first": 150 * 384,
        "bursty_first": (150 + 1500) * 384,
    },
    "eval": {},
    "arch": {"family": "mistral", "sliding_window": 320, "rope_theta": 1_000_000},
}
# A selective state-space model (Mamba: two layers of d_model 160, 0.40M parameters beside the
# default's 0.48M). Not shipped (see "tiny-mamba2"): its CPU training runs ~1,100 tokens/s on one
# thread with mambapy's parallel scan (transformers' own sequential scan: ~30), a tenth of the
# window model's rate, so its budget is 1,200 updates (3.7M tokens, 11 % of the default's), and
# by update 800 it had formed no lookup (recall 0-6 % at every distance). The scan pads a row to
# a power of two, so its rows are 6 × 512 tokens (384 would cost as much as 512).
PRESETS["tiny-mamba"] = {
    **copy.deepcopy(PRESETS["tiny"]),
    "model": {**_HF_MODEL, "d_model": 160, "d_head": 40, "tgt_len": 512},
    **_schedule(1200, 6, lr=3e-3, min_lr_ratio=0.1, warmup=100, decay=0.0, every=200),
    "eval": {},
    "arch": {"family": "mamba", "state_size": 16},
}
# A state-space model of the Mamba-2 kind (SSD: a matrix state per head; two layers of d_model
# 128, state 32, head_dim 32: 0.27M parameters), on the window model's stream. Its chunked scan
# is matrix products, so it trains at ~5,000 tokens/s on one CPU thread (five times Mamba's
# parallel scan, a third of the window model's rate): 5,000 updates, 15.4M tokens, 47 % of the
# default's token budget and about its wall time. Its recipe is the one under which the lookup
# formed within 450 updates (bursty NLL 0.42): bursty pairs first (1,650 updates, as the window
# model), no repeated spans (in 150 updates of them the copy had not begun, and a 2-layer state
# cannot hold a 31-word span), lr 3e-3 (at 1e-3 the bursty NLL was still 3.3 at update 450).
# Half its bursty documents are a fact and its queries (`bursty_statement`): with plain pairs
# only, its bursty NLL reached 0.07 by update 3,000 while fact answers stayed at 3.1 nats and
# recall at 0-6 % (the state stored a pair under the token just before the value, where a fact
# puts "is").
PRESETS["tiny-mamba2"] = {
    **copy.deepcopy(PRESETS["tiny"]),
    "model": {**_HF_MODEL, "init_std": 0.06},
    **_schedule(5000, 8, lr=3e-3, min_lr_ratio=0.1, warmup=100, decay=0.0, every=500),
    "data": {**PRESETS["tiny"]["data"], "bursty_first": 1650 * 384, "bursty_statement": 0.5},
    "eval": {},
    "arch": {"family": "mamba2", "state_size": 32, "head_dim": 32},
}

# Real text (`probe train --text PATH`): the default model's shape and recipe on a user's files
# (or `--text default`), a byte-level BPE of 2,048 tokens trained on them, half the documents
# given English facts and queries so that lookup can be learned on real text. No curriculum:
# the synth stream's bursty documents have no counterpart in real text.
PRESETS["text"] = {
    "model": _shape(2, 128, 4, 32, 512, 64, 256, dropout=0.0, pre_lnorm=True, init_std=0.06),
    **_schedule(4000, 32, lr=3e-3, min_lr_ratio=0.1, warmup=100, decay=0.0, every=500),
    "data": {"text": {"vocab_size": 2048, "facts": 0.5}},
    "eval": {},
}

# a run goes to DEFAULT_OUT / PRESET unless told otherwise
DEFAULT_OUT = Path("runs") / "train"
DEFAULT_PRESET = "tiny"
TEXT_PRESET = "text"  # what `--text` trains with unless a preset or config file is given


def resolve_dict(
    preset: str | None = None,
    config_file: str | Path | None = None,
    overrides: Iterable[str | tuple[str, Any]] = (),
) -> dict[str, Any]:
    """`txl.train_config.resolve_dict` over these presets (default: the shipped model's)."""

    return resolve(preset, config_file, overrides, presets=PRESETS, default_preset=DEFAULT_PRESET)
