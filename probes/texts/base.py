"""What every run's texts offer a probe (`ctx.texts`), whichever they are: synth ids
(`SynthTexts`), real text cut from a haystack (`HaystackTexts`), or synth text through a model's
own tokenizer (`BridgedTexts`). A probe asks for its pairs and never tests which it has.

A fact job is drawn in one call, `fact_job`: a base with one fact `distance` tokens before its
answer, the named edit (`synth.edits`) applied to it — on real text the edit's real-text
realisation (`probes.texts.real_edits`) — and the Job scoring the answer. None: the pair could
not be kept aligned in the model's tokens (the run counts it in `ctx.unmatched`). `fact_jobs`
draws several edits (`Variant`s) of one base, kept or dropped together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from probes.engine.paired import Job


@dataclass(frozen=True)
class Variant:
    """One edit of a base: its group, the edit's name and parameters, what its samples record
    (`info`), its answer's contrast value (`alt(pair)`) and the base it shares (`base_id`)."""

    group: int
    edit: str
    params: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    alt: Callable | None = None
    base_id: int | None = None
    # How it is scored and drawn: `sign` of its delta; `rng`, the stream its edit (and the
    # evening of it) draws from (None: the base's); `value_len`, record the answer's length in
    # `info`; `check_tail`, its base's last n tokens scored as a beyond-reach check (None: no
    # check); `refusal`, what a refused edit is called in the one-line error (None: the edit's
    # ValueError as it is); `realised(job)`, what `info` records of lengths as the model's
    # tokens realise them, where those differ from the drawn ones (through the bridge).
    sign: int = 1
    rng: Any = None
    value_len: bool = True
    check_tail: int | None = None
    refusal: str | None = None
    realised: Callable | None = None


class Texts:
    mode: ClassVar[str]  # "synth" | "haystack" | "bridged"
    # Whether a run reports `unmatched_pairs` (pairs not kept aligned in the model's tokens):
    # never on synth ids, where every pair is aligned by construction.
    reports_unmatched: ClassVar[bool] = True
    # What the texts are written with: the synth Language (None on real text), the real-text
    # synth.text.world.TextWorld (else None), the bridge to a model's own tokenizer (else None).
    lang: Any = None
    world: Any = None
    bridge: Any = None

    @property
    def vocab(self):
        """The ids the model reads: pad, separator (`<eod>` or the tokenizer's) and size."""
        raise NotImplementedError

    @property
    def min_distance(self) -> int:
        """The shortest fact → answer distance the texts allow."""
        raise NotImplementedError

    # why distances start at `min_distance`, for a refusal (" on real text (…)" or "")
    min_distance_why: ClassVar[str] = ""

    def length_limits(self) -> list[tuple[int, str]]:
        """What the texts themselves bound a scored text's length to, as (tokens, what)."""
        return []

    def record(self) -> dict[str, Any] | None:
        """run.json's "bridge" entry (None: the run has none)."""
        return None

    def fact_job(
        self, probe: str, edit: str, rng, group: int, distance: int, lead: int,
        bin: tuple[int, int], *, alt=None, **params,
    ) -> Job | None:  # fmt: skip
        """The job of one fact pair of probe `probe` (module docstring): edit `edit` with
        `params`, `alt(pair)` the answer's contrast value (None: none), `lead` filler before
        the fact, its distance drawn in `bin` at `distance`."""
        v = Variant(group, edit, params, {"lead": lead}, alt)
        jobs = self.fact_jobs(probe, [v], rng, distance, lead, bin)
        return None if jobs is None else jobs[0]

    def fact_jobs(
        self, probe: str, variants: list[Variant], rng, distance: int, lead: int,
        bin: tuple[int, int], *, supported: bool = True, tail: int = 2,
        minimum: int | None = None,
    ) -> list[Job] | None:  # fmt: skip
        """The jobs of `variants`, every one an edit of one base (`fact_job`); None when any of
        them does not stay aligned in the model's tokens. `supported=False`: the base holds the
        query but not its fact, and each edit states it at the base's distance (the edit gets
        `distance`); `tail` filler tokens end the base; `minimum`, the shortest distance a base
        is drawn at while its distance is fitted (default `min_distance`)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ lengths and restatements

    def synth_length(self, tokens: int, minimum: int = 1) -> int:
        """About how many tokens of filler, as the texts are drawn, make `tokens` of the model's
        tokens: `tokens` itself where the texts are drawn in the model's tokens."""
        return tokens

    def restated_fact_job(
        self, probe: str, rng, group: int, distance: int, lead: int, bin: tuple[int, int], *,
        restated_at: int,
    ) -> Job | None:  # fmt: skip
        """The job of a fact stated twice: with value A, its last token `distance` tokens before
        the answer, then restated with a new value B (the `update` edit) `restated_at` tokens
        before it; the query answers B. Base: the restatement alone (the first statement
        overwritten by filler, `delete`); variant: both; the answer's contrast value is A, and
        distances run from the outdated statement. `info` records the `lead` and the `gap`
        between the two statements (through the bridge the realised `gap` and `answer_distance`
        in model tokens). None: not kept aligned in the model's tokens."""
        raise NotImplementedError
