"""Where this process stands among those torchrun started: its rank, the world size and its place
on its node, from the environment torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE); one process without it. Imports nothing heavy, so the command line can ask
before torch is loaded; joining, leaving and gathering over the process group
(txl.distributed: gloo on CPU, NCCL on CUDA) load torch when there are several processes.

One probe run across processes (`torchrun --nproc_per_node N -m probes.cli run PROBE …`): every
rank prepares the same run and only the scoring is divided — chunk c of the very chunks a single
process would score goes to rank c mod N, and after each round every rank gathers every rank's
records — so a pair's numbers are those of a single-process run, bit for bit where the
arithmetic is (CPU, the same thread count per process). Rank 0 alone writes the run directory.
Training shards its stream by rank and averages gradients (txl.distributed)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProcessRank:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1

    @property
    def enabled(self) -> bool:
        """Whether there are several processes."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_env(cls):
        """This process's place, from torchrun's environment (one process without it)."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls()
        return cls(
            rank=int(os.environ["RANK"]),
            world_size=world,
            local_rank=int(os.environ.get("LOCAL_RANK", "0")),
            local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
        )

    def join(self, device: str) -> None:
        """Join the process group on `device` ("cpu" | "cuda"; CUDA: this rank's own GPU,
        LOCAL_RANK). Nothing for one process, or when the caller's process group exists
        already (a probe run inside a torchrun program of its own keeps that group)."""
        global _joined
        if not self.enabled:
            return
        import torch  # lazy: torch, only under several processes
        import torch.distributed as dist  # lazy: torch

        from txl import distributed  # lazy: torch

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
        from txl import distributed  # lazy: torch

        distributed.barrier()
        distributed.shutdown()
        _joined = False

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, in rank order, on every rank ([obj] for one process)."""
        if not self.enabled:
            return [obj]
        from txl import distributed  # lazy: torch

        return distributed.gather_objects(obj)

    def record(self) -> dict[str, int]:
        return {"world_size": self.world_size}

    def share(self, cores: int) -> int:
        """The cores one of this node's ranks may use: `cores` divided among the local ranks."""
        return max(1, cores // self.local_world_size)


_joined = False  # whether this process's group was made by `join` (and is `leave`'s to end)


def usable_cores() -> int:
    """Cores this process may use (the affinity mask, not the machine's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def default_threads() -> int:
    """The cores this process may use, less those other processes keep busy (the 1-minute load
    average, rounded down): oversubscribed OpenMP threads spin against each other, and on a
    shared 2-core machine one thread then evaluates 2–3× faster than two. Under torchrun the
    ranks on this machine share the cores, load aside: each rank reads the load at its own
    moment (its siblings' start-up in it or not), and the ranks of one run must compute at the
    one count rank 0 records."""
    cores = usable_cores()
    ranks = ProcessRank.from_env()
    if ranks.enabled:
        return ranks.share(cores)
    try:
        busy = int(os.getloadavg()[0])
    except OSError:  # pragma: no cover - no load average on this platform
        busy = 0
    return ranks.share(max(1, cores - busy))
