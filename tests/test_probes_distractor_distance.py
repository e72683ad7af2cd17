"""distractor's `auto` distance lies inside the direct window, as its help says: every answer
token reads the fact directly; a window too short for the statements is refused before any run
directory exists (exit 2), never placed beyond it."""

import pytest

import probes
from probes.api.probe_base import ProbeInputError


@pytest.mark.parametrize("mem", [48, 64, 200])
def test_the_auto_distance_is_inside_every_answer_tokens_direct_window(mem, tmp_path):
    model = f"planted:mem_len={mem},copy=2"
    s = probes.run("distractor", model=model, k="1,2,4", n=4, out=tmp_path, progress=False)
    for b in s.bins:
        assert b["reach"] == "direct" and b["reach_fraction"]["direct"] == 1.0, b


def test_a_window_too_short_for_the_distractors_is_refused_before_the_run_directory(tmp_path):
    with pytest.raises(ProbeInputError, match="direct window is as short as 25 tokens"):
        probes.run("distractor", model="planted:mem_len=24", n=4, out=tmp_path, progress=False)
    assert not any(tmp_path.iterdir())
    # one distractor (24 tokens of room) fits the same window
    s = probes.run("distractor", model="planted:mem_len=24", k="1", n=4, out=tmp_path,
                   progress=False)  # fmt: skip
    assert {b["reach"] for b in s.bins} == {"direct"}
