"""The training loop: any stream of (tokens, doc_ids) batches in, checkpoints and metrics out.

txl knows nothing of where the text comes from. The caller hands `train` a **stream** object

    next_batch() -> (tokens, doc_ids)   numpy int64, both (B, tgt_len + 1); each row continues
                                        the same row of the previous batch (one token overlap:
                                        the last target is the next first input)
    state_dict() -> dict                JSON-serialisable; load_state_dict(dict) restores it

and optionally an **evaluation callback** `(model, step) -> dict` (held-out NLL, recall by
distance...), called on the unwrapped model in eval mode, under no_grad, with every RNG saved
and restored around it, so that evaluating never changes what training computes.

One update (`step`): the batch's B rows are split into `grad_accum` chunks of rows, each with its
own carried memory (the reference's `batch_chunk`); the loss is the mean NLL of every target whose
input and target are not padding (doc id −1); gradients summed, clipped to `grad_clip`, AdamW,
warmup + cosine (`txl.schedule`). The memory is carried across updates (detached by the model),
and documents are reset inside the model by the same doc-id masking as evaluation.

A run directory:

    run.json            resolved config, command and one entry per (re)start
    metrics.jsonl       {"kind": "train", "step", "loss", "lr", ...} per step,
                        {"kind": "eval", "step", ...} per evaluation; step = updates done
    checkpoints/step_NNNNNNNN/   resumable (train_state.pt + rng.json), the newest kept
    model/              the final model (no train state), with metrics.jsonl and COMMAND

Resuming restores weights, optimizer, scheduler, the python/numpy/torch RNG states, the stream's
state and the carried memory with its doc ids, per rank; metrics lines after the checkpoint's step
are dropped, so replayed steps replace rather than duplicate them. On CPU with a fixed thread count
a killed and resumed run computes the same losses as an uninterrupted one, bit for bit.

Under torchrun each process trains on its own stream (the caller shards it by rank) with its own
memory; DistributedDataParallel averages the gradients.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import random
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from txl import distributed
from txl.distributed import DistContext
from txl.io import atomic_write_text, json_safe
from txl.memory import Memory
from txl.metrics_log import METRICS_FILE, MetricsLog
from txl.schedule import WarmupCosine
from txl.train_config import RUNTIME_KEYS, ConfigError, TrainConfig, differences

RUN_FILE = "run.json"
CHECKPOINTS_DIR = "checkpoints"
MODEL_DIR = "model"
_CKPT_RE = re.compile(r"^step_(\d{8,})$")

# Peak dense bf16 throughput (TFLOP/s) of known accelerators, for the MFU estimate.
PEAK_TFLOPS = {"H200": 790.0, "H100": 989.0, "A100": 312.0}


class Stream(Protocol):
    def next_batch(self) -> tuple[np.ndarray, np.ndarray]: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any]) -> None: ...


EvalFn = Callable[[nn.Module, int], Mapping[str, Any]]


class RunDirError(ValueError):
    """The output directory cannot be used as asked (another run, nothing to resume...)."""


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or infinite; nothing was updated or saved at that step."""

    def __init__(self, step: int, value: float, checkpoint: Path | None) -> None:
        last = f"the last good checkpoint is {checkpoint}" if checkpoint else "no checkpoint yet"
        super().__init__(f"non-finite training loss ({value}) at step {step}; stopped; {last}")
        self.step, self.value, self.checkpoint = step, value, checkpoint


class TrainingInterrupted(Exception):
    """SIGINT or SIGTERM: the run saved a checkpoint after the step in flight and stopped."""

    def __init__(self, signum: int, step: int, checkpoint: Path | None) -> None:
        name = signal.Signals(signum).name
        where = f"checkpoint {checkpoint}" if checkpoint else "no checkpoint (no step was done)"
        super().__init__(f"{name} at step {step}: saved {where}; continue with --resume")
        self.signum, self.step, self.checkpoint = signum, step, checkpoint


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


# ---------------------------------------------------------------------------------------------
# run directory


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete resumable checkpoint of a run (None if there is none)."""
    root = Path(run_dir) / CHECKPOINTS_DIR
    if not root.is_dir():
        return None
    found = sorted(
        (int(m.group(1)), p) for p in root.iterdir() if (m := _CKPT_RE.match(p.name)) and p.is_dir()
    )
    for _, path in reversed(found):
        needed = ("config.json", "model.safetensors", "train_state.pt", "rng.json")
        if all((path / n).is_file() for n in needed):
            return path
    return None


def load_run_config(run_dir: str | Path) -> dict[str, Any]:
    """The resolved config a run was started with (RunDirError if the directory holds no run)."""
    path = Path(run_dir) / RUN_FILE
    try:
        return json.loads(path.read_text())["config"]
    except FileNotFoundError:
        raise RunDirError(f"nothing to resume in {run_dir}: it holds no training run") from None
    except (json.JSONDecodeError, KeyError, TypeError):
        raise RunDirError(f"{path} is damaged; start a new run in another directory") from None


def check_run_dir(out_dir: str | Path, resume: bool) -> Path | None:
    """Refuse a directory that cannot hold this run; return the checkpoint to resume from."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise RunDirError(f"--out {out} is a file; give a directory")
    if not resume:
        if out.is_dir() and any(out.iterdir()):
            if (out / RUN_FILE).exists():
                raise RunDirError(
                    f"{out} holds another run; continue it with --resume or choose another --out"
                )
            raise RunDirError(f"{out} is not empty; choose a new or empty --out directory")
        return None
    load_run_config(out)
    ckpt = latest_checkpoint(out)
    if ckpt is None:
        raise RunDirError(f"nothing to resume in {out}: the run has no complete checkpoint yet")
    return ckpt


# ---------------------------------------------------------------------------------------------
# state that is not tensors: RNGs, memory, signals


def _b64(t: torch.Tensor) -> str:
    return base64.b64encode(t.cpu().numpy().tobytes()).decode("ascii")


def _unb64(s: str) -> torch.Tensor:
    return torch.from_numpy(np.frombuffer(base64.b64decode(s), dtype=np.uint8).copy())


def rng_state() -> dict[str, Any]:
    """python, numpy (global) and torch (CPU, CUDA) RNG states as JSON-serialisable data."""
    version, state, gauss = random.getstate()
    np_state = np.random.get_state(legacy=False)  # noqa: NPY002 (the global one, saved)
    out: dict[str, Any] = {
        "python": [version, list(state), gauss],
        "numpy": {
            "bit_generator": np_state["bit_generator"],
            "key": np_state["state"]["key"].tolist(),
            "pos": int(np_state["state"]["pos"]),
            "has_gauss": int(np_state["has_gauss"]),
            "gauss": float(np_state["gauss"]),
        },
        "torch": _b64(torch.get_rng_state()),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        out["cuda"] = [_b64(s) for s in torch.cuda.get_rng_state_all()]
    return out


def set_rng_state(state: Mapping[str, Any]) -> None:
    version, py_state, gauss = state["python"]
    random.setstate((version, tuple(py_state), gauss))
    n = state["numpy"]
    np.random.set_state(  # noqa: NPY002 (the global one, restored)
        {
            "bit_generator": n["bit_generator"],
            "state": {"key": np.array(n["key"], dtype=np.uint32), "pos": n["pos"]},
            "has_gauss": n["has_gauss"],
            "gauss": n["gauss"],
        }
    )
    torch.set_rng_state(_unb64(state["torch"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([_unb64(s) for s in state["cuda"]])


@contextlib.contextmanager
def isolated_rng() -> Iterator[None]:
    """Whatever runs inside leaves every RNG (python, numpy, torch) as it found it."""
    saved = rng_state()
    try:
        yield
    finally:
        set_rng_state(saved)


def _memory_state(mem: Memory | None) -> dict[str, Any] | None:
    if mem is None:
        return None
    return {"states": [s.detach().cpu() for s in mem.states], "doc_ids": mem.doc_ids.cpu()}


def _memory_from_state(state: Mapping[str, Any] | None, device: torch.device) -> Memory | None:
    if state is None:
        return None
    return Memory(tuple(s.to(device) for s in state["states"]), state["doc_ids"].to(device))


class _StopSignals:
    """SIGINT/SIGTERM set a flag (the step in flight finishes, then the run saves and stops);
    a second SIGINT stops at once."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signum = signum

    def __enter__(self) -> _StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


# ---------------------------------------------------------------------------------------------
# devices, model, optimizer


def resolve_device(name: str, ctx: DistContext | None = None) -> torch.device:
    """auto | cpu | cuda → a torch.device (this rank's GPU under torchrun)."""
    local = ctx.local_rank if ctx is not None else 0
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise ConfigError("--device cuda but CUDA is not available here; use --device cpu")
        return torch.device("cuda", local)
    if name == "auto":
        return torch.device("cpu")
    raise ConfigError(f"unknown device {name!r}; expected auto | cpu | cuda")


def peak_flops(config: TrainConfig, device: torch.device) -> float | None:
    """FLOP/s that MFU is measured against (config.peak_tflops, else a known GPU's bf16 peak)."""
    if config.peak_tflops is not None:
        return config.peak_tflops * 1e12
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, tflops in PEAK_TFLOPS.items():
            if key in name:
                return tflops * 1e12
    return None


def _optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.AdamW:
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


# ---------------------------------------------------------------------------------------------
# the loop


class _Run:
    def __init__(
        self,
        config: TrainConfig,
        stream: Stream,
        out: Path,
        tokenizer: dict,
        eval_fn: EvalFn | None,
        ctx: DistContext,
        device: torch.device,
        progress: bool,
        log: Callable[[str], None],
        command: str | None,
    ) -> None:
        self.config, self.stream, self.out = config, stream, out
        self.tokenizer, self.eval_fn, self.ctx, self.device = tokenizer, eval_fn, ctx, device
        self.show_progress, self.log, self.command = progress, log, command
        self.metrics = MetricsLog(out / METRICS_FILE)
        self.step = 0
        self.tokens_seen = 0
        self.elapsed_s = 0.0
        self.last_checkpoint: Path | None = None
        self.last_eval: dict[str, Any] | None = None
        self.stop = _StopSignals()

        from txl.model import TransformerXL  # the loop needs the model, the model not the loop

        seed = config.seed
        random.seed(seed)
        np.random.seed(seed)  # noqa: NPY002 (for any code that uses the global RNG)
        torch.manual_seed(seed)
        self.model = TransformerXL(config.model).to(device)  # same initial weights on every rank
        torch.manual_seed(seed + 1 + ctx.rank)  # dropout differs by rank
        self.model.train()
        self.n_params = sum(p.numel() for p in self.model.parameters())
        self.peak = peak_flops(config, device)

        self.optimizer = _optimizer(self.model, config)
        self.schedule = WarmupCosine(config.warmup_steps, config.steps, config.min_lr_ratio)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self.schedule)

        self.forward: nn.Module = self.model
        if ctx.enabled:
            from torch.nn.parallel import DistributedDataParallel as DDP

            self.forward = DDP(
                self.model, device_ids=[device.index] if device.type == "cuda" else None
            )
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
        }

    def save(self) -> Path:
        from txl.checkpoint import save_checkpoint

        mine = {
            "stream": json.dumps(self.stream.state_dict(), sort_keys=True),
            "memory": [_memory_state(m) for m in self.memories],
            "rng": rng_state(),
        }
        ranks = distributed.gather_objects(mine)
        path = self.out / CHECKPOINTS_DIR / f"step_{self.step:08d}"
        if self.ctx.is_main:
            train_state = {
                "step": self.step,
                "tokens_seen": self.tokens_seen,
                "elapsed_s": self.elapsed_s,
                "world_size": self.ctx.world_size,
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "ranks": [{"stream": r["stream"], "memory": r["memory"]} for r in ranks],
            }
            save_checkpoint(
                path,
                self.model,
                tokenizer=self.tokenizer,
                training=self.training_record(),
                train_state=train_state,
                rng={"ranks": [r["rng"] for r in ranks]},
            )
            self._prune_checkpoints()
        distributed.barrier()
        self.last_checkpoint = path
        return path

    def _prune_checkpoints(self) -> None:
        root = self.out / CHECKPOINTS_DIR
        found = sorted(
            (int(m.group(1)), p) for p in root.iterdir() if (m := _CKPT_RE.match(p.name))
        )
        for _, p in found[: -self.config.keep_checkpoints]:
            shutil.rmtree(p, ignore_errors=True)

    def save_model(self) -> Path:
        """The final model: weights, config, tokenizer, metrics.jsonl and COMMAND."""
        from txl.checkpoint import save_checkpoint

        path = self.out / MODEL_DIR
        if self.ctx.is_main:
            extra = {"metrics.jsonl": self.metrics.text()}
            if self.command:
                extra["COMMAND"] = self.command.rstrip("\n") + "\n"
            save_checkpoint(
                path,
                self.model,
                tokenizer=self.tokenizer,
                training=self.training_record(),
                extra_files=extra,
            )
        distributed.barrier()
        return path

    def restore(self, path: Path) -> None:
        from txl.checkpoint import load_checkpoint

        ckpt = load_checkpoint(path, device="cpu")
        state = ckpt.train_state
        assert state is not None and ckpt.rng is not None
        if state["world_size"] != self.ctx.world_size:
            raise RunDirError(
                f"{path} was saved by {state['world_size']} processes, this run has "
                f"{self.ctx.world_size}; resume with the same number of processes"
            )
        with torch.no_grad():
            for p_to, p_from in zip(
                self.model.state_dict().values(), ckpt.model.state_dict().values(), strict=True
            ):
                p_to.copy_(p_from)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        mine = state["ranks"][self.ctx.rank]
        self.stream.load_state_dict(json.loads(mine["stream"]))
        self.memories = [_memory_from_state(m, self.device) for m in mine["memory"]]
        if len(self.memories) != self.config.grad_accum:
            raise RunDirError(f"{path} was saved with another grad_accum; keep the run's config")
        set_rng_state(ckpt.rng["ranks"][self.ctx.rank])
        self.step = int(state["step"])
        self.tokens_seen = int(state["tokens_seen"])
        self.elapsed_s = float(state["elapsed_s"])
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
            sync = contextlib.nullcontext()
            if not last and isinstance(self.forward, nn.parallel.DistributedDataParallel):
                sync = self.forward.no_sync()
            with sync:
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
        progress = _Progress(self.show_progress, cfg.steps, self.step, self.log)
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
                        progress.print(_eval_line(ev))
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


def _eval_line(record: Mapping[str, Any]) -> str:
    parts = []
    for k, v in record.items():
        if k in ("kind", "step") or isinstance(v, Mapping | list):
            continue
        parts.append(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}")
    return f"eval @ step {record['step']}: " + ", ".join(parts)


class _Progress:
    """A rich progress bar on stderr: step, loss, tokens/s, ETA (a no-op when disabled)."""

    def __init__(self, enabled: bool, total: int, done: int, log: Callable[[str], None]) -> None:
        self.enabled, self.log = enabled, log
        self.tps: float | None = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.bar = Progress(
            TextColumn("step"),
            MofNCompleteColumn(),
            BarColumn(),
            TextColumn("loss {task.fields[loss]}"),
            TextColumn("{task.fields[tps]} tok/s"),
            TextColumn("mfu {task.fields[mfu]}"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self.task = self.bar.add_task(
            "train", total=total, completed=done, loss="-", tps="-", mfu="-"
        )

    def __enter__(self) -> _Progress:
        if self.enabled:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            self.bar.__exit__(*exc)

    def update(self, record: Mapping[str, Any]) -> None:
        if not self.enabled:
            return
        tps = record["tokens_per_s"]
        if tps:
            self.tps = tps if self.tps is None else 0.9 * self.tps + 0.1 * tps
        mfu = record["mfu"]
        self.bar.update(
            self.task,
            completed=record["step"],
            loss=f"{record['loss']:.4f}",
            tps=f"{self.tps:,.0f}" if self.tps else "-",
            mfu=f"{mfu:.1%}" if mfu is not None else "-",
        )

    def print(self, text: str) -> None:
        if self.enabled:
            self.bar.console.print(text, highlight=False)
        else:
            self.log(text)


def train(
    config: TrainConfig,
    stream: Stream,
    *,
    out_dir: str | Path,
    tokenizer: dict[str, Any],
    eval_fn: EvalFn | None = None,
    resume: bool = False,
    ctx: DistContext | None = None,
    progress: bool | None = None,
    quiet: bool = False,
    command: str | None = None,
) -> TrainResult:
    """Train `TransformerXL(config.model)` on `stream`, writing the run to `out_dir`.

    `ctx`: this process's place under torchrun (None: a single process); the process group is
    joined here if needed, and `stream` must already be this rank's shard. `progress`: a bar on
    stderr (None: only if stderr is a terminal; never with `quiet`). `command`: the command line,
    saved as the final model's COMMAND. With `resume`, the config must equal the run's saved one
    except for RUNTIME_KEYS. Raises RunDirError / ConfigError (bad input), NonFiniteLossError,
    TrainingInterrupted (SIGINT/SIGTERM, after saving).
    """
    ctx = ctx or DistContext()
    out = Path(out_dir)
    device = resolve_device(config.device, ctx)
    resume_from = check_run_dir(out, resume)
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

    say = (lambda msg: None) if quiet or not ctx.is_main else _stderr
    show = bool(
        ctx.is_main and not quiet and (sys.stderr.isatty() if progress is None else progress)
    )
    run = _Run(config, stream, out, tokenizer, eval_fn, ctx, device, show, say, command)
    entry = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": command,
        "world_size": ctx.world_size,
        "device": str(device),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "resumed_from": None,
    }
    if resume_from is not None:
        run.restore(resume_from)
        entry["resumed_from"] = run.step
        if ctx.is_main:
            run.metrics.truncate_after(run.step)
            _drop_checkpoints_after(out, run.step)
        say(f"resuming {out} from step {run.step} ({resume_from.name})")
    if ctx.is_main:
        out.mkdir(parents=True, exist_ok=True)
        info = (
            json.loads((out / RUN_FILE).read_text())
            if resume
            else {
                "schema_version": 1,
                "kind": "train",
                "config": config.to_dict(),
                "starts": [],
            }
        )
        info["starts"].append(entry)
        text = json.dumps(json_safe(info), indent=2, sort_keys=True, allow_nan=False)
        atomic_write_text(out / RUN_FILE, text + "\n")
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


def _drop_checkpoints_after(out: Path, step: int) -> None:
    root = out / CHECKPOINTS_DIR
    for p in root.iterdir():
        m = _CKPT_RE.match(p.name)
        if m and int(m.group(1)) > step:
            shutil.rmtree(p, ignore_errors=True)


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
