"""Several processes under torchrun: the process group, the few collectives the training loop
needs, and the DistributedDataParallel wrapper that averages gradients over ranks.

Who this process is among them is txl.process_rank.ProcessRank (torchrun's RANK, WORLD_SIZE, LOCAL_RANK;
MASTER_ADDR/PORT for the group); without them this is a single process and every helper is a
no-op. Backend: NCCL on CUDA, gloo on CPU.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import nn

if TYPE_CHECKING:  # process_rank calls into this module; this one only names its type
    from txl.process_rank import ProcessRank


def init(ctx: ProcessRank, device: torch.device) -> None:
    """Join the process group (idempotent; nothing for a single process)."""
    if not ctx.enabled or dist.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, rank=ctx.rank, world_size=ctx.world_size)


def shutdown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def active() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """In place across ranks; returns `t`."""
    if active():
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def any_rank(flag: bool, device: torch.device) -> bool:
    """True on every rank if it is true on any rank (so all ranks take the same branch)."""
    if not active():
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def gather_objects(obj: Any) -> list[Any]:
    """Every rank's `obj`, in rank order (on every rank)."""
    if not active():
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def barrier() -> None:
    if active():
        dist.barrier()


def wrap_model(model: nn.Module, ctx: ProcessRank, device: torch.device) -> nn.Module:
    """The module to call in training: `model` under DistributedDataParallel with several
    processes (gradients averaged over ranks), `model` itself with one."""
    if not ctx.enabled:
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None
    )


def deferred_sync(forward: nn.Module, defer: bool) -> contextlib.AbstractContextManager:
    """With `defer`, a backward pass inside the block leaves DDP's gradient averaging to a later
    one (a gradient-accumulation chunk that is not the last); a no-op for a plain module."""
    if defer and isinstance(forward, nn.parallel.DistributedDataParallel):
        return forward.no_sync()
    return contextlib.nullcontext()
