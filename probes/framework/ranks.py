"""One probe run across several processes: `torchrun --nproc_per_node N -m probes.cli run PROBE …`.

Every rank prepares the same run (the same options, the same seed, so the same pairs in the same
order) and runs the probe; only the scoring is divided. `probes.engine.rows.score_batches` cuts
the items into the very chunks a single process would score — the same rows in every forward,
so the same floating-point arithmetic — and hands chunk c to rank c mod N; after each round of N
chunks every rank receives every rank's records (an all-gather), so all ranks hold all the
numbers and take the same branches. Rank 0 alone writes the run directory, prints the result and
draws the plots. A pair's numbers are therefore those of a single-process run, bit for bit where
the arithmetic is (CPU, the same thread count per process).

Probes that score through `score_batches` declare `Probe.shards = True`; a probe that scores
otherwise (context-sweep, recl, speed) is refused under several ranks, and so is `probe
diagnose`, rather than repeating all of its work on every rank.

torchrun sets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE; without them this is one
process and nothing here imports torch. The process group (txl.distributed: gloo on CPU, NCCL on
CUDA) is joined when the model's device is known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from txl.process_rank import ProcessRank


@dataclass(frozen=True)
class Ranks(ProcessRank):
    """This process's place (txl.process_rank.ProcessRank) and the little a probe run does with it."""

    def join(self, device: str) -> None:
        """Join the process group on `device` ("cpu" | "cuda"; CUDA: this rank's own GPU,
        LOCAL_RANK). Nothing for one process, or when the caller's process group exists
        already (a probe run inside a torchrun program of its own keeps that group)."""
        global _joined
        if not self.enabled:
            return
        import torch
        import torch.distributed as dist

        from txl import distributed

        if dist.is_initialized():
            return
        where = torch.device("cuda", self.local_rank) if device == "cuda" else torch.device("cpu")
        distributed.init(self, where)
        _joined = True

    def leave(self) -> None:
        """Leave the process group `join` created, after a barrier (every rank has finished its
        part); a group the caller made is left as it is."""
        global _joined
        if not (self.enabled and _joined):
            return
        from txl import distributed

        distributed.barrier()
        distributed.shutdown()
        _joined = False

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, in rank order, on every rank ([obj] for one process)."""
        if not self.enabled:
            return [obj]
        from txl import distributed

        return distributed.gather_objects(obj)

    def record(self) -> dict[str, int]:
        return {"world_size": self.world_size}


ONE = Ranks()
_joined = False  # whether this process's group was made by `join` (and is `leave`'s to end)


def local_share(cores: int) -> int:
    """The cores one of this node's ranks may use: `cores` divided among the local ranks."""
    return max(1, cores // Ranks.from_env().local_world_size)
