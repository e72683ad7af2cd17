"""`probe train-compare`: per-step losses bit for bit, evaluations field by field, a verdict from
the last common evaluation, and bad input as one line with exit 2."""

import json

import pytest
from click.testing import CliRunner
from test_train_cli import SMALL

from probes.cli.main import cli
from probes.framework.models import resolve_model_path
from probes.training.compare import compare_runs, field_kind, flatten


def evaluation(step, nll=2.0, acc=(1.0, 0.5), n_direct=(4, 2)):
    buckets = [
        {"lo": lo, "hi": hi, "n": 4, "acc": a, "acc_ci95": [a / 2, 1.0], "n_direct": nd,
         "answer_nll": 0.1, "inside": True}
        for (lo, hi), a, nd in zip([(5, 16), (16, 32)], acc, n_direct, strict=True)
    ]  # fmt: skip
    return {
        "kind": "eval", "step": step, "nll": nll, "filler_nll": 2.2, "eval_s": 9.0 * step,
        "recall": buckets, "recall_acc": sum(acc) / 2, "recall_by_distance": "5:1.00 16:0.50",
    }  # fmt: skip


def write_run(path, losses, evals):
    path.mkdir(parents=True)
    lines = [
        {"kind": "train", "step": s, "loss": loss, "step_s": 0.1 * s}
        for s, loss in enumerate(losses, 1)
    ]
    lines += evals
    lines.sort(key=lambda r: (r["step"], r["kind"] == "eval"))
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


LOSSES = [6.5, 5.25, 4.125, 3.0]


def test_a_run_is_identical_to_itself_and_timings_are_ignored(tmp_path):
    a = write_run(tmp_path / "a", LOSSES, [evaluation(2), evaluation(4)])
    b_evals = [dict(evaluation(2), eval_s=1.0), dict(evaluation(4), eval_s=1.0)]
    b = write_run(tmp_path / "b", LOSSES, b_evals)
    r = compare_runs(a, b)
    assert r.verdict == "identical" and r.complete
    assert (r.n_train_common, r.n_loss_identical, r.max_loss_diff) == (4, 4, 0.0)
    assert r.eval_steps_common == [2, 4] and set(r.max_eval_diff.values()) == {0.0}
    assert "eval_s" not in r.max_eval_diff and "recall_by_distance" not in r.max_eval_diff


def test_losses_that_drift_but_land_within_tolerance(tmp_path):
    a = write_run(tmp_path / "a", LOSSES, [evaluation(4)])
    b = write_run(tmp_path / "b", [6.5, 5.25, 4.25, 3.001], [evaluation(4, nll=2.004)])
    r = compare_runs(a, b, nll_tol=0.005)
    assert r.first_loss_diff_step == 3 and r.n_loss_identical == 2
    assert r.max_loss_diff == pytest.approx(0.125)
    assert r.verdict == "within tolerance"
    assert r.max_eval_diff["nll"] == pytest.approx(0.004)


@pytest.mark.parametrize(
    ("b_eval", "nll_tol", "acc_tol", "bad"),
    [
        (evaluation(4, nll=2.02), 0.01, 0.1, ["nll"]),
        (evaluation(4, acc=(1.0, 0.25)), 0.01, 0.1, ["recall[16-32].acc", "recall_acc"]),
        (evaluation(4, n_direct=(4, 3)), 1.0, 1.0, ["recall[16-32].n_direct"]),
        (evaluation(4, nll=None), 1.0, 1.0, ["nll"]),
    ],
)  # fmt: skip
def test_the_verdict_reads_the_last_common_evaluation(tmp_path, b_eval, nll_tol, acc_tol, bad):
    # an early evaluation far apart does not matter; the last one decides
    a = write_run(tmp_path / "a", LOSSES, [evaluation(2), evaluation(4)])
    b = write_run(tmp_path / "b", LOSSES, [evaluation(2, nll=9.0), b_eval])
    r = compare_runs(a, b, nll_tol=nll_tol, acc_tol=acc_tol)
    assert r.verdict == "differs"
    assert [d.name for d in r.out_of_tolerance] == bad


def test_a_shorter_run_is_compared_so_far(tmp_path):
    a = write_run(tmp_path / "a", LOSSES, [evaluation(2), evaluation(4)])
    b = write_run(tmp_path / "b", LOSSES[:2], [evaluation(2)])
    r = compare_runs(a, b)
    assert not r.complete and r.verdict == "identical so far" and r.final_step == 2
    assert not r.reproduced and invoke(str(a), str(b)).exit_code == 1
    c = write_run(tmp_path / "c", LOSSES[:1], [])
    assert compare_runs(a, c).verdict == "no common evaluation"


def test_interval_bounds_and_bucket_answer_nlls_are_shown_not_judged(tmp_path):
    # two answers of a 32-query bucket flip: the accuracy moves by 0.0625, its Wilson lower
    # bound by more; a far bucket's answer NLL (chance level, a few dozen answers) moves freely
    a = write_run(tmp_path / "a", LOSSES, [evaluation(4)])
    moved = evaluation(4, acc=(30 / 32, 0.5))
    moved["recall"][0]["acc_ci95"] = [0.798, 0.983]
    moved["recall"][1]["answer_nll"] = 0.6
    b = write_run(tmp_path / "b", LOSSES, [moved])
    r = compare_runs(a, b, acc_tol=0.07)
    assert r.verdict == "within tolerance" and r.reproduced
    assert r.max_eval_diff["recall[16-32].answer_nll"] == pytest.approx(0.5)


def test_a_field_only_one_run_records_is_listed_not_judged(tmp_path):
    a = write_run(tmp_path / "a", LOSSES, [evaluation(4)])
    b = write_run(tmp_path / "b", LOSSES, [dict(evaluation(4), new_field=1.0)])
    r = compare_runs(a, b)
    assert r.only_b == ["new_field"] and not r.only_a
    assert r.verdict == "within tolerance"  # not "identical": the records are not the same


def test_a_loss_that_is_not_a_number_is_a_difference_not_a_crash(tmp_path):
    a = write_run(tmp_path / "a", LOSSES, [evaluation(4)])
    b = write_run(tmp_path / "b", [6.5, "oops", None, 3.0], [evaluation(4)])
    r = compare_runs(a, b)
    assert (r.n_loss_identical, r.first_loss_diff_step, r.max_loss_diff) == (2, 2, float("inf"))


def test_a_replayed_step_counts_once_with_its_last_line(tmp_path):
    a = write_run(tmp_path / "a", LOSSES, [evaluation(4)])
    b = write_run(tmp_path / "b", LOSSES, [evaluation(4)])
    with open(b / "metrics.jsonl", "a") as f:  # a stale line before a replay, then a cut line
        f.write(json.dumps({"kind": "train", "step": 4, "loss": 3.0}) + "\n" + '{"kind": "tr')
    r = compare_runs(a, b)
    assert r.n_train_b == 4 and r.verdict == "identical"


def test_the_log_file_name_is_the_training_loops():
    from probes.training import compare
    from txl import metrics_log

    assert compare.METRICS_FILE == metrics_log.METRICS_FILE


def test_field_kinds():
    names = dict(flatten(evaluation(4)))
    kinds = {n: field_kind(n) for n in names}
    assert kinds["nll"] == kinds["filler_nll"] == "nats"
    assert kinds["recall_acc"] == kinds["recall[5-16].acc"] == "accuracy"
    assert kinds["recall[5-16].acc_ci95[1]"] == kinds["recall[5-16].answer_nll"] == "reported"
    assert kinds["recall[5-16].n_direct"] == kinds["recall[5-16].lo"] == "exact"
    assert field_kind("recall_mem640_direct_acc") == field_kind("recall[5-16].acc_direct")
    assert field_kind("recall_mem640_direct_acc") == "accuracy"
    assert field_kind("filler_floor") == field_kind("filler_entropy") == "nats"
    assert field_kind("some_new_float") == "exact"  # unknown: fails safe
    assert names["recall[5-16].inside"] == 1.0


def invoke(*args):
    return CliRunner().invoke(cli, ["train-compare", *args])


def test_cli_exit_codes_and_json(tmp_path):
    a = write_run(tmp_path / "a", LOSSES, [evaluation(4)])
    b = write_run(tmp_path / "b", LOSSES, [evaluation(4, nll=2.5)])
    same = invoke(str(a), str(a / "metrics.jsonl"))
    assert same.exit_code == 0 and "verdict: identical" in same.stdout
    marked = write_run(tmp_path / "r[red]x", LOSSES, [evaluation(4)])
    assert f"B: {marked}" in invoke(str(a), str(marked)).stdout  # a path is not rich markup
    apart = invoke(str(a), str(b), "--json")
    assert apart.exit_code == 1
    doc = json.loads(apart.stdout)
    assert doc["verdict"] == "differs" and doc["eval"]["out_of_tolerance"] == ["nll"]
    assert invoke(str(a), str(b), "--nll-tol", "0.6").exit_code == 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["{a}", "{tmp}/missing"], "no metrics.jsonl at"),
        (["{a}", "{tmp}/empty"], "holds no metrics records"),
        (["{a}", "{a}", "--nll-tol", "-1"], "--nll-tol"),
        (["{a}", "{a}", "--acc-tol", "nan"], "not a finite number"),
        (["{a}", "{tmp}/latin1"], "UTF-8"),
        (["{a}"], "Missing argument"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, args, needle):
    a = write_run(tmp_path / "a", LOSSES, [evaluation(4)])
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "metrics.jsonl").write_text("not json\n")
    (tmp_path / "latin1").write_bytes(b'{"kind": "train", "step": 1, "loss": "\xe9"}\n')
    result = invoke(*(x.format(a=a, tmp=tmp_path) for x in args))
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]
    assert result.stdout == ""


def test_two_short_training_runs_of_one_command_are_identical(tmp_path):
    args = ["--steps", "3", "--threads", "1", "--quiet", "--set", "eval_every=3", *SMALL]
    for name in ("r1", "r2"):
        result = CliRunner().invoke(cli, ["train", "--out", str(tmp_path / name), *args])
        assert result.exit_code == 0, result.output
    result = invoke(str(tmp_path / "r1"), str(tmp_path / "r2" / "model"))
    assert result.exit_code == 0 and "verdict: identical (" in result.stdout


def test_the_shipped_model_and_its_sibling_read_as_complete_runs_that_differ():
    # the no-recurrence sibling shares the recipe, seed and budget: its first four losses match
    # the default's bit for bit, then mem_len 0 takes it elsewhere
    r = compare_runs(resolve_model_path("default"), resolve_model_path("default-mem0"))
    assert r.complete and r.n_train_common == r.final_step == 16000
    assert r.first_loss_diff_step == 5 and r.n_loss_identical < 100 and r.max_loss_diff > 0.1
    assert r.verdict == "differs" and not r.reproduced
    assert {"nll", "filler_nll"} <= {d.name for d in r.out_of_tolerance}
    assert "recall_mem640_acc" in r.only_a and not r.only_b  # the sibling has no longer memory


def test_a_retrain_of_the_shipped_model_that_lands_close_is_within_tolerance(tmp_path):
    # the shipped log with its last evaluation moved by half the stated NLL tolerance
    shipped = resolve_model_path("default") / "metrics.jsonl"
    lines = [json.loads(x) for x in shipped.read_text().splitlines()]
    last = max(i for i, r in enumerate(lines) if r["kind"] == "eval")
    lines[last]["nll"] += 0.01
    b = tmp_path / "retrain"
    b.mkdir()
    (b / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    r = compare_runs(shipped, b)
    assert r.complete and r.n_loss_identical == r.n_train_common == r.final_step > 0
    assert r.verdict == "within tolerance" and r.reproduced
    assert r.max_eval_diff["nll"] == pytest.approx(0.01)
