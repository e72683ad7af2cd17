"""What the fact probes share: distance and lead parameters, and base examples built by synth.

A base example is one document: `<eod>`, `lead` filler tokens, the fact, filler, then the query
whose first answer token is exactly `distance` tokens after the fact's last token ("." of the
fact), then two filler tokens. The lead is drawn per pair (by default from 8 to 8 + tgt_len − 1)
so the fact and the query fall at every offset in their segments, which the reach of a token
depends on. Distances are drawn uniformly inside each bin.

Seeds: each bin (or grid cell) draws its pairs from its own stream, keyed by the probe name and
the bin's own values (not its index), so a bin gives the same pairs whatever other bins a run has
— runs at `--mem 128` and `--mem 640` with the same `--distance` score identical pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

from probes.api.distance_bins import auto_bins, check_ranges, parse_ranges, ranges_text
from probes.api.paired import Job
from probes.api.params import param
from probes.api.probe_base import LengthLimit, ProbeInputError, RunContext
from synth import rng as rnd
from synth.generate import make_example

DISTANCE_HELP = (
    "distance bins, fact's last token → first answer token: 'auto' (two bins inside the direct "
    "window, one only in the layered reach when there is one, one beyond it, from the eval "
    "geometry) or LO-HI,… e.g. 16-64,700-900"
)
LEAD_HELP = (
    "filler tokens between the document start and the fact, drawn per pair: 'auto' (8 to "
    "8 + tgt_len − 1) or LO-HI"
)


def check_lead(text: str) -> None:
    parse_lead(text, tgt_len=1)


def parse_lead(text: str, tgt_len: int) -> tuple[int, int]:
    text = text.strip()
    if text == "auto":
        return 8, 8 + tgt_len - 1
    try:
        lo, hi = (int(x) for x in text.split("-", 1)) if "-" in text else (int(text),) * 2
    except ValueError:
        raise ValueError(f"{text!r} is not a range; write 'auto' or LO-HI, e.g. 8-71") from None
    if lo < 1 or hi < lo:
        raise ValueError(f"bad lead range {text!r}; need 1 <= LO <= HI, e.g. 8-71")
    return lo, hi


def distance_param(help_text: str = DISTANCE_HELP):
    """The `--distance` bins parameter ('auto' or LO-HI,…), with the probe's own wording of
    what the distance runs between."""
    return param("auto", help=help_text, check=check_ranges)


@dataclass(frozen=True)
class DistanceParams:
    distance: str = distance_param()


@dataclass(frozen=True)
class FactParams(DistanceParams):
    lead: str = param("auto", help=LEAD_HELP, check=check_lead)


def min_distance(ctx: RunContext) -> int:
    """The shortest fact → answer distance the run's texts allow: the synth language's, or on
    real text the longest query prefix plus one (`synth.text.world`)."""
    return ctx.texts.min_distance


# Tokens a fact-probe row holds besides the distance: <eod>, the lead (at most `auto`'s
# 8 + tgt_len − 1), the fact, the answer and the tail; `row_limit` keeps this much room.
ROW_ROOM = 48


def row_limit(ctx: RunContext) -> LengthLimit | None:
    """The longest fact → answer distance the run's texts can hold and what limits it, or None
    for no limit (`RunContext.length_limits`, less the room a fact-probe row keeps besides the
    distance, and a segment where it is the model's row)."""
    limits = [
        limit._replace(
            tokens=limit.tokens - ROW_ROOM - (ctx.geometry.tgt_len if limit.of_model else 0)
        )
        for limit in ctx.length_limits()
    ]
    return min(limits) if limits else None


def distance_bins(text: str, ctx: RunContext, minimum: int | None = None) -> list[tuple[int, int]]:
    """The bins of `--distance` (auto: from the horizon), none below `minimum` (default: the
    shortest fact → answer distance, `min_distance`) and none past what the run's texts can
    hold (`row_limit`: auto bins are cut there, and the bins a run records show the cut; given
    ones are refused, naming the limit)."""
    lowest = min_distance(ctx) if minimum is None else minimum
    given = parse_ranges(text)
    bins = ctx.resolve_auto(
        "distance", text, parse_ranges, lambda: auto_bins(ctx.horizon), ranges_text
    )
    limit = row_limit(ctx)
    if limit is not None and bins[-1][1] > limit.tokens:
        top, what = max(limit.tokens, 0), limit.what
        if given is not None:
            raise ProbeInputError(
                f"--distance {text!r}: {what} hold distances up to {top:,} tokens; give "
                f"shorter distances{' or --evaluator window' if limit.of_model else ''}"
            )
        kept = [(lo, min(hi, top)) for lo, hi in bins if lo <= top]
        if not kept or top < lowest + 1:
            raise ProbeInputError(
                f"{what} leave room for no distance bin (up to {top:,} tokens) at this geometry; "
                "lower --mem or give --distance"
            )
        ctx.bins_cut = (
            f"auto bins {', '.join(f'{lo}-{hi}' for lo, hi in bins)} cut to "
            f"{', '.join(f'{lo}-{hi}' for lo, hi in kept)}: {what} hold distances up to "
            f"{top:,} tokens"
        )
        bins = kept
    if bins[0][0] < lowest:
        if given is None:  # auto with a tiny horizon: start at the minimum
            kept = [(max(lo, lowest), hi) for lo, hi in bins if hi > lowest + 1]
            bins = kept or [(lowest, lowest + 8)]
        else:
            where = ctx.texts.min_distance_why if minimum is None else ""
            raise ProbeInputError(
                f"--distance {text!r}: distances start at {lowest}{where} (a fact ends at least "
                f"{lowest} tokens before its answer); e.g. {lowest}-{lowest + 60}"
            )
    return bins


def lead_range(text: str, ctx: RunContext) -> tuple[int, int]:
    def parse(t: str) -> tuple[int, int]:
        return parse_lead(t, ctx.geometry.tgt_len)

    return ctx.resolve_auto("lead", text, parse, lambda: parse("auto"), lead_text)


def lead_text(lead: tuple[int, int]) -> str:
    """A lead range as `parse_lead` reads it back ("8-71")."""
    return f"{int(lead[0])}-{int(lead[1])}"


def base_example(lang, rng, distance: int, lead: int, *, supported: bool = True, tail: int = 2):
    """One document of synth language `lang` with one fact and its query `distance` apart (see
    module docstring), and `tail` filler tokens after the query."""

    try:
        return make_example(lang, rng, [distance], lead=lead, supported=supported, tail=tail)
    except ValueError as e:
        raise ProbeInputError(f"cannot build an example at distance {distance}: {e}") from None


def answer_job(
    group: int,
    pair,
    stated_in,
    info: dict,
    *,
    sign: int = 1,
    alt: tuple[int, ...] | None = None,
    base_id: int | None = None,
    value_len: bool = True,
) -> Job:
    """The Job scoring query 0's answer in `pair`; distances run from the fact's last token in
    `stated_in` (the example that states the fact). `value_len` appends the answer's length to
    `info`."""
    bt, vt = pair.aligned_targets()
    q = stated_in.queries[0]
    return Job(
        group=group,
        pair=pair,
        base_targets=bt,
        variant_targets=vt,
        fact_end=stated_in.facts[q.fact].span.end - 1,
        sign=sign,
        alt=alt,
        info={**info, "value_len": len(bt)} if value_len else info,
        base_id=base_id,
    )


CHECK_TAIL = 8  # filler tokens scored past the edit's layered reach (`check_tail`)


def check_tail(ctx: RunContext) -> tuple[int, int]:
    """(tail, n): a text ending in `tail` filler tokens after its query has its last n beyond the
    layered reach of anything before the query — tokens a beyond-reach zero check can check."""
    if ctx.horizon.unbounded:  # nothing lies beyond: the check is not applicable
        return 2, 0
    (_, _), (_, reach) = ctx.horizon.ranges()
    return reach + CHECK_TAIL + 1, CHECK_TAIL


def draws_per_bin(name: str, ctx: RunContext, bins: list[tuple[int, int]]):
    """(group, rng, distance) for ctx.n pairs per bin: each bin draws from its own stream, keyed
    by the probe's name and the bin's own edges (module docstring), the distance first, uniform
    in [lo, hi); whatever else a pair draws comes from the same rng before the next one."""

    for g, (lo, hi) in enumerate(bins):
        rng = ctx.rng(name, lo, hi)
        for _ in range(ctx.n):
            yield g, rng, rnd.randrange(rng, lo, hi)


def plan_by_distance(probe, ctx: RunContext, edit: str, alt=None, **params) -> None:
    """Fill `probe.groups` (one per distance bin) and `probe.jobs` (ctx.n pairs per bin), each a
    fact pair of edit `edit` (a `synth.edits` name, with `params`) drawn by the run's texts
    (`Texts.fact_job`) at the bin's distance, after a lead drawn from `probe.params.lead`;
    `alt(pair)`, if given, is the contrast answer. A pair that cannot be kept aligned in the
    model's tokens is counted in `ctx.unmatched`."""

    bins = distance_bins(probe.params.distance, ctx)
    lead_lo, lead_hi = lead_range(probe.params.lead, ctx)
    probe.groups = [{"distance_lo": lo, "distance_hi": hi} for lo, hi in bins]
    probe.jobs = []
    for g, rng, d in draws_per_bin(probe.name, ctx, bins):
        lead = rnd.randrange(rng, lead_lo, lead_hi)
        job = ctx.texts.fact_job(probe.name, edit, rng, g, d, lead, bins[g], alt=alt, **params)
        if job is None:
            ctx.unmatched += 1
        else:
            probe.jobs.append(job)
    ctx.require_matched(probe.name, len(probe.jobs))
