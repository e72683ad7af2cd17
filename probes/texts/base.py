"""What every run's texts offer a probe (`ctx.texts`), whichever they are: synth ids
(`SynthTexts`), real text cut from a haystack (`HaystackTexts`), or synth text through a model's
own tokenizer (`BridgedTexts`). A probe asks for its pairs and never tests which it has.

Besides pairs, the texts write what the other probes score, each in the model's tokens: a text
read straight through (`local_text`) or of independent sentences (`sentence_text`), the far
context of one ablated (`word_starts`, `ablated_tokens`), a sweep text (`sweep_text`), a topic
shift's jobs (`topic_shift_jobs`) and cross-doc's pair (`cross_doc_pair`), with the lengths that
size them (`query_length`, `fact_length`, `short_distance`, `synth_length`, `model_length`).

A fact job is drawn in one call, `fact_job`: a base with one fact `distance` tokens before its
answer, the named edit (`synth.edits`) applied to it — on real text the edit's real-text
realisation (`Edit.on_real_text`) — and the Job scoring the answer. None: the pair could
not be kept aligned in the model's tokens (the run counts it in `ctx.unmatched`). `fact_jobs`
draws several edits (`Variant`s) of one base, kept or dropped together.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from probes.api.paired import Job
from probes.engine.sweep import SweepText
from probes.texts.cross_doc_texts import TextShape, cross_doc_arrays
from synth.edits.prior_doc_conflict import CrossDocument
from synth.example import Example, Pair


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
    # Whether the texts realise an edit's length-changing mode (`same_length=False`, which moves
    # the tokens after the edit); real text keeps every token outside an edit in place.
    changes_lengths: ClassVar[bool] = True
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

    def model_length(self, tokens: int) -> int:
        """About how many of the model's tokens `tokens` of filler, as the texts are drawn, make
        (the inverse of `synth_length`)."""
        return tokens

    @property
    def short_distance(self) -> int:
        """A short fact → answer distance, as the texts are drawn: the default of one a probe
        states outside its bins (16; on real text the shortest its query allows)."""
        return 16

    @property
    def fact_length(self) -> int:
        """The tokens of one fact statement with a one-token value, as the texts are drawn."""
        raise NotImplementedError

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

    # ------------------------------------------------------------------ single texts

    # what `sentence_text` holds, in a title
    sentences: ClassVar[str] = "local-only text"

    def local_text(self, rng, length: int) -> Example:
        """One document of exactly `length` of the model's tokens, read straight through:
        synth's local-only sentences (nothing depends on anything beyond its own sentence); on
        real text a contiguous run of the haystack, its documents in order."""
        raise NotImplementedError

    def sentence_text(self, rng, length: int) -> Example:
        """One document of exactly `length` of the model's tokens, of independent sentences:
        synth's local-only text; on real text shuffled haystack sentences."""
        return self.local_text(rng, length)

    def word_starts(self, text: Example) -> np.ndarray:
        """The positions at which the words of a `local_text` start (its opening token's
        excepted), so that an ablation moves whole words."""
        raise NotImplementedError

    def ablated_tokens(self, rng, text: Example, kind: str, boundary: int) -> np.ndarray | None:
        """The tokens of a `local_text` with its far part [1, boundary) (a word start) shuffled
        by word (`kind` "shuffle") or replaced by as many tokens of another text ("replace");
        None when no draw leaves the tokens from `boundary` on as they are."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the sweep's texts

    @property
    def query_length(self) -> int:
        """The tokens one query takes, as the texts are drawn."""
        return 8

    def query_window(self, queries: int) -> int:
        """A default scored window for `queries` queries and filler, as the texts are drawn: 64
        tokens (on real text room for the queries and 32 more)."""
        return 64

    def sweep_text(self, rng, distances: list[int], length: int, start: int, ordinary: int
                   ) -> SweepText | None:  # fmt: skip
        """One document of `length` tokens (as the texts are drawn) holding a fact per distance,
        its query at that distance after it, scored from `start` on: its answer tokens and
        `ordinary` of its filler tokens, evenly spaced (0: all), as a SweepText in the model's
        tokens. None: not aligned in the model's tokens."""
        raise NotImplementedError

    # ------------------------------------------------------------------ topic shift

    def topic_shift_jobs(
        self, rng, distance: int, bin: tuple[int, int], *, region: int, window: int,
        fact_distance: int | None, jobs: Callable[[Pair, int], list[Job]],
    ) -> list[Job] | None:  # fmt: skip
        """The jobs `jobs(pair, distance)` of one topic shift, its distance drawn in `bin` at
        `distance`: a document whose first `region` filler tokens are replaced by filler of
        another topic (on real text: another haystack document's text), `distance` − 1 +
        `window` tokens of its own after them, then a fact and its query `fact_distance` later
        (None: `short_distance`; through the bridge 64 model tokens). None: not aligned in the
        model's tokens."""
        raise NotImplementedError

    # ------------------------------------------------------------------ cross-doc

    def cross_documents(self, shape: TextShape, rng, gap: int) -> CrossDocument | None:
        """cross-doc's texts (`probes.texts.cross_doc_texts`) at `gap`, as the texts are drawn;
        None when not aligned in the tokenizer."""
        raise NotImplementedError

    def cross_doc_pair(self, shape: TextShape, rng, group: int, gap: int,
                       bin: tuple[int, int]) -> dict | None:  # fmt: skip
        """The arrays of one cross-doc pair in the model's tokens (`cross_doc_arrays`), its gap
        drawn in `bin` at `gap`; None when not aligned in the model's tokens."""
        texts = self.cross_documents(shape, rng, gap)
        return None if texts is None else cross_doc_arrays(texts, shape, group, gap)
