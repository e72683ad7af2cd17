"""A toy numpy stream and a script that trains a tiny TXL on it (for the txl training tests).

txl must train on any stream, so its tests do not use synth. Run as a script (one process, or
several under torchrun):

    python tests/train_worker.py OUT [--steps N] [--checkpoint-every N] [--resume]
                                     [--kill SIG@BATCH] [--dump]

`--kill TERM@5` makes the stream send SIGTERM (or KILL, INT) to its own process when it hands out
its 5th batch (counted over the whole run, resumes included): a kill at an exact step. `--dump`
writes each rank's parameters and stream state to OUT/rank{r}.pt after training.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

import numpy as np

VOCAB = 32
EOD = 1


class ToyStream:
    """B contiguous rows of documents (random lengths) whose tokens follow a noisy +3 chain.

    Doc ids: each row has its own id range; `<eod>` (id 1) opens a document and carries its id.
    Sharded by rank with SeedSequence.spawn; deterministic by seed; resumable from state_dict()."""

    def __init__(
        self,
        batch_size: int,
        tgt_len: int,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        kill: str | None = None,
    ) -> None:
        self.B, self.T = batch_size, tgt_len
        self.rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(world_size)[rank])
        self.last_tok = np.full(batch_size, EOD, dtype=np.int64)
        self.last_doc = np.arange(batch_size, dtype=np.int64) * 1_000_000
        self.left = self.rng.integers(5, 40, batch_size)
        self.n_batches = 0
        self.kill = kill

    def next_batch(self) -> tuple[np.ndarray, np.ndarray]:
        self.n_batches += 1
        if self.kill:
            name, at = self.kill.split("@")
            if self.n_batches == int(at):
                os.kill(os.getpid(), getattr(signal, f"SIG{name}"))
        B, T = self.B, self.T
        tokens = np.empty((B, T + 1), dtype=np.int64)
        docs = np.empty((B, T + 1), dtype=np.int64)
        tokens[:, 0], docs[:, 0] = self.last_tok, self.last_doc
        for t in range(1, T + 1):
            new = self.left <= 0
            step = self.rng.integers(0, 3, B)
            nxt = 2 + (tokens[:, t - 1] * 3 + step) % (VOCAB - 2)
            tokens[:, t] = np.where(new, EOD, nxt)
            docs[:, t] = docs[:, t - 1] + new
            self.left = np.where(new, self.rng.integers(5, 40, B), self.left - 1)
        self.last_tok, self.last_doc = tokens[:, -1].copy(), docs[:, -1].copy()
        return tokens, docs

    def state_dict(self) -> dict[str, Any]:
        return {
            "rng": self.rng.bit_generator.state,
            "last_tok": self.last_tok.tolist(),
            "last_doc": self.last_doc.tolist(),
            "left": self.left.tolist(),
            "n_batches": self.n_batches,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.last_tok = np.array(state["last_tok"], dtype=np.int64)
        self.last_doc = np.array(state["last_doc"], dtype=np.int64)
        self.left = np.array(state["left"], dtype=np.int64)
        self.n_batches = state["n_batches"]


def tiny_config(**overrides: Any):
    """A d_model 16 model and a short schedule; overrides are dotted config keys."""
    from probes.training.presets import resolve_dict
    from txl.train_config import TrainConfig

    items = {
        "model.vocab_size": VOCAB,
        "model.n_layer": 2,
        "model.d_model": 16,
        "model.n_head": 2,
        "model.d_head": 8,
        "model.d_inner": 32,
        "model.tgt_len": 8,
        "model.mem_len": 8,
        "model.dropout": 0.1,  # exercises the torch RNG across a resume
        "steps": 6,
        "batch_size": 4,
        "lr": 3e-3,
        "warmup_steps": 2,
        "eval_every": 0,
        "checkpoint_every": 0,
        "device": "cpu",
        **overrides,
    }
    return TrainConfig.from_dict(resolve_dict("tiny", None, list(items.items())))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--checkpoint-every", type=int, default=0)
    p.add_argument("--resume", action="store_true")
    p.add_argument("--kill", default=None)
    p.add_argument("--dump", action="store_true")
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    from txl.process_rank import ProcessRank
    from txl.run_dir import RunDirError
    from txl.signals import TrainingInterrupted
    from txl.train import NonFiniteLossError, train

    ctx = ProcessRank.from_env()
    config = tiny_config(steps=args.steps, checkpoint_every=args.checkpoint_every)
    stream = ToyStream(
        config.batch_size, config.model.tgt_len, 0, ctx.rank, ctx.world_size, args.kill
    )
    try:
        result = train(
            config,
            stream,
            out_dir=args.out,
            tokenizer={"toy": VOCAB},
            resume=args.resume,
            ctx=ctx,
            quiet=True,
            command="python tests/train_worker.py",
        )
    except TrainingInterrupted as e:
        print(e, file=sys.stderr)
        return 128 + e.signum
    except (RunDirError, NonFiniteLossError) as e:
        print(e, file=sys.stderr)
        return 2
    if args.dump:  # this rank's own parameters, as trained here
        torch.save(
            {"params": result.model.state_dict(), "stream": stream.state_dict()},
            os.path.join(args.out, f"rank{ctx.rank}.pt"),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
