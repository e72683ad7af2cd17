"""`probe train`'s work: the config from its layers, the stream from its `data` table (the synth
stream, or real text under `data.text`: `probes.training.text_data`), the evaluation from its
`eval` table (recall by distance; on text `probes.training.text_eval`), and txl's training loop
run on them.

Three stages, so that a caller can tell bad input from a run that failed:

    resolve_job   plain data, no torch: the layered config, the run directory, the language (on
                  text: the corpus read, its held-out slice set apart, the BPE trained)
    prepare       this process's place under torchrun, the device and the run directory checked,
                  this rank's stream and (on rank 0) the evaluation callback
    run           txl's loop; the process group is left afterwards, however the loop ends

The first two raise ConfigError, RunDirError or ValueError (one line) for bad input. Several
processes: `torchrun --nproc_per_node N -m probes.cli train ...` (each rank its own shard).
Imports nothing heavy at module level: the `probe` CLI imports it at start-up.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probes.training.budget import check_fits
from probes.training.hf_arch import HFArchitecture, check_arch
from probes.training.presets import DEFAULT_OUT, DEFAULT_PRESET, resolve_dict
from probes.training.recall_eval import make_recall_eval
from probes.training.synth_data import language_from, synth_stream
from probes.training.text_data import TextData, load_text, text_table
from probes.training.text_eval import make_text_eval
from txl import train as loop  # looked up at call time (tests replace `train`)
from txl.device import resolve_device
from txl.distributed import shutdown
from txl.process_rank import ProcessRank
from txl.run_dir import check_run_dir, load_run_config
from txl.train_config import ConfigError, TrainConfig, parse_override, set_key

if TYPE_CHECKING:
    from synth.language import Language
    from synth.stream import TrainStream
    from txl.process_rank import ProcessRank
    from txl.train import EvalFn, TrainResult
    from txl.train_config import TrainConfig


@dataclass(frozen=True)
class TrainJob:
    """What a `probe train` command asks for, checked."""

    config: TrainConfig
    run_dir: Path
    language: Language  # the synth language, or on text the TextData (its tokenizer's JSON)
    resume: bool

    @property
    def text(self):
        """The TextData of a run on text, else None."""

        return self.language if isinstance(self.language, TextData) else None


@dataclass(frozen=True)
class PreparedRun:
    job: TrainJob
    ctx: ProcessRank  # this process's place under torchrun
    stream: TrainStream  # this rank's shard
    eval_fn: EvalFn | None  # rank 0 only


def resolve_job(
    preset: str | None,
    config_file: Path | None,
    out: Path | None,
    resume: bool,
    explicit: Iterable[tuple[str, Any]],
    overrides: Iterable[str],
) -> TrainJob:
    """The config, layered: preset < config file < explicit options < `--set` overrides; on a
    resume with neither a preset nor a file, the run's own saved config < options < overrides.
    `model.vocab_size` is the language's (a different one is refused)."""

    if resume and preset is None and config_file is None:
        run_dir = out or DEFAULT_OUT / DEFAULT_PRESET
        data = load_run_config(run_dir)
        for key, value in [*explicit, *(parse_override(o) for o in overrides)]:
            data = set_key(data, key, value)
    else:
        data = resolve_dict(preset, config_file, [*explicit, *overrides])
        run_dir = out or DEFAULT_OUT / data["preset"]
    text = text_table(data.get("data", {}))
    if text is not None:
        lang = load_text(text, Path(run_dir), resume)  # records the corpus sha256 in `text`
        data["data"]["text"] = text
    else:
        lang = language_from(data.get("data", {}))
    model = data.setdefault("model", {})
    if model.setdefault("vocab_size", lang.vocab.size) != lang.vocab.size:
        whose = "the tokenizer trained on the text" if text is not None else "the language"
        raise ConfigError(
            f"bad value for model.vocab_size: {model['vocab_size']}; {whose} has "
            f"{lang.vocab.size} tokens (leave it unset)"
        )
    return TrainJob(TrainConfig.from_dict(data), Path(run_dir), lang, resume)


def prepare(job: TrainJob) -> PreparedRun:
    """Everything the loop needs, built only once the config is known to be good (imports torch).
    The device and the run directory are checked here too, before any process writes."""

    config, lang = job.config, job.language
    ctx = ProcessRank.from_env()
    device = resolve_device(config.device, ctx.local_rank)
    if config.arch:  # another architecture: its table checked before anything is built
        check_arch(config.arch, config.model)
    check_fits(config, str(device))  # before any allocation: the run must fit in memory
    check_run_dir(job.run_dir, job.resume)
    if job.text is not None:
        stream = job.text.stream(
            config.model.tgt_len, config.seed, config.batch_size, ctx.rank, ctx.world_size
        )
        eval_fn = make_text_eval(job.text, config.model, config.eval) if ctx.is_main else None
        return PreparedRun(job, ctx, stream, eval_fn)
    stream = synth_stream(lang, config, config.seed, config.batch_size, ctx.rank, ctx.world_size)
    eval_fn = None
    if ctx.is_main:
        eval_fn = make_recall_eval(
            lang,
            config.model,
            config.eval,
            heldout_stream=lambda rows, seed: synth_stream(
                lang, config, seed, rows, 0, 1, curriculum=False
            ),
        )
    return PreparedRun(job, ctx, stream, eval_fn)


def run(prepared: PreparedRun, *, quiet: bool, command: str) -> TrainResult:
    """Train (or resume) the job's run. Raises what `txl.train.train` raises: ConfigError /
    RunDirError (bad input), NonFiniteLossError, TrainingInterrupted."""

    job = prepared.job
    architecture = None
    if job.config.arch:
        architecture = HFArchitecture(job.config.arch)
    try:
        return loop.train(
            job.config,
            prepared.stream,
            out_dir=job.run_dir,
            tokenizer=job.language.to_json(),
            eval_fn=prepared.eval_fn,
            resume=job.resume,
            ctx=prepared.ctx,
            quiet=quiet,
            command=command,
            **({"architecture": architecture} if architecture else {}),
        )
    finally:
        shutdown()
