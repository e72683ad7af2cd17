"""The tokenizer bridge: probe texts built in the synth language, scored by a model that reads
its own tokenizer's ids.

Each synth token is rendered as its word with one leading space (`<eod>` as the tokenizer's
separator, the eos/bos token of a model with its own tokenizer), the text is tokenized as a
whole with offsets, and every annotated span — fact, value, query, answer, the edit, a document
boundary — becomes the model tokens of its words (`synth.text.render`, the module the real-text
probe texts use too). A pair is kept only if base and variant have the same number of model
tokens and every model token outside the edit is the same id in both (`render.mismatch`); for a
length-changing synth edit, every word outside the edit must keep its tokens. The answer
contrast's other value must also fit the answer's tokens. An edit that fails is drawn again on
the same base (another replacement value), then another base; a pair that never fits is
counted (`unmatched`) and not scored. An edit that writes over filler, or draws filler of the
synth length, is first evened to the model-token length of what it replaces (`fill`, below).

Distances are the model's: the probes' bins hold distances in model tokens, and `fit` draws
each pair's synth distance so that its distance in model tokens lands in the bin (a running
ratio of model to synth tokens, corrected per attempt); `fit_distance` does it for paired jobs.
Lengths a probe states outside its bins (a lead, a depth) are converted with `synth_tokens`.

The other probes' texts (`BridgedTexts`): a single text is the synth text rendered and cut to
its length in model tokens (`local_text`); a sweep text is mapped whole, every answer token
scored (`mapped_sweep_text`); a topic shift and cross-doc's pair are evened and fitted as the
fact pairs are (`topic_shift_jobs`, `cross_doc_pair`).

Evening an edit (`fill`). A length-preserving synth edit keeps every later synth token in place,
but not every later model token: the words it writes (a fact over filler, filler over a fact,
another topic's filler) seldom take as many model tokens as the words they replace. `fill` evens
each run of edited positions to the model-token length of the base's words there, by redrawing
filler words of the variant: the filler the edit itself wrote when the run holds some (a deleted
fact, a shifted topic), then, if that is not enough, up to EVEN_WINDOW filler words right after the
run and right before it (runs less than EVEN_WINDOW filler words apart are evened together) —
neutral filler of the document's topic (or `topic`), which then belongs to the edit. Words are
swapped one at a time for pool words (a fresh chain of that topic) that bring the run's length
toward the base's, a word's length read from `Bridge.lengths`; the render then checks the whole
pair (`Bridge.pair`), so a tokenizer whose words tokenize otherwise in context only loses pairs. A
run with no filler to redraw is left as it is; one that cannot be evened is Unmatched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from probes.api.paired import Job
from probes.engine.sweep import SweepText, evenly
from probes.texts.synth_ids import SynthTexts
from synth import rng as rnd
from synth.edits.common import doc_topic
from synth.example import Example, Fact, Pair, Query, Span
from synth.generate import MIN_DISTANCE, filler, make_example
from synth.language import MAX_FACT_TOKENS
from synth.text.render import Misaligned, Piece, Rendered, mismatch, render

FIT_ATTEMPTS = 12  # bases drawn per pair before it is counted as unmatched
EDIT_DRAWS = 8  # edits (replacement values) tried on one base
EVEN_WINDOW = 24  # filler words next to an edit that may be redrawn to even its length
POOL = 256  # pool words drawn per run evened


class Unmatched(ValueError):
    """A pair whose texts do not stay aligned in the model's tokens."""


class Bridge:
    def __init__(self, tokenizer, lang):
        self.tokenizer, self.lang = tokenizer, lang
        eod = lang.vocab.eod_id
        self.words = [
            tokenizer.separator if i == eod else f" {w}" for i, w in enumerate(lang.vocab.tokens)
        ]
        self.eod = eod
        self.ratio = 1.0  # model tokens per synth token, a running estimate
        self._seen = [0, 0]
        self._lengths: np.ndarray | None = None

    @property
    def lengths(self) -> np.ndarray:
        """The model tokens of each synth word on its own (its word with one leading space), an
        estimate of its tokens in context: exact for a tokenizer that never merges across a word
        boundary, and only ever a proposal — every pair is rendered and checked as a whole."""
        if self._lengths is None:
            try:
                r = render(self.tokenizer, [Piece(w, 0) for w in self.words])
                self._lengths = (r.spans[:, 1] - r.spans[:, 0]).astype(np.int64)
            except Misaligned:
                self._lengths = np.array(
                    [len(self.tokenizer.encode(w)[0]) for w in self.words], dtype=np.int64
                )
        return self._lengths

    @property
    def filler_ratio(self) -> float:
        """Model tokens per filler word, on average over the language's filler words."""
        filler = self.lengths[self.lang.filler_tokens(np.arange(self.lang.grammar.n_words))]
        return max(float(filler.mean()), 1.0)

    def synth_tokens(self, model_tokens: int, minimum: int = 1) -> int:
        """About how many synth tokens of filler make `model_tokens` model tokens."""
        return max(minimum, round(model_tokens / self.filler_ratio))

    def fill(self, pair: Pair, rng, topic: int | None = None, protect=()) -> Pair:
        """The pair with its edit evened to the model-token length of what it replaces
        (`fill`; Unmatched when it cannot be)."""
        return fill(self, pair, rng, topic=topic, protect=protect)

    # ------------------------------------------------------------------ texts

    def render(self, ex: Example) -> Rendered:
        pieces = [
            Piece(self.words[t], d, "eod" if t == self.eod else "")
            for t, d in zip(ex.tokens.tolist(), ex.doc_ids.tolist(), strict=True)
        ]
        return render(self.tokenizer, pieces)

    @staticmethod
    def span(r: Rendered, s: Span) -> Span:
        if len(s) == 0:
            at = int(r.spans[s.start, 0]) if s.start < len(r.spans) else len(r)
            return Span(at, at)
        return r.span(s.start, s.end - 1)

    @staticmethod
    def positions(r: Rendered, synth_positions) -> np.ndarray:
        """Every model token of the given synth tokens, in order."""
        p = np.asarray(synth_positions, dtype=np.int64)
        if p.size == 0:
            return p
        return np.concatenate([np.arange(*r.spans[i]) for i in p.tolist()]).astype(np.int64)

    def example(self, ex: Example, r: Rendered) -> Example:
        """The example in model tokens, every annotation mapped."""

        def fact(f: Fact) -> Fact:
            vs = self.span(r, f.value_span)
            return Fact(f.entity, f.attribute, tuple(int(t) for t in r.tokens[vs.start : vs.end]),
                        self.span(r, f.span), vs, f.doc)  # fmt: skip

        return ex.replace(
            tokens=r.tokens,
            doc_ids=r.doc_ids,
            facts=tuple(fact(f) for f in ex.facts),
            queries=tuple(
                Query(q.fact, self.span(r, q.span), self.span(r, q.answer)) for q in ex.queries
            ),
            distractors=tuple(self.span(r, d) for d in ex.distractors),
            meta={**ex.meta, "synth_length": len(ex)},
        )

    def tokens(self, ex: Example) -> tuple[np.ndarray, np.ndarray]:
        """(tokens, doc ids) of a synth text in model tokens."""
        r = self.render(ex)
        return r.tokens, r.doc_ids

    # ------------------------------------------------------------------ pairs

    def pair(self, pair: Pair) -> tuple[Pair, Rendered, Rendered]:
        """The pair in model tokens (Unmatched when it does not stay aligned)."""
        try:
            rb, rv = self.render(pair.base), self.render(pair.variant)
        except Misaligned as e:
            raise Unmatched(str(e)) from None
        new = np.flatnonzero(pair.alignment < 0)
        if pair.preserves_length and np.array_equal(
            pair.alignment[pair.alignment >= 0], np.flatnonzero(pair.alignment >= 0)
        ):
            why = mismatch(rb, rv, [Span(*rb.spans[i]) for i in new.tolist()])
            if why is not None:
                raise Unmatched(why)
            alignment = np.arange(len(rv), dtype=np.int64)
            alignment[self.positions(rv, new)] = -1
        else:
            alignment = np.full(len(rv), -1, dtype=np.int64)
            for i, j in enumerate(pair.alignment.tolist()):
                if j < 0:
                    continue
                (vs, ve), (bs, be) = rv.spans[i], rb.spans[j]
                if ve - vs != be - bs or not np.array_equal(rv.tokens[vs:ve], rb.tokens[bs:be]):
                    raise Unmatched(f"word {i} of the variant tokenizes otherwise than in the base")
                alignment[vs:ve] = np.arange(bs, be)
        mapped = Pair(self.example(pair.base, rb), self.example(pair.variant, rv), alignment,
                      {**pair.meta, "synth_edited": new.tolist()})  # fmt: skip
        return mapped, rb, rv

    def job(self, job: Job) -> Job:
        """A paired probe's job in model tokens: its pair, targets, fact end, contrast value and
        check tokens mapped (Unmatched when any of them does not fit)."""
        pair, rb, rv = self.pair(job.pair)
        bt, vt = self.positions(rb, job.base_targets), self.positions(rv, job.variant_targets)
        alt = None
        if job.alt is not None:
            alt = self.alternative(job.pair.base, rb, job.base_targets, job.alt)
        check = None if job.check_targets is None else self.positions(rb, job.check_targets)
        # the fact's last token, in the text that states it (an inserted fact: the variant's)
        b, v, fe = job.pair.base, job.pair.variant, job.fact_end
        inserted = job.pair.preserves_length and b.filler_mask()[fe] and not v.filler_mask()[fe]
        stated = rv if inserted else rb
        return dataclasses.replace(
            job,
            pair=pair,
            base_targets=bt,
            variant_targets=vt,
            fact_end=int(stated.spans[fe, 1]) - 1,
            alt=alt,
            info={**job.info, "synth_distance": job.distance},
            check_targets=check,
        )

    def alternative(self, ex: Example, r: Rendered, positions, alt) -> tuple[int, ...]:
        """The model tokens of `alt` written at synth `positions` of `ex` (rendered `r`):
        Unmatched unless they take exactly the tokens of what stood there, nothing else moving."""
        tokens = ex.tokens.copy()
        tokens[np.asarray(positions, dtype=np.int64)] = np.asarray(alt, dtype=np.int64)
        try:
            ra = self.render(ex.replace(tokens=tokens))
        except Misaligned as e:
            raise Unmatched(str(e)) from None
        mapped = self.positions(r, positions)
        if mismatch(r, ra, [Span(int(mapped[0]), int(mapped[-1]) + 1)]) is not None:
            raise Unmatched("the contrast value does not fit the answer's tokens")
        return tuple(int(t) for t in ra.tokens[mapped])

    # ------------------------------------------------------------------ distances

    def observe(self, synth: int, model: int) -> None:
        self._seen[0] += synth
        self._seen[1] += model
        self.ratio = max(self._seen[1] / max(self._seen[0], 1), 1e-3)

    def fit(self, make: Callable[[int], Callable[[], tuple]], lo: int, hi: int, target: int,
            minimum: int):  # fmt: skip
        """Something drawn at a synth distance whose distance in model tokens lies in the bin
        [lo, hi] (both ends included, as the bins' draws are). `make(d)` draws a base at synth
        distance d and returns the function that draws an edit of it (a replacement value,
        say) and maps it, returning (mapped, synth distance, model distance) or raising
        Unmatched: up to EDIT_DRAWS edits are tried on a base until one maps, then the base's
        distance is corrected toward `target` (None after FIT_ATTEMPTS bases)."""
        d = max(minimum, round(target / self.ratio))
        for _ in range(FIT_ATTEMPTS):
            draw = make(d)
            for _ in range(EDIT_DRAWS):
                try:
                    mapped, synth, got = draw()
                    break
                except Unmatched:
                    continue
            else:
                continue  # no edit of this base fits: another base
            self.observe(synth, got)
            if lo <= got <= hi:
                return mapped
            d = max(minimum, d + round((target - got) / self.ratio))
        return None

    def fit_distance(
        self, make: Callable[[int], Callable[[], Job | list[Job]]], lo: int, hi: int, target: int,
        minimum: int,
    ) -> Job | list[Job] | None:  # fmt: skip
        """`fit` for paired jobs: `make(d)` returns the function drawing a Job of a base at
        synth distance d, or a list of Jobs of that one base (variants that share it, and its
        distance: every one must map); they come back mapped (None: unmatched)."""

        def mapped(d: int):
            draw = make(d)

            def go():
                drawn = draw()
                jobs = drawn if isinstance(drawn, list) else [drawn]
                out = [self.job(j) for j in jobs]
                return (
                    (out if isinstance(drawn, list) else out[0]),
                    jobs[0].distance,
                    out[0].distance,
                )

            return go

        return self.fit(mapped, lo, hi, target, minimum)

    def record(self) -> dict:
        return {"model_tokens_per_synth_token": round(self.ratio, 4)}


# ---------------------------------------------------------------------- evening an edit


def runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of True in `mask`."""
    edges = np.flatnonzero(np.diff(np.r_[0, mask.astype(np.int8), 0]))
    return [(int(s), int(e)) for s, e in zip(edges[::2], edges[1::2], strict=True)]


def clusters(spans: list[tuple[int, int]], free: np.ndarray) -> list[tuple[int, int]]:
    """The runs, those less than EVEN_WINDOW free positions apart merged (evened together: the filler
    between them belongs to the edit)."""
    out: list[tuple[int, int]] = []
    for s, e in spans:
        if out and s - out[-1][1] < EVEN_WINDOW and free[out[-1][1] : s].all():
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _slots(free: np.ndarray, doc_ids: np.ndarray, s: int, e: int) -> np.ndarray:
    """The free positions, up to EVEN_WINDOW each side, running on from [s, e) in its document."""
    doc = doc_ids[s]
    out = []
    for side in (
        range(e, min(e + EVEN_WINDOW, len(free))),
        range(s - 1, max(s - 1 - EVEN_WINDOW, -1), -1),
    ):
        for j in side:
            if not free[j] or doc_ids[j] != doc:
                break
            out.append(j)
    return np.array(sorted(out), dtype=np.int64)


def _even(tokens, slots, pool, lengths, diff: int, rng) -> int:
    """Swap words at `slots` of `tokens` for pool words until they gain `diff` model tokens,
    spreading the change over the slots (each takes about its share, a random pool word among
    the ones that fit best), then greedily; returns what is left of `diff`."""
    gain = lengths[pool]
    order = rnd.permutation(rng, len(slots)).tolist()
    for spread in (True, False):
        for n, i in enumerate(order):
            if diff == 0:
                return 0
            left = len(order) - n
            want = diff if not spread else int(np.sign(diff)) * max(1, round(abs(diff) / left))
            change = gain - lengths[tokens[slots[i]]]  # what each pool word adds
            miss = np.abs(want - change)
            best = np.flatnonzero(miss == miss.min())
            j = int(best[rnd.choice(rng, np.arange(len(best)))])
            if abs(diff - change[j]) < abs(diff):
                tokens[slots[i]] = pool[j]
                diff -= int(change[j])
    return diff


def fill(bridge, pair: Pair, rng, *, topic: int | None = None, protect=()) -> Pair:
    """`pair` with every edited run evened to the base's model-token length (module
    docstring); `protect`: positions never redrawn (the base's answers never are). A pair that
    does not keep its synth tokens in place is returned as it is."""
    a = pair.alignment
    keep = a >= 0
    if not pair.preserves_length or not np.array_equal(a[keep], np.flatnonzero(keep)):
        return pair
    lengths = bridge.lengths
    base, var = pair.base, pair.variant
    tokens = var.tokens.copy()
    new = ~keep
    free = base.filler_mask() & var.filler_mask() & ~new
    free[base.targets] = False
    free[np.asarray(protect, dtype=np.int64)] = False
    written = var.filler_mask() & (new | free)
    for s, e in clusters(runs(new), free):
        diff = int(lengths[base.tokens[s:e]].sum() - lengths[tokens[s:e]].sum())
        if diff == 0:
            continue
        inside = s + np.flatnonzero(written[s:e])
        outside = _slots(free, var.doc_ids, s, e)
        if not inside.size and not outside.size:
            continue  # nothing to even it with: the render decides
        t = doc_topic(var, int(var.doc_ids[s])) if topic is None else topic
        pool = filler(bridge.lang, rng, POOL, int(t))
        for slots in (inside, outside):  # the edit's own filler first, then its neighbours
            if diff != 0 and slots.size:
                diff = _even(tokens, slots, pool, lengths, diff, rng)
        if diff != 0:
            raise Unmatched(f"the edit at {s}..{e - 1} cannot be evened to its model tokens")
        slots = np.r_[inside, outside]
        moved = slots[tokens[slots] != var.tokens[slots]]
        lo, hi = min(s, int(moved.min(initial=s))), max(e, int(moved.max(initial=e - 1)) + 1)
        new[lo:hi] = True  # the run and the filler evened with it: the tokens there move
        free[lo:hi] = False
    if np.array_equal(tokens, var.tokens):
        return pair
    alignment = np.where(new, -1, np.arange(len(tokens)))
    refilled = int((tokens != var.tokens).sum())
    return Pair(base, var.replace(tokens=tokens), alignment.astype(np.int64),
                {**pair.meta, "bridge_refilled": refilled})  # fmt: skip


# ---------------------------------------------------------------------- the run's texts


class BridgedTexts(SynthTexts):
    """Synth texts through the bridge to a model's own tokenizer: every pair evened (`fill`) and
    mapped to the model's tokens, its distance fitted into its bin in model tokens."""

    mode = "bridged"
    reports_unmatched = True

    def __init__(self, bridge: Bridge):
        super().__init__(bridge.lang)
        self.bridge = bridge

    @property
    def vocab(self):
        return self.bridge.tokenizer.vocab

    def record(self) -> dict:
        return self.bridge.record()

    def even(self, pair: Pair, rng, topic: int | None = None) -> Pair:
        return self.bridge.fill(pair, rng, topic=topic)

    def fact_jobs(self, probe, variants, rng, distance, lead, bin, *, supported=True, tail=2,
                  minimum=None):  # fmt: skip
        def edits_of(d: int):
            return self.fact_draw(variants, rng, d, lead, supported=supported, tail=tail)

        least = self.min_distance if minimum is None else minimum
        jobs = self.bridge.fit_distance(edits_of, bin[0], bin[1], distance, least)
        if jobs is not None:
            for v, job in zip(variants, jobs, strict=True):
                if v.realised is not None:
                    job.info.update(v.realised(job))
        return jobs

    # ------------------------------------------------------------------ lengths and restatements

    def synth_length(self, tokens: int, minimum: int = 1) -> int:
        return self.bridge.synth_tokens(tokens, minimum)

    def model_length(self, tokens: int) -> int:
        return round(tokens * self.bridge.filler_ratio)

    def restated_fact_job(self, probe, rng, group, distance, lead, bin, *, restated_at):
        def restated_of(d: int):
            return self.restated_draw(probe, rng, group, d, lead, restated_at)

        least = restated_at + MAX_FACT_TOKENS + 1  # the outdated statement ends before the new
        job = self.bridge.fit_distance(restated_of, bin[0], bin[1], distance, least)
        if job is not None:
            v = job.pair.variant
            restated_end = int(v.facts[v.queries[0].fact].span.end) - 1
            real = int(job.base_targets[0]) - restated_end
            job.info.update(answer_distance=real, gap=job.distance - real)
        return job

    # ------------------------------------------------------------------ single texts

    def local_text(self, rng, length):
        # the synth text in the model's tokens, cut to the length: never shorter, a word is at
        # least one token
        ex = super().local_text(rng, length)
        tokens, doc_ids = self.bridge.tokens(ex)
        return ex.replace(tokens=tokens[:length], doc_ids=doc_ids[:length])

    def word_starts(self, text):
        raise NotImplementedError("a text cut in a model's own tokens keeps no word starts")

    def ablated_tokens(self, rng, text, kind, boundary):
        raise NotImplementedError("a text cut in a model's own tokens is not ablated by word")

    # ------------------------------------------------------------------ the sweep's texts

    def sweep_text(self, rng, distances, length, start, ordinary):
        ex = make_example(self.lang, rng, distances, length=length, lead=8)
        try:
            return self.mapped_sweep_text(ex, start, ordinary)
        except Misaligned:
            return None

    def mapped_sweep_text(self, ex: Example, start: int, ordinary: int) -> SweepText:
        """A synth sweep text in the model's tokens; `start`: the synth position of the window's
        first word. Every model token of an answer in the window is scored, each at its distance
        in model tokens from its fact's last model token; the ordinary targets are evenly spaced
        among the model tokens of the window's filler."""
        bridge = self.bridge
        r = bridge.render(ex)
        answer, dist = [], []
        for q in ex.queries:
            if q.answer.start < start:
                continue
            tokens = bridge.positions(r, q.answer.indices())
            end = int(r.spans[ex.facts[q.fact].span.end - 1, 1]) - 1  # the fact's last token
            answer.append(tokens)
            dist.append(tokens - end)
        filler = np.flatnonzero(ex.filler_mask())
        picked = evenly(bridge.positions(r, filler[filler >= start]), ordinary)
        cat = np.concatenate
        return SweepText(r.tokens, r.doc_ids, cat(answer), picked, cat(dist))

    # ------------------------------------------------------------------ topic shift

    def topic_shift_jobs(self, rng, distance, bin, *, region, window, fact_distance, jobs):
        # the region, and the fact's distance (default 64 model tokens: 16 synth words' worth),
        # as many synth words as make about those model tokens
        region = self.synth_length(region, 8)
        fact = self.synth_length(fact_distance or 64, 6)

        def shifts_of(d: int):
            def draw():  # a base drawn anew each time, its region evened with the new topic's
                pair = self.topic_shift_pair(rng, d, region, window, fact)
                return jobs(self.even(pair, rng, topic=pair.meta["new_topic"]), d)

            return draw

        return self.bridge.fit_distance(shifts_of, bin[0], bin[1], distance, MIN_DISTANCE)

    # ------------------------------------------------------------------ cross-doc

    def cross_doc_pair(self, shape, rng, group, gap, bin):
        return self.bridge.fit(
            lambda d: self.mapped_cross_doc_draw(shape, rng, group, d), bin[0], bin[1], gap, 1
        )

    def mapped_cross_doc_draw(self, shape, rng, group: int, gap: int):
        """The draw (`Bridge.fit`) of a cross-doc pair at synth gap `gap` in the model's tokens
        (`probes.texts.cross_doc_texts`): the foreign document's filler is evened to A's model
        tokens, so B's tokens sit at the same positions after either.
        -> draw() -> (pair's arrays, synth gap, gap in model tokens)."""
        bridge = self.bridge

        def draw():
            texts = self.cross_documents(shape, rng, gap)
            if texts is None:
                raise Unmatched("the texts do not tokenize word by word")
            conf, len_a = texts.conflict, texts.len_a
            alignment = np.arange(len(conf), dtype=np.int64)
            alignment[1:len_a] = -1  # the foreign document's filler
            pair = bridge.fill(Pair(conf, texts.foreign, alignment), rng)
            mapped, rc, _ = bridge.pair(pair)
            answer = conf.queries[0].answer.indices()
            stale = bridge.alternative(conf, rc, answer, texts.stale)
            a = int(rc.spans[len_a, 0])  # B's <eod> in model tokens
            end = int(rc.spans[texts.fact_end, 1]) - 1
            n = len(conf)
            out = {
                "group": group,
                "gap": a - end,
                "synth_gap": gap,
                "fact_end": end,
                "len_a": a,
                "conf": mapped.base.tokens,
                "foreign": mapped.variant.tokens,
                "doc_ids": mapped.base.doc_ids,
                "answer": bridge.positions(rc, answer),
                "first": a + 1 + np.arange(shape.first),
                "stale": np.array(stale, dtype=np.int64),
                "check": bridge.positions(rc, np.arange(n - shape.n_check, n)),
            }
            return out, texts.len_a - texts.fact_end, a - end

        return draw
