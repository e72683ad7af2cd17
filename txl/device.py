"""Devices: which torch device a --device name means here, and its peak throughput (for MFU)."""

from __future__ import annotations

import torch

from txl.train_config import ConfigError

# Peak dense bf16 throughput (TFLOP/s) of known accelerators, for the MFU estimate.
PEAK_TFLOPS = {"H200": 790.0, "H100": 989.0, "A100": 312.0}


class DeviceError(ConfigError):
    """A device name that cannot be used here; the message is one line."""


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    """auto | cpu | cuda → a torch.device; cuda is GPU `local_rank` (this process's under
    torchrun), auto is cuda where CUDA is available, else cpu. DeviceError (a ConfigError) for a
    name that cannot be used here."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cpu":
        return torch.device("cpu")
    if name != "cuda":
        raise DeviceError(f"--device {name!r}: use auto, cpu or cuda")
    if not torch.cuda.is_available():
        raise DeviceError(
            f"--device cuda: CUDA is not available here (torch {torch.__version__}); "
            "use --device cpu or --device auto"
        )
    return torch.device("cuda", local_rank)


def peak_flops(device: torch.device, peak_tflops: float | None = None) -> float | None:
    """FLOP/s that MFU is measured against: `peak_tflops` if given, else a known GPU's bf16 peak
    (None for anything else)."""
    if peak_tflops is not None:
        return peak_tflops * 1e12
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, tflops in PEAK_TFLOPS.items():
            if key in name:
                return tflops * 1e12
    return None
