"""The training loop: any stream of (tokens, doc_ids) batches in, checkpoints and metrics out.

txl knows nothing of where the text comes from. The caller hands `train` a **stream** object

    next_batch() -> (tokens, doc_ids)   numpy int64, both (B, tgt_len + 1); each row continues
                                        the same row of the previous batch (one token overlap:
                                        the last target is the next first input)
    state_dict() -> dict                JSON-serialisable; load_state_dict(dict) restores it

and optionally an **evaluation callback** `(model, step) -> dict` (held-out metrics, whatever the
caller measures), called on the unwrapped model in eval mode, under no_grad, with every RNG saved
and restored around it, so that evaluating never changes what training computes.

One update (`step`): the batch's B rows are split into `grad_accum` chunks of rows, each with its
own carried memory (the reference's `batch_chunk`); the loss is the mean NLL of every target whose
input and target are not padding (doc id −1); gradients summed, clipped to `grad_clip`, AdamW
(`txl.optimizer`), warmup + cosine (`txl.schedule`). The memory is carried across updates
(detached by the model), and documents are reset inside the model by the same doc-id masking as
evaluation.

The run directory (run.json, metrics.jsonl, checkpoints/, model/) is `txl.run_dir`'s.

Resuming restores weights, optimizer, scheduler, the python/numpy/torch RNG states, the stream's
state and the carried memory with its doc ids, per rank (`txl.train_state`); metrics lines after
the checkpoint's step are dropped, so replayed steps replace rather than duplicate them. On CPU
with a fixed thread count a killed and resumed run computes the same losses as an uninterrupted
one, bit for bit.

Under torchrun each process trains on its own stream (the caller shards it by rank) with its own
memory; DistributedDataParallel averages the gradients (`txl.distributed`). SIGINT/SIGTERM finish
the step, save and stop (`txl.signals`).
"""

from __future__ import annotations

import math
import random
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from txl import distributed
from txl.architecture import TRANSFORMER_XL, Architecture
from txl.checkpoint import CheckpointError
from txl.device import peak_flops, resolve_device
from txl.memory import Memory
from txl.metrics_log import METRICS_FILE, MetricsLog
from txl.optimizer import adamw
from txl.process_rank import ProcessRank
from txl.progress import TrainProgress, eval_line
from txl.rng import isolated_rng
from txl.run_dir import (
    MODEL_DIR,
    TRAINER,
    DirLock,
    RunDirError,
    check_run_dir,
    checkpoint_bytes,
    checkpoint_path,
    clean_partial_writes,
    complete_checkpoints,
    drop_checkpoints_after,
    incomplete_checkpoints,
    load_run_config,
    prune_checkpoints,
    record_start,
)
from txl.schedule import WarmupCosine
from txl.signals import StopSignals, TrainingInterrupted
from txl.train_config import RUNTIME_KEYS, ConfigError, TrainConfig, differences
from txl.train_state import Counters, load_train_state, save_train_state


class Stream(Protocol):
    def next_batch(self) -> tuple[np.ndarray, np.ndarray]: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any]) -> None: ...


EvalFn = Callable[[nn.Module, int], Mapping[str, Any]]


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or infinite; nothing was updated or saved at that step."""

    def __init__(self, step: int, value: float, checkpoint: Path | None) -> None:
        last = f"the last good checkpoint is {checkpoint}" if checkpoint else "no checkpoint yet"
        super().__init__(f"non-finite training loss ({value}) at step {step}; stopped; {last}")
        self.step, self.value, self.checkpoint = step, value, checkpoint


@dataclass
class TrainResult:
    run_dir: Path
    step: int  # updates done
    loss: float | None  # of the last update (None if this call did none)
    model_dir: Path  # the final model (only written once step == config.steps)
    checkpoint: Path | None  # the last resumable checkpoint
    tokens_per_s: float | None  # mean over this call's updates
    mfu: float | None
    eval: dict[str, Any] | None  # the last evaluation's metrics
    model: nn.Module  # the trained model (unwrapped, in train mode, on the training device)


class _Run:
    def __init__(
        self,
        config: TrainConfig,
        stream: Stream,
        out: Path,
        tokenizer: dict,
        eval_fn: EvalFn | None,
        ctx: ProcessRank,
        device: torch.device,
        progress: bool,
        log: Callable[[str], None],
        command: str | None,
        architecture: Architecture,
    ) -> None:
        self.config, self.stream, self.out = config, stream, out
        self.architecture = architecture
        self.tokenizer, self.eval_fn, self.ctx, self.device = tokenizer, eval_fn, ctx, device
        self.show_progress, self.log, self.command = progress, log, command
        self.metrics = MetricsLog(out / METRICS_FILE)
        self.step = 0
        self.tokens_seen = 0
        self.elapsed_s = 0.0
        self.last_checkpoint: Path | None = None
        self.last_eval: dict[str, Any] | None = None
        self.stop = StopSignals()

        seed = config.seed
        random.seed(seed)
        np.random.seed(seed)  # noqa: NPY002 (for any code that uses the global RNG)
        torch.manual_seed(seed)
        self.model = architecture.build(config).to(device)  # same initial weights on every rank
        torch.manual_seed(seed + 1 + ctx.rank)  # dropout differs by rank
        self.model.train()
        self.n_params = self.model.num_parameters()
        self.peak = peak_flops(device, config.peak_tflops)

        self.optimizer = adamw(self.model, config)
        self.schedule = WarmupCosine(config.warmup_steps, config.steps, config.min_lr_ratio)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self.schedule)

        self.forward = distributed.wrap_model(self.model, ctx, device)
        if config.compile:
            self.forward = torch.compile(self.forward)
        precision = config.precision
        if precision == "auto":
            precision = "bf16" if device.type == "cuda" else "fp32"
        self.precision = precision
        self.memories: list[Memory | None] = [None] * config.grad_accum

    # --- checkpoints -------------------------------------------------------------------------

    def training_record(self) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(),
            "step": self.step,
            "tokens_seen": self.tokens_seen,
            "world_size": self.ctx.world_size,
            "device": self.device.type,
            "precision": self.precision,
            "torch": torch.__version__,
            "architecture": self.architecture.name,
        }

    def counters(self) -> Counters:
        return Counters(self.step, self.tokens_seen, self.elapsed_s)

    def space_short(self, path: Path) -> str | None:
        """Why a checkpoint must not be written (one line), or None: the old ones are removed
        only after the new one is in place, so a write that fails for space must not be tried. A checkpoint is estimated as large as the newest one on disk (before
        the first: weights plus two AdamW moments, in float32)."""
        import shutil

        newest = complete_checkpoints(self.out)
        need = checkpoint_bytes(newest[0]) if newest else 3 * 4 * self.n_params
        need = int(need * 1.1) + (1 << 20)
        root = path.parent if path.parent.exists() else self.out
        free = shutil.disk_usage(root).free
        if free >= need:
            return None
        kept = f"the last checkpoint {newest[0]} is kept" if newest else "no checkpoint yet"
        return (
            f"not enough free space in {root} for the checkpoint of step {self.step}: need "
            f"~{need / 2**20:.1f} MiB, {free / 2**20:.1f} MiB free; free some space and "
            f"continue with --resume ({kept})"
        )

    def save(self) -> Path:
        """A resumable checkpoint of this step (every rank calls it); older ones beyond
        keep_checkpoints are deleted, only once it is in place."""
        path = checkpoint_path(self.out, self.step)
        short = self.space_short(path) if self.ctx.is_main else None
        if distributed.any_rank(short is not None, self.device):  # every rank stops together
            raise RunDirError(short or "rank 0 found no free space for a checkpoint; stopped")
        try:
            self._write_checkpoint(path)
        except OSError as e:  # the disk refused it (full, read-only): the old ones are intact
            kept = (
                f"the last checkpoint {self.last_checkpoint} is kept"
                if self.last_checkpoint
                else "no checkpoint yet"
            )
            raise RunDirError(
                f"cannot write the checkpoint {path}: {e.strerror or e}; free some space and "
                f"continue with --resume ({kept})"
            ) from e
        if self.ctx.is_main:
            prune_checkpoints(self.out, self.config.keep_checkpoints)
        distributed.barrier()
        self.last_checkpoint = path
        return path

    def _write_checkpoint(self, path: Path) -> None:
        save_train_state(
            path,
            model=self.model,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            stream=self.stream,
            memories=self.memories,
            counters=self.counters(),
            ctx=self.ctx,
            tokenizer=self.tokenizer,
            training=self.training_record(),
            architecture=self.architecture,
        )

    def save_model(self) -> Path:
        """The final model: weights, config, tokenizer, metrics.jsonl and COMMAND."""
        path = self.out / MODEL_DIR
        if self.ctx.is_main:
            extra = {"metrics.jsonl": self.metrics.compact_text()}
            if self.command:
                extra["COMMAND"] = self.command.rstrip("\n") + "\n"
            self.architecture.save(
                path,
                self.model,
                tokenizer=self.tokenizer,
                training=self.training_record(),
                extra_files=extra,
            )
        distributed.barrier()
        return path

    def restore_latest(self, checkpoints: list[Path], warn: Callable[[str], None]) -> Path:
        """Restore the newest checkpoint that loads, falling back past damaged ones (saying so
        with `warn`); CheckpointError of the newest if none loads."""

        damaged: list[CheckpointError] = []
        for path in checkpoints:
            try:
                self.restore(path)
            except CheckpointError as e:
                damaged.append(e)
                continue
            for e in damaged:
                warn(f"warning: {e}")
            if damaged:
                warn(f"warning: falling back to the previous complete checkpoint {path}")
            return path
        raise damaged[0]  # none loads: the newest's error, one line

    def restore(self, path: Path) -> None:
        restored = load_train_state(
            path,
            model=self.model,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            stream=self.stream,
            ctx=self.ctx,
            device=self.device,
            grad_accum=self.config.grad_accum,
            architecture=self.architecture,
        )
        self.memories = restored.memories
        c = restored.counters
        self.step, self.tokens_seen, self.elapsed_s = c.step, c.tokens_seen, c.elapsed_s
        self.last_checkpoint = path

    # --- one update --------------------------------------------------------------------------

    def _batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        tokens, doc_ids = self.stream.next_batch()
        want = (self.config.batch_size, self.config.model.tgt_len + 1)
        for name, a in (("tokens", tokens), ("doc_ids", doc_ids)):
            if not isinstance(a, np.ndarray) or a.shape != want or a.dtype.kind not in "iu":
                got = getattr(a, "shape", type(a).__name__), getattr(a, "dtype", "")
                raise ValueError(
                    f"stream gave {name} {got}; expected an integer array of shape {want} "
                    "(batch_size, tgt_len + 1)"
                )
        t = torch.from_numpy(np.ascontiguousarray(tokens, dtype=np.int64)).to(self.device)
        d = torch.from_numpy(np.ascontiguousarray(doc_ids, dtype=np.int64)).to(self.device)
        return t, d

    def train_step(self) -> dict[str, Any]:
        cfg = self.config
        t0 = time.perf_counter()
        lr = self.optimizer.param_groups[0]["lr"]
        tokens, doc_ids = self._batch()  # (B, T+1) each
        inputs, targets = tokens[:, :-1], tokens[:, 1:]  # (B, T)
        in_docs, tgt_docs = doc_ids[:, :-1], doc_ids[:, 1:]  # (B, T)
        valid = (in_docs >= 0) & (tgt_docs >= 0)  # padding is neither context nor target
        # The loss is the mean over every valid target of every rank; DDP averages gradients over
        # ranks, so each rank scales its sum by world_size / (valid targets of all ranks).
        n_tokens = int(distributed.all_reduce_sum(valid.sum().double()))
        scale = self.ctx.world_size / max(n_tokens, 1)
        chunk = cfg.batch_size // cfg.grad_accum
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        amp = torch.autocast(
            self.device.type, dtype=torch.bfloat16, enabled=self.precision == "bf16"
        )
        for c in range(cfg.grad_accum):
            rows = slice(c * chunk, (c + 1) * chunk)
            last = c == cfg.grad_accum - 1
            with distributed.deferred_sync(self.forward, defer=not last):
                with amp:
                    out = self.forward(
                        inputs[rows],
                        doc_ids=in_docs[rows],
                        memory=self.memories[c],
                        targets=targets[rows],
                    )
                total = torch.where(valid[rows], out.nll.float(), 0.0).sum()  # over (b, T)
                (total * scale).backward()
            loss_sum += total.detach().double()
            self.memories[c] = out.memory

        # The step's loss over every rank: NaN anywhere stops every rank at the same step.
        loss = float(distributed.all_reduce_sum(loss_sum)) / max(n_tokens, 1)
        if not math.isfinite(loss):
            self.optimizer.zero_grad(set_to_none=True)
            raise NonFiniteLossError(self.step + 1, loss, self.last_checkpoint)

        max_norm = cfg.grad_clip if cfg.grad_clip > 0 else float("inf")
        grad_norm = float(nn.utils.clip_grad_norm_(self.model.parameters(), max_norm))
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        dt = time.perf_counter() - t0

        self.step += 1
        self.tokens_seen += n_tokens
        self.elapsed_s += dt
        tps = n_tokens / dt if dt > 0 else None
        mfu = 6 * self.n_params * tps / self.peak if (tps and self.peak) else None
        return {
            "kind": "train",
            "step": self.step,
            "loss": loss,
            "lr": lr,
            "grad_norm": grad_norm,
            "tokens": self.tokens_seen,
            "tokens_per_s": tps,
            "mfu": mfu,
            "step_s": dt,
            "elapsed_s": self.elapsed_s,
        }

    def evaluate(self) -> dict[str, Any] | None:
        record = None
        if self.eval_fn is not None and self.ctx.is_main:
            self.model.eval()
            try:
                with isolated_rng(), torch.no_grad():
                    t0 = time.perf_counter()
                    metrics = dict(self.eval_fn(self.model, self.step))
                    metrics["eval_s"] = time.perf_counter() - t0
            finally:
                self.model.train()
            record = {**metrics, "kind": "eval", "step": self.step}
            self.metrics.append(record)
            self.last_eval = metrics
        distributed.barrier()
        return record

    # --- the whole run -----------------------------------------------------------------------

    def run(self) -> TrainResult:
        cfg = self.config
        rates: list[float] = []
        last_loss = None
        progress = TrainProgress(self.show_progress, cfg.steps, self.step, self.log)
        with self.stop, progress:
            while self.step < cfg.steps:
                record = self.train_step()
                last_loss = record["loss"]
                if record["tokens_per_s"]:
                    rates.append(record["tokens_per_s"])
                if self.ctx.is_main:
                    self.metrics.append(record)
                progress.update(record)
                stopping = distributed.any_rank(self.stop.signum is not None, self.device)
                final = self.step == cfg.steps
                if final or (cfg.eval_every and self.step % cfg.eval_every == 0):
                    ev = self.evaluate()
                    if ev is not None:
                        progress.print(eval_line(ev))
                if (
                    final
                    or stopping
                    or (cfg.checkpoint_every and self.step % cfg.checkpoint_every == 0)
                ):
                    self.save()
                if stopping and not final:
                    signum = self.stop.signum or signal.SIGTERM
                    raise TrainingInterrupted(signum, self.step, self.last_checkpoint)
        model_dir = self.save_model() if self.step >= cfg.steps else self.out / MODEL_DIR
        tps = float(np.mean(rates)) if rates else None
        return TrainResult(
            run_dir=self.out,
            step=self.step,
            loss=last_loss,
            model_dir=model_dir,
            checkpoint=self.last_checkpoint,
            tokens_per_s=tps,
            mfu=6 * self.n_params * tps / self.peak if (tps and self.peak) else None,
            eval=self.last_eval,
            model=self.model,
        )


def train(
    config: TrainConfig,
    stream: Stream,
    *,
    out_dir: str | Path,
    tokenizer: dict[str, Any],
    eval_fn: EvalFn | None = None,
    resume: bool = False,
    ctx: ProcessRank | None = None,
    progress: bool | None = None,
    quiet: bool = False,
    command: str | None = None,
    architecture: Architecture = TRANSFORMER_XL,
) -> TrainResult:
    """Train `architecture.build(config)` (txl.architecture; by default TransformerXL(config.model))
    on `stream`, writing the run to `out_dir`.

    `ctx`: this process's place under torchrun (None: a single process); the process group is
    joined here if needed, and `stream` must already be this rank's shard. `progress`: a bar on
    stderr (None: only if stderr is a terminal; never with `quiet`). `command`: the command line,
    saved as the final model's COMMAND. With `resume`, the config must equal the run's saved one
    except for RUNTIME_KEYS. Raises RunDirError / ConfigError (bad input), NonFiniteLossError,
    TrainingInterrupted (SIGINT/SIGTERM, after saving).
    """
    ctx = ctx or ProcessRank()
    out = Path(out_dir)
    device = resolve_device(config.device, ctx.local_rank)
    lock = DirLock(out, TRAINER)
    created = not out.exists()
    if ctx.is_main:  # held for the run's life: a second trainer on this directory is refused
        check_run_dir(out, resume)  # before creating anything
        lock.acquire()
    try:
        return _train(config, stream, out, tokenizer, eval_fn, resume, ctx, device, progress,
                      quiet, command, architecture)  # fmt: skip
    finally:
        lock.release()
        if created and ctx.is_main and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # refused before anything was written: nothing left behind


def _train(config, stream, out, tokenizer, eval_fn, resume, ctx, device, progress, quiet,
           command, architecture) -> TrainResult:  # fmt: skip
    """`train` once rank 0 holds the directory's lock."""
    say = (lambda msg: None) if quiet or not ctx.is_main else _stderr
    warn = _stderr if ctx.is_main else (lambda msg: None)  # what changes the run: even if quiet
    resume_from, start_over = check_run_dir(out, resume, held=True)  # again, under the lock
    if ctx.is_main:
        for p in clean_partial_writes(out):
            warn(f"removed {p}: a checkpoint write that never finished")
    if resume:
        saved = load_run_config(out)
        changed = [
            k for k in differences(saved, config.to_dict()) if k.split(".")[0] not in RUNTIME_KEYS
        ]
        if changed:
            raise ConfigError(
                f"--resume: the config differs from the run's saved one at {', '.join(changed)}; "
                "resume with the run's own config"
            )
    if config.threads:
        torch.set_num_threads(config.threads)
    distributed.init(ctx, device)
    distributed.barrier()  # every rank has checked the directory before rank 0 writes to it

    show = bool(
        ctx.is_main and not quiet and (sys.stderr.isatty() if progress is None else progress)
    )
    run = _Run(config, stream, out, tokenizer, eval_fn, ctx, device, show, say, command,
               architecture)  # fmt: skip
    entry = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": command,
        "world_size": ctx.world_size,
        "device": str(device),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "resumed_from": None,
    }
    if start_over:
        warn(f"nothing was checkpointed in {out} yet: --resume starts the run over from step 0")
        if ctx.is_main:
            run.metrics.truncate_after(0)
            drop_checkpoints_after(out, 0)
        entry["resumed_from"] = 0
    if resume_from is not None:
        for bad in incomplete_checkpoints(out):
            warn(f"warning: the checkpoint {bad} is incomplete and skipped")
        resume_from = run.restore_latest(complete_checkpoints(out), warn)
        entry["resumed_from"] = run.step
        if ctx.is_main:
            run.metrics.truncate_after(run.step)
            drop_checkpoints_after(out, run.step)
        say(f"resuming {out} from step {run.step} ({resume_from.name})")
    if ctx.is_main:
        record_start(out, config.to_dict(), entry, resume)
    distributed.barrier()
    if run.step >= config.steps:
        say(f"{out} is already trained to step {run.step}")
        model_dir = out / MODEL_DIR
        if not model_dir.exists():
            run.save_model()
        return TrainResult(
            out, run.step, None, model_dir, run.last_checkpoint, None, None, None, run.model
        )
    return run.run()


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
