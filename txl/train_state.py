"""Resumable checkpoints: the weights with everything else that decides the next updates.

Besides the model, a resumable checkpoint holds the optimizer and scheduler, the counters (step,
tokens seen, training time) and, per rank, the stream's state, the carried memory of each
gradient-accumulation chunk with its doc ids, and every RNG (`txl.rng`). Restoring all of it makes
a resumed run compute what an uninterrupted one would have, bit for bit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from txl import distributed
from txl.checkpoint import load_checkpoint, save_checkpoint
from txl.distributed import DistContext
from txl.memory import Memory
from txl.rng import rng_state, set_rng_state
from txl.run_dir import RunDirError


class StatefulStream(Protocol):
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class Counters:
    step: int  # updates done
    tokens_seen: int  # valid targets trained on, over all ranks
    elapsed_s: float  # training time, evaluations and saving left out


@dataclass(frozen=True)
class RestoredState:
    counters: Counters
    memories: list[Memory | None]  # this rank's, one per gradient-accumulation chunk


def _memory_state(mem: Memory | None) -> dict[str, Any] | None:
    if mem is None:
        return None
    return {"states": [s.detach().cpu() for s in mem.states], "doc_ids": mem.doc_ids.cpu()}


def _memory_from_state(state: Mapping[str, Any] | None, device: torch.device) -> Memory | None:
    if state is None:
        return None
    return Memory(tuple(s.to(device) for s in state["states"]), state["doc_ids"].to(device))


def save_train_state(
    path: Path,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    stream: StatefulStream,
    memories: list[Memory | None],
    counters: Counters,
    ctx: DistContext,
    tokenizer: dict[str, Any],
    training: dict[str, Any],
) -> None:
    """Write a resumable checkpoint to `path`. Every rank calls this (each rank's stream, memory
    and RNGs are gathered); rank 0 writes."""
    mine = {
        "stream": json.dumps(stream.state_dict(), sort_keys=True),
        "memory": [_memory_state(m) for m in memories],
        "rng": rng_state(),
    }
    ranks = distributed.gather_objects(mine)
    if not ctx.is_main:
        return
    train_state = {
        "step": counters.step,
        "tokens_seen": counters.tokens_seen,
        "elapsed_s": counters.elapsed_s,
        "world_size": ctx.world_size,
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "ranks": [{"stream": r["stream"], "memory": r["memory"]} for r in ranks],
    }
    save_checkpoint(
        path,
        model,
        tokenizer=tokenizer,
        training=training,
        train_state=train_state,
        rng={"ranks": [r["rng"] for r in ranks]},
    )


def load_train_state(
    path: Path,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    stream: StatefulStream,
    ctx: DistContext,
    device: torch.device,
    grad_accum: int,
) -> RestoredState:
    """Load this rank's part of the checkpoint at `path` into the model, optimizer, scheduler,
    stream and RNGs; return the counters and this rank's carried memories. RunDirError if the
    checkpoint was saved by another number of processes or another grad_accum."""
    ckpt = load_checkpoint(path, device="cpu")
    state = ckpt.train_state
    assert state is not None and ckpt.rng is not None
    if state["world_size"] != ctx.world_size:
        raise RunDirError(
            f"{path} was saved by {state['world_size']} processes, this run has "
            f"{ctx.world_size}; resume with the same number of processes"
        )
    with torch.no_grad():
        for p_to, p_from in zip(
            model.state_dict().values(), ckpt.model.state_dict().values(), strict=True
        ):
            p_to.copy_(p_from)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    mine = state["ranks"][ctx.rank]
    stream.load_state_dict(json.loads(mine["stream"]))
    memories = [_memory_from_state(m, device) for m in mine["memory"]]
    if len(memories) != grad_accum:
        raise RunDirError(f"{path} was saved with another grad_accum; keep the run's config")
    set_rng_state(ckpt.rng["ranks"][ctx.rank])
    counters = Counters(int(state["step"]), int(state["tokens_seen"]), float(state["elapsed_s"]))
    return RestoredState(counters, memories)
