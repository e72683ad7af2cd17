"""The optimizer of a training run: AdamW, with weight decay on weight matrices only."""

from __future__ import annotations

import torch
from torch import nn

from txl.train_config import TrainConfig


def adamw(model: nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW; weight decay on matrices only (not on biases, norms, or the u/v biases)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        is_bias = "bias" in name.rsplit(".", 1)[-1]  # fc.bias, norm.bias, out_bias, bias_u/v
        (decay if p.dim() >= 2 and not is_bias else no_decay).append(p)
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        groups, lr=config.lr, betas=(config.beta1, config.beta2), eps=config.eps
    )
