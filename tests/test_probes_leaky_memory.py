"""An adapter that secretly evaluates with a far longer memory than it declares must fail every
probe that has a beyond-reach zero check, at the probe's default settings: the check has tokens
past the declared reach to look at (the probes put them there), and the leak moves them. An adapter that ignores reset must fail boundary's reset check: the
segment after its document boundary then reads the text before it."""

from dataclasses import replace

import probe_smoke
import pytest

import probes
from probes.testing import tiny_checkpoint

# every probe with a beyond-reach zero check, at its smoke options (distractor's: a distance
# past the direct window, 9 tokens here, which is too short for its statements)
CHECKED = probe_smoke.with_check("beyond_reach_zero")


@pytest.fixture(scope="module")
def leaky(tmp_path_factory):
    from probes.adapters import txl as adapters

    path = tiny_checkpoint(tmp_path_factory.mktemp("m") / "tiny", mem_len=8, tgt_len=8)
    lm = adapters.load(path)
    score_shared = lm.score_shared

    def hidden_memory(tokens, doc_ids, positions, geometry, **kw):  # declares 8, reads 4096
        return score_shared(tokens, doc_ids, positions, replace(geometry, mem_len=4096), **kw)

    lm.score_shared = hidden_memory
    lm.score = lambda tokens, doc_ids, positions, geometry: hidden_memory(
        tokens, doc_ids, positions, geometry, parent=[-1] * len(tokens), shared=[0] * len(tokens)
    )
    return lm


@pytest.mark.parametrize("name", CHECKED)
def test_a_model_with_a_hidden_longer_memory_fails_the_beyond_reach_check(name, leaky, tmp_path):
    s = probes.run(
        name, model=leaky, quick=True, out=tmp_path, progress=False, threads=1,
        **probe_smoke.options(name, "synth"),
    )  # fmt: skip
    check = s.checks["beyond_reach_zero"]
    assert check["status"] == "failed" and check["covered"] > 0, check
    assert not s.passed  # `probe run` exits 1
    assert "CHECK FAILED: beyond_reach_zero" in s.verdict


@pytest.mark.parametrize("name", CHECKED)
def test_the_same_model_without_the_leak_passes_with_tokens_checked(name, tmp_path):
    path = tiny_checkpoint(tmp_path / "tiny", mem_len=8, tgt_len=8)
    s = probes.run(
        name, model=str(path), quick=True, out=tmp_path, progress=False, threads=1,
        **probe_smoke.options(name, "synth"),
    )  # fmt: skip
    check = s.checks["beyond_reach_zero"]
    assert check["status"] == "passed" and check["covered"] > 0, check


@pytest.fixture(scope="module")
def ignores_reset(tmp_path_factory):
    from probes.adapters import txl as adapters

    path = tiny_checkpoint(tmp_path_factory.mktemp("m") / "tiny", mem_len=8, tgt_len=8)
    lm = adapters.load(path)
    score_shared = lm.score_shared

    def carry(tokens, doc_ids, positions, geometry, **kw):  # declares reset, reads across
        return score_shared(tokens, doc_ids, positions, replace(geometry, reset=False), **kw)

    lm.score_shared = carry
    lm.score = lambda tokens, doc_ids, positions, geometry: carry(
        tokens, doc_ids, positions, geometry, parent=[-1] * len(tokens), shared=[0] * len(tokens)
    )
    return lm


def test_a_model_that_ignores_reset_fails_boundarys_reset_check(ignores_reset, tmp_path):
    s = probes.run("boundary", model=ignores_reset, quick=True, out=tmp_path, progress=False,
                   threads=1)  # fmt: skip
    check = s.checks["reset_boundary_equal"]
    assert check["status"] == "failed" and check["covered"] > 0, check
    assert not s.passed  # `probe run` exits 1
    assert "CHECK FAILED: reset_boundary_equal" in s.verdict


def test_boundarys_reset_check_passes_with_reset_and_does_not_apply_under_carry(tmp_path):
    path = tiny_checkpoint(tmp_path / "tiny", mem_len=8, tgt_len=8)
    s = probes.run("boundary", model=str(path), quick=True, out=tmp_path, progress=False,
                   threads=1)  # fmt: skip
    check = s.checks["reset_boundary_equal"]
    assert check["status"] == "passed" and check["covered"] > 0, check
    s = probes.run("boundary", model=str(path), quick=True, out=tmp_path, progress=False,
                   threads=1, reset=False)  # fmt: skip
    check = s.checks["reset_boundary_equal"]
    assert check["status"] == "not applicable" and check["why"].startswith("--carry"), check
