"""probes.report.sinks: long-nll runs of the same texts are compared text by text on the
positions both scored after the cache fills; each claim's verdict follows its interval against
the margin; runs that say they scored the same texts but did not are refused."""

import json

import numpy as np
import pytest

import probes
from probes.report import sinks


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    return [
        probes.run("long-nll", model="default", mem=m, length=256, n=3, stride=s, out=out,
                   progress=False).run_dir
        for m, s in ((0, 1), (64, 1), (32, 4))
    ]  # fmt: skip


def test_a_difference_is_the_mean_over_texts_on_the_positions_both_scored(runs):
    from pathlib import Path

    a, b, c = (sinks.load(Path(r)) for r in runs)
    (group,) = sinks.groups([a, b, c])
    assert len(group) == 3
    d = sinks.difference(a, c, start=128)
    pos = np.arange(128, 256)
    pos = pos[pos % 4 == 0]  # c scored every 4th position only

    def mean(r, t):
        s = r["scores"]
        return s["nll"][(s["text"] == t) & np.isin(s["position"], pos)].mean()

    by_hand = [mean(a, t) - mean(c, t) for t in range(3)]
    assert d["mean"] == pytest.approx(np.mean(by_hand), abs=1e-12) and d["n"] == 3
    assert d["tokens_per_text"] == 32


@pytest.mark.parametrize(("ci", "kind", "word"), [
    ((0.06, 0.2), "above", "holds"), ((-0.1, 0.04), "above", "does not hold"),
    ((0.0, 0.2), "above", "inconclusive"), ((-0.2, 0.04), "not_above", "holds"),
    ((0.06, 0.3), "not_above", "does not hold"), ((-0.3, -0.06), "below", "holds"),
    ((-0.04, 0.1), "below", "does not hold"), ((-0.04, 0.04), "within", "holds"),
    ((0.06, 0.1), "within", "does not hold"), ((-0.1, 0.02), "within", "inconclusive"),
])  # fmt: skip
def test_a_verdict_follows_the_interval_against_the_margin(ci, kind, word):
    assert sinks.judge({"mean": sum(ci) / 2, "ci95": list(ci)}, kind) == word


def test_two_runs_of_one_policy_on_the_same_texts_are_refused(runs, tmp_path):
    from pathlib import Path

    a = sinks.load(Path(runs[1]))
    with pytest.raises(ValueError, match="ran the same policy"):
        sinks.groups([a, dict(a, dir=Path("elsewhere"))])


def test_bad_command_lines_are_one_line_and_exit_2(runs, tmp_path, capsys):
    assert sinks.main([runs[0], "--out"]) == 2
    assert sinks.main([runs[0], "--out", str(tmp_path / "no" / "such" / "dir.md")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("error: ") for line in err)


def test_runs_that_claim_the_same_texts_but_differ_are_refused(runs, tmp_path):
    from pathlib import Path

    a, b = sinks.load(Path(runs[0])), sinks.load(Path(runs[1]))
    b["tokens"] = b["tokens"].copy()
    b["tokens"][0, 5] += 1
    with pytest.raises(ValueError, match="differ in their tokens"):
        sinks.groups([a, b])


def test_the_command_writes_its_table_and_json(runs, tmp_path):
    out = tmp_path / "sinks.md"
    assert sinks.main([*runs, "--out", str(out)]) == 0
    text = out.read_text()
    assert "# Attention sinks" in text and "| claim |" in text
    (table,) = json.loads(out.with_suffix(".json").read_text())
    assert table["length"] == 256 and len(table["rows"]) == 3
    assert sinks.main([str(tmp_path)]) == 2  # not a run directory: one line, exit 2
