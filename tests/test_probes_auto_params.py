"""An `auto` parameter is resolved once, kept as the parameter's own text (run.json `auto`), and a
run that repeats another takes the value its original recorded, whatever `auto` gives now."""

import pytest

from probes.api.distance_bins import parse_ranges, ranges_text
from probes.api.probe_base import ProbeInputError, RunContext


def context(pinned=None) -> RunContext:
    return RunContext(model=None, geometry=None, horizon=None, texts=None, n=1, seed=0,
                      pinned_auto=pinned or {})  # fmt: skip


def resolve(ctx, text, auto):
    return ctx.resolve_auto("distance", text, parse_ranges, auto, ranges_text)


def test_a_given_value_is_parsed_and_not_recorded_as_auto():
    ctx = context({"distance": "2-3"})
    assert resolve(ctx, "8-16", lambda: [(4, 5)]) == [(8, 16)]
    assert ctx.auto == {} and ctx.auto_today == {}


def test_auto_is_what_auto_gives_and_is_recorded_as_text_the_parameter_reads_back():
    ctx = context()
    assert resolve(ctx, "auto", lambda: [(8, 45), (46, 257)]) == [(8, 45), (46, 257)]
    assert ctx.auto == {"distance": "8-45,46-257"} and ctx.auto_today == {}
    assert parse_ranges(ctx.auto["distance"]) == [(8, 45), (46, 257)]


def test_a_repeated_run_takes_the_recorded_value_and_keeps_what_auto_gives_now():
    ctx = context({"distance": "8-45,46-257,321-513"})
    assert resolve(ctx, "auto", lambda: [(8, 45), (46, 257)]) == [(8, 45), (46, 257), (321, 513)]
    assert ctx.auto == {"distance": "8-45,46-257,321-513"}
    assert ctx.auto_today == {"distance": "8-45,46-257"}


def test_a_repeated_run_takes_the_recorded_value_where_auto_now_refuses():
    def refused():
        raise ProbeInputError("--distance auto: no room")

    with pytest.raises(ProbeInputError, match="no room"):
        resolve(context(), "auto", refused)
    ctx = context({"distance": "30-40"})
    assert resolve(ctx, "auto", refused) == [(30, 40)]
    assert ctx.auto_today["distance"].startswith("nothing (refused: --distance auto: no room")


def test_a_recorded_value_the_parameter_refuses_is_bad_input_in_one_line():
    with pytest.raises(ProbeInputError, match=r"recorded auto value of distance '1-5'"):
        resolve(context({"distance": "1-5"}), "auto", lambda: [(8, 45)])
