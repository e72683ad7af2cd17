"""The claim reports: a claim is judged by its interval against its margin (every kind, at its
edges); a difference of two independent groups has the standard Welch interval; the context-use
and fact-position reports read only run directories, judge every claim they print, and refuse a
directory of another probe (or too few positions) in one line, exit 2."""

import json

import numpy as np
import pytest
import torch

import probes
from probes.report import claims, context_use, fact_position

torch.set_num_threads(1)


@pytest.mark.parametrize(("ci", "kind", "result"), [
    ([0.2, 0.9], "above", "holds"), ([-0.3, 0.05], "above", "does not hold"),
    ([0.0, 0.3], "above", "inconclusive"),
    ([-0.3, 0.09], "not_above", "holds"),
    ([0.2, 0.4], "not_above", "does not hold"), ([0.05, 0.4], "not_above", "inconclusive"),
    ([-0.9, -0.2], "below", "holds"), ([-0.05, 0.3], "below", "does not hold"),
    ([-0.3, 0.0], "below", "inconclusive"),
    ([-0.09, 0.09], "within", "holds"), ([0.2, 0.3], "within", "does not hold"),
    ([-0.3, -0.2], "within", "does not hold"), ([-0.05, 0.2], "within", "inconclusive"),
    (None, "within", "not measured"),
])  # fmt: skip
def test_a_claim_is_judged_by_its_interval_against_the_margin(ci, kind, result):
    assert claims.judge(ci, kind, 0.1) == result


def test_the_difference_of_two_groups_has_the_welch_interval():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    a, b = rng.normal(1.0, 1.0, 12), rng.normal(0.2, 3.0, 30)
    d = claims.welch(a, b)
    ref = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert d["mean"] == pytest.approx(a.mean() - b.mean())
    assert d["ci95"] == pytest.approx([ref.low, ref.high], rel=1e-9)
    assert claims.welch(a[:1], b) is None


def test_the_context_use_report_judges_every_claim_of_an_ablation_run(tmp_path):
    s = probes.run("context-ablation", model="default", n=4, context=250, distance="8,16,64,200",
                   out=tmp_path, progress=False)  # fmt: skip
    out = tmp_path / "use.md"
    assert context_use.main([str(tmp_path / s.run_dir), "--out", str(out)]) == 0
    (table,) = json.loads(out.with_suffix(".json").read_text())
    picked = {c["claim"]: (c["ablation"], c["distance"]) for c in table["claims"]}
    assert list(picked.values()) == [("drop", 200), ("shuffle", 64), ("shuffle", 16),
                                     ("replace", 64)]  # fmt: skip
    by = {(b["ablation"], b["distance"]): b for b in s.bins}
    for c in table["claims"]:
        b = by[c["ablation"], c["distance"]]
        kind = "within" if "unused" in c["claim"] else "above"
        assert c["result"] == claims.judge(b["ci95"], kind, 1.0)
    assert "| claim |" in out.read_text()


def test_the_fact_position_report_orders_positions_and_judges_the_u_shape(tmp_path):
    dirs = []
    for lead, distance in (("8-15", "200-210"), ("100-107", "108-118"), ("200-207", "16-24")):
        s = probes.run("fact-swap", model="default", n=6, lead=lead, distance=distance,
                       out=tmp_path, progress=False)  # fmt: skip
        dirs.append(str(tmp_path / s.run_dir))
    out = tmp_path / "pos.md"
    assert fact_position.main([dirs[2], dirs[0], dirs[1], "--out", str(out)]) == 0
    (table,) = json.loads(out.with_suffix(".json").read_text())
    positions = [r["position"] for r in table["rows"]]
    assert positions == sorted(positions) and positions[0] < 0.1 < 0.9 < positions[-1]
    assert [c["claim"] for c in table["claims"]] == ["primacy", "recency", "U-shape"]
    recency = table["claims"][1]
    assert recency["result"] == claims.judge(recency["difference"]["ci95"], "above", 0.05)
    assert fact_position.main(dirs[:2]) == 2  # two positions: no middle to compare


def test_a_directory_of_another_probe_is_refused_in_one_line(tmp_path, capsys):
    s = probes.run("fact-swap", model="default", n=2, distance="16-24", out=tmp_path,
                   progress=False)  # fmt: skip
    assert context_use.main([str(tmp_path / s.run_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert "not context-ablation" in err and len(err.splitlines()) == 1
    assert context_use.main([str(tmp_path)]) == 2  # not a run directory
    assert context_use.main([]) == 2
