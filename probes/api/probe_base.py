"""What every probe is: a class with `Params`, `plan` and `execute`, registered by name.

    @probe("fact-swap", version=1)
    class FactSwap(Probe):
        '''One line for `probe list`.'''

        @dataclass(frozen=True)
        class Params:
            distance: str = param("auto", help="...", check=check_ranges)

        default_n = 40      # pairs per group: justify it from the effect it must detect
        quick_n = 8

        def plan(self, ctx): ...      # build every pair (cheap); raise ProbeInputError on bad input
        def execute(self, ctx): ...   # score, append samples, return an Outcome

The runner calls `plan` before it creates the run directory (so bad input leaves nothing behind) and
`execute` after. A probe reaches the model only through `ctx.model` (a `LossModel`). Everything a
probe reports goes into `Outcome`: `metrics` (named numbers; every name documented in
`metric_docs`), `bins` (groups of pairs: distance bins or grid cells), `checks` (the run's own
sanity checks: a failed one makes `probe run` exit 1), a one-line `verdict`, per-token arrays
and plots. Probes whose output is not a delta-by-distance table (speed, recl, boundary positions)
fill `metrics`/`bins` with their own names and document them in `metric_docs`.

What the report layer shows is declared here too (`probes.api.declarations`): `columns`,
the bin table's columns; `diagnose_rows(summary)`, the probe's rows in `probe diagnose` (with
`@probe(..., diagnose=N)`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import numpy as np

from probes.api.declarations import effect_row
from synth import rng as rnd


class ProbeInputError(ValueError):
    """Bad input found while planning a run (exit 2); the message is one line."""


class ProbeNotApplicable(ProbeInputError):
    """The evaluation geometry cannot host the probe at all (RECL needs two contexts, and mem 0
    leaves one). Bad input for `probe run`; `probe diagnose` leaves the probe out and gives
    `reason` (what about the geometry, without the fix that only `probe run` options offer)."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason
        self.model: Any = None  # the loaded model it does not apply to (set by the runner)


class LengthLimit(NamedTuple):
    """A bound on the length of a text a run can score (`RunContext.length_limits`)."""

    tokens: int
    what: str  # for a message: "the model's 4,096 positions", "the haystack's 9,000 tokens"
    of_model: bool  # the model's row (its positions); else the texts the run cuts from


@dataclass
class RunContext:
    model: Any  # a probes.api.model.LossModel
    geometry: Any  # txl.geometry.Geometry
    horizon: Any  # probes.api.horizon.Horizon
    texts: Any  # probes.texts.base.Texts: what the probe writes its texts with (None: none)
    n: int  # pairs per group
    seed: int
    quick: bool = False
    progress: Any = None  # probes.framework.progress.Progress
    run_dir: Any = None  # probes.framework.results.RunDir, set before execute()
    # The model group (LossModels, `model` first) of a probe with `model_group = True`; else [].
    group: list = field(default_factory=list)
    margin: float = 0.05  # the run's minimum effect (the probe's, or --min-effect)
    margin_source: str = "probe"  # "probe" | "--min-effect"
    unmatched: int = 0  # pairs that could not be kept aligned in the model's tokens (not scored)
    bins_cut: str = ""  # what auto distance bins were cut to fit the texts, and why (else "")
    ranks: Any = None  # txl.process_rank.ProcessRank under torchrun; None: one process
    # A resumed run (`probe diagnose --resume`, `probe rerun --resume`): the samples an
    # interrupted run of this very measurement wrote (a probe with `resumes_from_samples` skips
    # the work they hold); [] otherwise.
    kept_samples: list = field(default_factory=list)
    # A resumed run: the scored chunks that run left (probes.framework.scored_chunks.Kept),
    # which `score_batches` takes back instead of scoring them again; None otherwise.
    kept_chunks: Any = None
    scoring_calls: int = 0  # `score_batches` calls so far: each names its chunks' files by it
    # `--token-view N`: paired probes also score N tokens after each edit and N before each
    # answer (probes.engine.paired), for `probe show`; 0: the answer tokens only.
    token_view: int = 0
    # What each `auto` parameter resolved to, in the parameter's own syntax (run.json `auto`:
    # a command that repeats the measurement whatever a later version makes of 'auto');
    # `pinned_auto`, the values a rerun repeats (its original's `auto`); `auto_today`, where
    # this version would have resolved a pinned one otherwise.
    auto: dict[str, str] = field(default_factory=dict)
    pinned_auto: dict[str, str] = field(default_factory=dict)
    auto_today: dict[str, str] = field(default_factory=dict)

    def resolve_auto(
        self,
        name: str,
        text: str,
        parse: Callable[[str], Any],
        auto: Callable[[], Any],
        as_text: Callable[[Any], str],
    ) -> Any:
        """The value of the parameter `name` given as `text`: `parse(text)`, or for 'auto',
        `auto()` — unless this run repeats one whose 'auto' resolved otherwise (`pinned_auto`):
        then that, parsed and checked as if given. The value 'auto' stood for is kept in `auto`
        as `as_text` writes it (text `parse` reads back)."""
        if text.strip() != "auto":
            return parse(text)
        recorded = self.pinned_auto.get(name)
        try:
            value = auto()
            today = as_text(value)
        except ProbeInputError as e:
            if recorded is None:
                raise
            today = f"nothing (refused: {e})"
        pinned = today if recorded is None else recorded
        if pinned != today:
            self.auto_today[name] = today
            try:
                value = parse(pinned)
            except ValueError as e:
                raise ProbeInputError(
                    f"the recorded auto value of {name} {pinned!r}: {e}"
                ) from None
        self.auto[name] = pinned
        return value

    @property
    def vocab(self):
        """The ids the model reads: pad, separator (`<eod>` or the tokenizer's) and size."""
        return self.texts.vocab

    def require_matched(self, probe: str, planned: int) -> None:
        """Refuse (bad input, one line) a run on real text or through the tokenizer bridge in
        which no pair could be kept aligned in the model's tokens."""
        if planned == 0 and self.unmatched:
            raise ProbeInputError(
                f"probe {probe}: none of the {self.unmatched} pairs drawn keeps its base and "
                "variant aligned in the model's tokens (the tokenizer merges across words, or "
                "no draw fits the distance bins); try other --distance bins or --tokenizer synth"
            )

    def length_limits(self) -> list[LengthLimit]:
        """What bounds the length of a text this run can score: the model's row
        (`max_row_length`, an optional LossModel capability: learned absolute positions end a
        row at the position table) and, on real text, the haystack the text is cut from. Each
        probe keeps its own room below them."""
        out = []
        fn = getattr(self.model, "max_row_length", None)
        longest = fn(self.geometry) if fn is not None else None
        if longest is not None:
            out.append(LengthLimit(longest, f"the model's {longest:,} positions", of_model=True))
        if self.texts is not None:
            out.extend(
                LengthLimit(n, what, of_model=False) for n, what in self.texts.length_limits()
            )
        return out

    @property
    def pad_id(self) -> int:
        return int(self.vocab.pad_id)

    @property
    def eod_id(self) -> int:
        return int(self.vocab.eod_id)

    def rng(self, *path: int | str):
        """A generator for this run's seed in the "probe" namespace, one stream per `path`
        (so each group's pairs do not depend on how many other groups there are)."""
        ss = rnd.seed_sequence(self.seed, "probe")
        keys = [abs(rnd.key(p)) for p in path]
        return rnd.make_rng(np.random.SeedSequence([*ss.entropy, *keys]))

    def log(self, message: str) -> None:
        if self.progress is not None:
            self.progress.log(message)

    def sample(self, record: dict) -> None:
        """Append one record to the run's samples.jsonl (nothing without a run directory)."""
        if self.run_dir is not None:
            self.run_dir.append_sample(record)

    def keep_chunk(self, name: str, items: list[int], results: list) -> None:
        """Keep one scoring call's (record, extra) results in the run directory until the run
        finishes, for a resumed run (nothing without a run directory)."""
        if self.run_dir is not None:
            self.run_dir.write_chunk(name, items, results)

    def kept_chunk(self, name: str, items: list[int]) -> list | None:
        """The results an interrupted run of this measurement kept for exactly these items in
        the call `name`; None when it kept none (score them)."""
        return None if self.kept_chunks is None else self.kept_chunks.results(name, items)

    @contextmanager
    def steps(
        self, total: int, description: str, work: Sequence[float] | None = None
    ) -> Iterator[Callable[[int], None]]:
        """Show progress over `total` steps while the block runs (`work[i]`: what step i costs,
        for the time left); yields `advance(k, kept=False)` (`kept`: the k steps were taken back
        from an interrupted run, which the time left must not count as computed)."""
        if self.progress is not None:
            self.progress.start(total, description, work)
        try:
            yield self._advance
        finally:
            if self.progress is not None:
                self.progress.stop()

    def _advance(self, k: int = 1, kept: bool = False) -> None:
        if self.progress is not None:
            self.progress.advance(k, kept)


@dataclass
class Outcome:
    metrics: dict[str, Any]
    bins: list[dict[str, Any]]
    metric_docs: dict[str, str]
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    verdict: str = ""  # usually written once the rest is known: outcome.verdict = …
    higher_is_better: dict[str, bool] = field(default_factory=dict)
    n_pairs: int = 0
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    # texts.npz: the token ids every pair was scored on (probes.engine.paired.text_arrays)
    texts: dict[str, np.ndarray] = field(default_factory=dict)
    plots: list[Callable[[Path], str]] = field(default_factory=list)  # run dir → file name

    @property
    def passed(self) -> bool:
        return all(c.get("passed", True) for c in self.checks.values())


class Probe:
    """Base class of every probe (see module docstring)."""

    name: ClassVar[str]
    version: ClassVar[int]
    Params: ClassVar[type]
    default_n: ClassVar[int] = 32
    quick_n: ClassVar[int] = 8
    needs_language: ClassVar[bool] = True
    # True: the probe compares a group of models (`--model` repeated; see runner.group_paths).
    model_group: ClassVar[bool] = False
    # True: the probe runs every cache policy itself (reset and carry on the same tokens), so a
    # run's --reset/--carry would mean nothing; the runner refuses it (exit 2).
    runs_every_policy: ClassVar[bool] = False
    # The text modes the probe writes (`ctx.texts`), each with the options of a smoke run sized
    # for a tiny test model: "synth" (synth ids), "haystack" (real text, --haystack), "bridged"
    # (synth text through a model's own tokenizer). A mode it lacks is refused; the tests run
    # every probe in every mode it declares.
    smoke: ClassVar[dict[str, dict[str, Any]]] = {"synth": {}}
    # The names of the self-checks its Outcome carries (a failed one makes `probe run` exit 1).
    self_checks: ClassVar[tuple[str, ...]] = ()
    # True: the probe scores only through probes.api.rows.score_batches, so its items can be
    # divided among several processes (txl.process_rank) — others are refused under torchrun —
    # and a resumed run takes back the chunks an interrupted run of it scored.
    shards: ClassVar[bool] = False
    # True: the probe can pick up an interrupted run of itself from that run's samples
    # (`ctx.kept_samples`: each sample holds one step's results whole), so a resumed run
    # does not redo them. A probe that neither shards nor does this starts over.
    resumes_from_samples: ClassVar[bool] = False
    # Set by @probe(..., diagnose=N): its place in `probe diagnose` (None: not part of it).
    diagnose: ClassVar[int | None] = None
    # The bin table's columns (probes.api.declarations.Column), in order.
    columns: ClassVar[tuple] = ()
    # The minimum effect of interest of the probe's primary delta, its unit and why that size:
    # a bin is significant only beyond it, negligible when its interval lies inside ±margin
    # (probes.stats); `--min-effect` overrides it for a run.
    margin: ClassVar[float] = 0.05
    margin_unit: ClassVar[str] = "nats/answer token"
    margin_why: ClassVar[str] = (
        "a 5 % change of the answer's probability (e^0.05 ≈ 1.05); reading a fact moves it by nats"
    )

    @classmethod
    def effect(cls, effect: str, metric: str, measure: str, stat=None, **fields) -> dict:
        """A diagnose row of this probe, in its unit, judged against its margin
        (`declarations.effect_row`)."""
        return effect_row(
            effect, cls.name, metric, cls.margin_unit, measure, stat, margin=cls.margin, **fields
        )

    @classmethod
    def resumes(cls) -> bool:
        """Whether an interrupted run of this probe leaves work a resumed run takes back
        (its scored chunks, or its samples)."""
        return cls.shards or cls.resumes_from_samples

    @classmethod
    def diagnose_rows(cls, summary: dict[str, Any]) -> list[dict[str, Any]]:
        """This probe's rows in `probe diagnose`, from its summary (`declarations.effect_row`).
        `summary["model"]` is the model diagnosed: for a `model_group` probe under `probe
        diagnose --models`, the one group run's summary with `model` set to each member in turn
        (`probes.framework.summary.member_view`), so the rows are that member's."""
        return []

    def __init__(self, params: Any):
        self.params = params

    def plan(self, ctx: RunContext) -> None:
        raise NotImplementedError

    def execute(self, ctx: RunContext) -> Outcome:
        raise NotImplementedError
