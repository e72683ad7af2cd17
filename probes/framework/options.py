"""The options every probe run shares, declared once.

`RunOptions` is a declared dataclass (`probes.api.params`): the same fields generate the
click options of `probe run` and `probe diagnose`, are validated when `probes.run(...)` is called
from Python, are recorded in run.json (`record()`), and give back the command line that repeats a
run (`argv()`). A probe contributes its own options through its `Params`, declared the same way;
the next run option is one more field here.

Output options (`--json`, `--quiet`) say how a result is shown, not what is computed: they are
declared once in `output_options()` and never recorded.

click only at import: `probe --help` stays instant.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from probes.api.params import argv as params_argv
from probes.api.params import build, click_options, param
from probes.framework import kernels
from probes.limits import MAX_CLAMP_LEN, MAX_MEM, MAX_N, MAX_TGT_LEN, MAX_THREADS, MAX_TOKEN_VIEW
from txl.process_rank import default_threads


def _empty_out() -> None:
    raise ValueError("an empty directory name; give a directory (--out . for this one)")


def _empty_opening() -> None:
    raise ValueError("an empty token; give a token of the model's tokenizer, e.g. '<bos>'")


def _empty_tokenizer() -> None:
    raise ValueError("an empty value; give auto, synth or a tokenizer.json (or its directory)")


@dataclass(frozen=True)
class RunOptions:
    """How a probe runs: which model, the evaluation geometry, pairs, seed, device, output."""

    # a checkpoint directory or shipped model name; in Python also a LossModel object or, for a
    # model-group probe, a list of them (the runner resolves and validates it)
    model: Any = param(
        None,
        metavar="DIR",
        help="Checkpoint directory, a shipped model name (default, default-mem0), or a "
        "transformers model directory (or hf:DIR; needs pip install -e .[hf]). "
        "[default: default]",
    )
    mem: int | None = param(
        None, min=0, max=MAX_MEM, metavar="N", help="Eval mem_len. [default: the model's]"
    )
    tgt_len: int | None = param(
        None,
        min=1,
        max=MAX_TGT_LEN,
        metavar="N",
        help="Eval segment length. [default: the model's]",
    )
    clamp_len: int | None = param(
        None,
        min=1,
        max=MAX_CLAMP_LEN,
        metavar="N",
        help="Largest relative distance used. [default: the model's training mem + tgt]",
    )
    n: int | None = param(
        None,
        min=1,
        max=MAX_N,
        metavar="N",
        alias="-n",  # under torchrun: its parser takes --n for an abbreviation of its own --nnodes
        help="Pairs per bin / grid cell (also -n). [default: the probe's]",
    )
    seed: int = param(
        0, min=0, max=2**63 - 1, metavar="N", show_default=True, help="Seed of the pairs."
    )
    device: Literal["auto", "cpu", "cuda"] = param(
        "auto", show_default=True, help="Where the model runs."
    )
    evaluator: (
        Literal["cached", "recompute", "full", "window", "stream", "sinks", "state"] | None
    ) = param(
        None,
        help="Transformer-XL: cached (streaming with memory) or recompute (a fresh window of "
        "mem+tgt tokens per scored token); a transformers model: full (one forward per row), "
        "window (a fresh window of mem+tgt), stream (segments of tgt_len, KV cache cut to mem) "
        "or sinks (stream + the first --sinks tokens); a recurrent model (mamba, rwkv): state "
        "(the recurrent state over the row, or each document under --reset) or window. "
        "[default: cached; stream for a transformers model; state for a recurrent one]",
    )
    sinks: int | None = param(
        None,
        min=0,
        max=MAX_MEM,
        metavar="K",
        help="First tokens kept in the cache by --evaluator sinks. [default: 4]",
    )
    cache_positions: bool = param(
        False,
        help="--evaluator stream or sinks on a rotary model: positions re-indexed inside the "
        "cache (StreamingLLM's convention: cached keys re-rotated to their slots, a query "
        "placed right after them) instead of the text's own positions. Recorded.",
    )
    cache: Literal["auto", "kv", "hidden"] | None = param(
        None,
        help="What the Transformer-XL cached evaluator keeps of earlier segments: kv (each "
        "layer's keys and values: a segment projects only its own tokens; exact for relative "
        "positions, rel and shaw) or hidden (the layer inputs, projected again by every segment, "
        "as in training); auto takes kv where it is exact. Recorded in run.json. "
        "[default: auto]",
    )
    dtype: Literal["float32", "float64", "bfloat16"] = param(
        "float32",
        show_default=True,
        help="Evaluation precision (recorded). bfloat16 is faster on a recent CPU or a GPU but "
        "moves per-pair deltas by tenths of a nat (SmolLM2-135M: up to 0.33 against float32, "
        "beyond the 0.05-nat default margin): explore with it, report float32.",
    )
    threads: int | None = param(
        None,
        min=1,
        max=MAX_THREADS,
        metavar="N",
        help="CPU threads. [default: the cores this process may use, less those other "
        "processes keep busy]",
    )
    kernels: Literal["portable", "native"] | None = param(
        None,
        help="CPU float kernels: portable (every library on the code path any x86-64 CPU runs: "
        "a rerun on another CPU gives the same bits; about twice the wall time on an AVX-512 "
        "CPU) or native (each library's fastest path here: another CPU differs in the last "
        "bits). Set when "
        "the process starts (probe restarts itself with them); recorded, and a rerun takes the "
        "recorded ones. [default: portable on x86-64]",
    )
    out: str = param(
        "results",
        metavar="DIR",
        show_default=True,
        check=lambda text: None if text.strip() else _empty_out(),
        help="Where run directories go.",
    )
    language: str | None = param(
        None,
        metavar="FILE",
        help="Synth language JSON (or a checkpoint dir) to write the probe text in. "
        "[default: Language.default()]",
    )
    haystack: Any = param(
        None,
        metavar="PATH|default|default-all",
        help="Write the probe's texts in real text: filler from these UTF-8 files or "
        "directories (repeatable), 'default' (the standard library's pydoc topics held out "
        "from training) or 'default-all' (every topic, about six times the text: for a model "
        "not trained here whose context outgrows the held-out part); facts and queries as "
        "English sentences. Needs a model that reads real "
        "text (trained with probe train --text, or with its own tokenizer). [default: the "
        "synthetic language]",
    )
    haystack_documents: Literal["file", "paragraph"] | None = param(
        None,
        help="A haystack document per file or per blank-line-separated block. [default: file]",
    )
    tokenizer: str | None = param(
        None,
        metavar="auto|synth|PATH",
        check=lambda text: None if text.strip() else _empty_tokenizer(),
        help="The vocabulary the model reads: auto (its tokenizer.json decides by content: a "
        "synth language, or a tokenizer of its own), synth (the synth language's ids "
        "directly), or a tokenizer.json / tokenizer directory whose ids it reads (probe texts "
        "are rendered and tokenized, annotations mapped by character offsets). [default: auto]",
    )
    opening_token: str | None = param(
        None,
        metavar="TOKEN",
        check=lambda text: None if text.strip() else _empty_opening(),
        help="The token that opens every document, for a model that reads its own tokenizer "
        "(recorded in run.json's vocabulary). [default: the model's bos token where it names "
        "one, else its eos token, else <eod>]",
    )
    same_length: bool | None = param(
        None, help="Every query sees exactly mem_len keys. [default: off]"
    )
    reset: bool | None = param(
        None,
        flags="--reset/--carry",
        help="Mask other documents (reset) or let the cache carry them (the paper's stream). "
        "[default: reset]",
    )
    quick: bool = param(
        False, flags="--quick", help="Fewer pairs (the probe's quick n): a smoke run."
    )
    token_view: int | None = param(
        None,
        min=1,
        max=MAX_TOKEN_VIEW,
        metavar="N",
        help="Paired probes: also score the N tokens after each pair's edit and the N before "
        "its answer, in both texts, so that `probe show` shades every token there by its "
        "delta (otherwise only the answer's). Costs a forward per token with --evaluator "
        "recompute or window. [default: off]",
    )
    min_effect: float | None = param(
        None,
        min=0.0,
        max=1e6,
        metavar="X",
        help="The minimum effect of interest, in the unit of the probe's delta: a bin is "
        "significant only beyond it, negligible when its 95% CI lies inside ±X. "
        "[default: the probe's margin]",
    )

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def build(cls, values: dict[str, Any]) -> RunOptions:
        """Validated options from keyword values (ParamError, one line, for a bad one). `model`
        is taken as given: the runner resolves it."""
        return build(cls, values)

    @classmethod
    def click_options(cls, only=None, *, multiple=()) -> list:
        return click_options(cls, only=only, multiple=multiple)

    def geometry_overrides(self) -> dict[str, Any]:
        """The evaluation geometry's fields these options set (None: the model's default)."""
        return {
            "mem_len": self.mem,
            "tgt_len": self.tgt_len,
            "clamp_len": self.clamp_len,
            "same_length": self.same_length,
            "reset": self.reset,
        }

    def record(self) -> dict[str, Any]:
        """The options as run.json records them (`model` already resolved to names/paths)."""
        return dataclasses.asdict(self)

    def as_computed(self) -> RunOptions:
        """These options as this process computes them, resolved once so that run.json and its
        command record them: `kernels` the mode in effect (KernelsError when it has not the one
        asked for; probes/framework/kernels.py) and `threads` a count (the default is this
        machine's and its load's, and a product's last bits may depend on it)."""
        threads = self.threads if self.threads is not None else default_threads()
        return dataclasses.replace(self, kernels=kernels.check(self.kernels), threads=threads)

    def argv(self) -> list[str]:
        """The command-line options that repeat these (`probe run PROBE` + this)."""
        return params_argv(self)


def output_options() -> list:
    """`--json` and `--quiet`: how a result is shown (never recorded)."""
    import click

    return [
        click.Option(
            ["--json", "as_json"], is_flag=True, help="Print exactly one JSON document on stdout."
        ),
        click.Option(["--quiet", "quiet"], is_flag=True, help="No progress or logs on stderr."),
    ]


OUTPUT_NAMES = ("as_json", "quiet")
