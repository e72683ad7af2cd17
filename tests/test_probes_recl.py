"""recl (Transformer-XL Appendix C) against hand-computed values on a small planted loss table,
and through the CLI on a group of tiny models made here (repeated --model, the -mem0 sibling
found by default, the group recorded, a rerun that reproduces)."""

import json
import math

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from probes.cli.main import cli
from probes.library.recl import gains, recl_values
from probes.testing import tiny_checkpoint

torch.set_num_threads(1)

CONTEXTS = [10, 20, 30]
# losses[model, context, target]
TABLE = np.array(
    [
        [[3, 2, 1, 4], [2, 2, 1, 3], [2, 2, 1, 3]],  # model A: gains from 10 → 20, not after
        [[4, 1, 2, 4], [4, 1, 2, 4], [4, 1, 2, 4]],  # model B: no gain from context
    ],
    dtype=float,
)


def test_gains_match_hand_computed_values():
    # b(10) = [3, 1, 1, 4], b(20) = [2, 1, 1, 3]
    # r = 0.5 → the 2 hardest: c = 10 → targets 3, 0; f(c,c) = (4 + 3) / 2 = 3.5
    #   A: min(b, l_A(20)) = min(4, 3), min(3, 2) → 2.5: g = 1 − e^(2.5 − 3.5) = 1 − 1/e
    #   B: min(4, 4), min(3, 4) → 3.5: g = 0;   c = 20: both g = 0
    g = gains(TABLE, 0.5)
    np.testing.assert_allclose(g, [[1 - math.exp(-1), 0.0], [0.0, 0.0]], atol=1e-12)
    # r = 1.0 → all 4: f(10,10) = 9/4; A: (2 + 1 + 1 + 3) / 4 = 7/4 → g = 1 − e^(−1/2)
    g = gains(TABLE, 1.0)
    np.testing.assert_allclose(g, [[1 - math.exp(-0.5), 0.0], [0.0, 0.0]], atol=1e-12)
    # r = 0.1 → ⌈0.4⌉ = 1 target: the hardest, target 3: A: min(4, 3) → g = 1 − e^(−1)
    np.testing.assert_allclose(gains(TABLE, 0.1)[:, 0], [1 - math.exp(-1), 0.0], atol=1e-12)


def test_recl_is_the_first_context_whose_gain_falls_below_the_threshold():
    assert recl_values(TABLE, CONTEXTS, 0.5) == [(20, False), (10, False)]
    assert recl_values(TABLE, CONTEXTS, 1.0) == [(20, False), (10, False)]
    # a model that still gains 1 nat per step is censored at the last context tested
    steady = np.array([[[3.0, 3.0], [2.0, 2.0], [1.0, 1.0]]])
    assert recl_values(steady, CONTEXTS, 1.0) == [(30, True)]
    # the threshold matters: A's gain 1 − e^(−1/2) = 0.39 is "below" a threshold of 0.5
    assert recl_values(TABLE, CONTEXTS, 1.0, threshold=0.5) == [(10, False), (10, False)]


def test_top_r_targets_are_chosen_anew_for_each_context():
    # at c = 10 the hardest target is 0, at c = 20 it is 1; model A improves target 1 at 30
    t = np.array([[[5, 1], [1, 5], [1, 2]], [[5, 1], [1, 5], [1, 5]]], dtype=float)
    g = gains(t, 0.5)  # one target each time
    assert g[0, 0] == pytest.approx(1 - math.exp(1 - 5))  # target 0: 5 → 1
    assert g[0, 1] == pytest.approx(1 - math.exp(2 - 5))  # target 1 (new hardest): 5 → 2
    assert g[1, 1] == 0.0


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return (
        tiny_checkpoint(root / "m", mem_len=16, tgt_len=16),
        tiny_checkpoint(root / "m-mem0", mem_len=0, tgt_len=16, seed=1),
    )


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_cli_group_from_repeated_model_and_from_the_sibling(group, tmp_path):
    a, b = group
    fast = ("--quick", "--delta", "8", "--max-context", "32", "--out", tmp_path, "--json")
    r1 = invoke("run", "recl", "--model", a, "--model", b, *fast)
    assert r1.exit_code == 0, r1.stderr
    d1 = json.loads(r1.stdout)
    r2 = invoke("run", "recl", "--model", a, *fast)  # the -mem0 sibling is found
    d2 = json.loads(r2.stdout)
    for d in (d1, d2):
        m = d["metrics"]
        assert len(m["models"]) == 2 and m["delta"] == 8 and m["start"] == 8
        assert m["contexts"] == [8, 16, 24, 32]
        assert set(m["recl"]) == {x["id"] for x in m["models"]}
        for per_r in m["recl"].values():
            assert set(per_r) == {"0.1", "0.5", "1"}
            for v in per_r.values():
                assert v["recl"] in m["contexts"] and v["ci95"] is not None
        assert len(d["bins"]) == 6
        for name in m:
            assert name in d["metric_docs"], name
    assert d1["metrics"]["recl"] == d2["metrics"]["recl"]
    run = json.loads(open(f"{d1['run_dir']}/run.json").read())
    assert [g["id"] for g in run["group"]] == [x["id"] for x in d1["metrics"]["models"]]
    assert run["command"].count("--model") == 2
    rr = invoke("rerun", d1["run_dir"], "--json", "--out", tmp_path / "again")
    assert rr.exit_code == 0, rr.stderr
    assert json.loads(rr.stdout)["match"] == "exact"


def test_other_probes_take_one_model(group, tmp_path):
    import probes

    with pytest.raises(probes.ProbeInputError, match="takes one --model"):
        probes.run("fact-swap", model=list(group), out=tmp_path, progress=False)
    assert not any(tmp_path.iterdir())
