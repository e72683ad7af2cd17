"""What a training run will allocate, estimated from its config before anything is built: the
weights, their gradients and AdamW's two moments (16 bytes a parameter in float32), plus one
step's activations. `prepare` refuses a run that cannot fit (probes.limits)."""

from __future__ import annotations

from typing import Any

from probes.limits import require_memory
from txl.model import TransformerXL


def parameter_count(model_config: Any) -> int:
    """Parameters of TransformerXL(model_config), counted on the meta device (no memory)."""
    import torch

    with torch.device("meta"):
        model = TransformerXL(model_config, shapes_only=True)
    return sum(p.numel() for p in model.parameters())


def training_bytes(config: Any) -> int:
    """An estimate of a run's peak memory (bytes), activations kept for the backward pass."""
    m = config.model
    rows = config.batch_size
    keys = m.tgt_len + m.mem_len
    per_layer = (
        3 * m.n_head * m.tgt_len * keys  # attention scores, probabilities, position scores
        + 8 * m.tgt_len * m.d_model  # q/k/v/output projections and the residual stream
        + 2 * m.tgt_len * m.d_inner  # the feed-forward
    )
    activations = rows * (m.n_layer * per_layer + (m.n_layer + 1) * keys * m.d_model)
    logits = 3 * rows * m.tgt_len * m.vocab_size
    return 16 * parameter_count(m) + 4 * (activations + logits)


def check_fits(config: Any, device: str = "cpu") -> None:
    """Raise probes.limits.LimitError when the run would not fit in the memory of `device` (a
    resolved device: "cpu", or "cuda" — the GPU's free memory; one rank's share either way)."""

    available = None
    if str(device).startswith("cuda"):
        import torch

        available = torch.cuda.mem_get_info(torch.device(device))[0]
    require_memory(
        f"training this config (d_model {config.model.d_model:,}, {config.model.n_layer} layers, "
        f"batch {config.batch_size})",
        training_bytes(config),
        "make the model or the batch smaller",
        available,
    )
