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
from txl.architecture import TRANSFORMER_XL, Architecture
from txl.checkpoint import RNG_FILE, TRAIN_STATE_FILE, CheckpointError
from txl.memory import Memory
from txl.process_rank import ProcessRank
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
    ctx: ProcessRank,
    tokenizer: dict[str, Any],
    training: dict[str, Any],
    architecture: Architecture = TRANSFORMER_XL,
) -> None:
    """Write a resumable checkpoint to `path` in `architecture`'s format. Every rank calls this
    (each rank's stream, memory and RNGs are gathered); rank 0 writes."""
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
    architecture.save(
        path,
        model,
        tokenizer=tokenizer,
        training=training,
        train_state=train_state,
        rng={"ranks": [r["rng"] for r in ranks]},
    )


# what a train_state.pt and an rng.json hold, checked before anything is restored from them
_STATE_KEYS = {
    "step": int,
    "tokens_seen": int,
    "elapsed_s": (int, float),
    "world_size": int,
    "optimizer": dict,
    "scheduler": dict,
    "ranks": list,
}
_RANK_KEYS = {"stream": str, "memory": list}
_RNG_KEYS = {"python": list, "numpy": dict, "torch": str}


def _wrong(data: Any, keys: Mapping[str, Any]) -> list[str]:
    if not isinstance(data, dict):
        return [f"a {type(data).__name__} instead of a dict"]
    return [
        f"{k!r} {'missing' if k not in data else 'is a ' + type(data[k]).__name__}"
        for k, t in keys.items()
        if not isinstance(data.get(k), t) or isinstance(data.get(k), bool)
    ]


def check_train_state(path: Path, state: Any, rng: Any) -> None:
    """CheckpointError (one line, naming the file) unless `state` and `rng` are what
    `save_train_state` writes."""
    wrong = _wrong(state, _STATE_KEYS)
    if not wrong:
        for i, r in enumerate(state["ranks"]):
            wrong += [f"ranks[{i}]: {w}" for w in _wrong(r, _RANK_KEYS)]
    if wrong or not state["ranks"]:
        raise CheckpointError(
            f"{path / TRAIN_STATE_FILE} is not a txl training state "
            f"({'; '.join(wrong[:3]) or 'no ranks'}); resume from another checkpoint or start "
            "a new run"
        )
    wrong = _wrong(rng, {"ranks": list})
    if not wrong:
        for i, r in enumerate(rng["ranks"]):
            wrong += [f"ranks[{i}]: {w}" for w in _wrong(r, _RNG_KEYS)]
        if len(rng["ranks"]) != len(state["ranks"]):
            wrong.append(f"{len(rng['ranks'])} ranks, train_state.pt has {len(state['ranks'])}")
    if wrong:
        raise CheckpointError(
            f"{path / RNG_FILE} is not a txl RNG state ({'; '.join(wrong[:3])}); resume from "
            "another checkpoint or start a new run"
        )


def load_train_state(
    path: Path,
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    stream: StatefulStream,
    ctx: ProcessRank,
    device: torch.device,
    grad_accum: int,
    architecture: Architecture = TRANSFORMER_XL,
) -> RestoredState:
    """Load this rank's part of the checkpoint at `path` into the model, optimizer, scheduler,
    stream and RNGs; return the counters and this rank's carried memories. RunDirError if the
    checkpoint was saved by another number of processes or another grad_accum; CheckpointError
    (one line, naming the file) if it is damaged or not what `save_train_state` writes."""
    ckpt = architecture.load(path, device="cpu")
    state = ckpt.train_state
    check_train_state(path, state, ckpt.rng)
    assert state is not None and ckpt.rng is not None
    if state["world_size"] != ctx.world_size:
        raise RunDirError(
            f"{path} was saved by {state['world_size']} processes, this run has "
            f"{ctx.world_size}; resume with the same number of processes"
        )
    if len(state["ranks"]) != ctx.world_size:
        raise CheckpointError(
            f"{path / TRAIN_STATE_FILE} holds {len(state['ranks'])} ranks but says world_size "
            f"{state['world_size']}; resume from another checkpoint"
        )
    try:
        return _restore(path, ckpt, model, optimizer, scheduler, stream, ctx, device, grad_accum)
    except (KeyError, IndexError, TypeError, ValueError, RuntimeError) as e:
        if isinstance(e, RunDirError):
            raise
        raise CheckpointError(
            f"{path} cannot be restored ({type(e).__name__}: {e}); resume from another "
            "checkpoint or start a new run"
        ) from e


def _restore(path, ckpt, model, optimizer, scheduler, stream, ctx, device, grad_accum):
    state = ckpt.train_state
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
