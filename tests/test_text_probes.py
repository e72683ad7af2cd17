"""Probes on real text through the CLI, on a text-trained checkpoint's shape (a random
Transformer-XL that reads a BPE): the JSON contract with --haystack, run.json's record of the
text and the tokenizer, exact distances in model tokens, reset invariance on real text, the
tokenizer bridge for synthetic probes, and bad input (one line, exit 2, nothing written)."""

import json

import numpy as np
import pytest
from click.testing import CliRunner
from text_helpers import default_world, require_tokenizers, small_bpe, text_checkpoint

require_tokenizers()

import probe_smoke  # noqa: E402

from probes.api import registry  # noqa: E402
from probes.cli.main import cli  # noqa: E402
from probes.testing import tiny_checkpoint  # noqa: E402

FAST = ["--n", "3", "--quiet", "--json"]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return str(text_checkpoint(tmp_path_factory.mktemp("m") / "text", mem_len=16, tgt_len=16))


def invoke(args):
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def run_json(doc):
    from pathlib import Path

    return json.loads((Path(doc["run_dir"]) / "run.json").read_text())


def test_fact_swap_on_the_default_haystack_keeps_the_contract_and_records_the_text(model, tmp_path):
    r = invoke(["run", "fact-swap", "--model", model, "--haystack", "default",
                "--distance", "40-60,90-120", "--out", str(tmp_path), *FAST])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["n_pairs"] == 6 and doc["metrics"]["unmatched_pairs"] == 0
    assert {"delta_mean", "delta_ci95", "p_value", "accuracy"} <= set(doc["metrics"])
    for name in doc["metrics"]:
        assert name in doc["metric_docs"], name
    assert [(b["distance_lo"], b["distance_hi"], b["n"]) for b in doc["bins"]] == [
        (40, 60, 3), (90, 120, 3),
    ]  # fmt: skip
    assert doc["checks"]["identical_prefix"]["status"] == "passed"
    rec = run_json(doc)
    assert rec["vocabulary"]["reads"] == "tokenizer"
    assert rec["vocabulary"]["tokenizer_sha256"] == small_bpe().sha256
    text = rec["text"]
    assert text["haystack"] == "default" and text["python_version"] and text["sha256"]
    assert text["tokenizer_sha256"] == small_bpe().sha256 and text["values"]
    assert rec["options"]["haystack"] == "default" and "--haystack" in rec["command"]
    samples = [
        json.loads(x)
        for x in (tmp_path / doc["run_dir"] / "samples.jsonl").read_text().splitlines()
    ]
    for s in samples:  # distances exact in model tokens, inside their bins
        lo, hi = doc["bins"][s["group"]]["distance_lo"], doc["bins"][s["group"]]["distance_hi"]
        assert lo <= s["distance"] <= hi and s["answer_len"] == default_world().value_len


def test_default_all_is_every_topic_of_the_default_corpus_and_says_so(model, tmp_path):
    """The held-out part cannot hold a distance near a pretrained model's context; the whole
    corpus can, and run.json names which part a run read."""
    from synth.text.default_corpus import default_corpus

    r = invoke(["run", "fact-swap", "--model", model, "--haystack", "default-all",
                "--distance", "40-60", "--out", str(tmp_path), *FAST])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    rec = run_json(json.loads(r.stdout))
    text = rec["text"]
    assert text["haystack"] == "default-all" and text["part"] == "all"
    assert text["documents"] == len(default_corpus("all").documents)
    assert text["documents"] > len(default_corpus("haystack").documents)
    assert text["sha256"] == text["all_sha256"]
    assert rec["options"]["haystack"] == "default-all"


def test_boundary_runs_on_haystack_files(model, tmp_path):
    from synth.text.default_corpus import default_corpus

    hay = tmp_path / "hay"
    hay.mkdir()
    for i, d in enumerate(default_corpus("haystack").documents[:6]):
        (hay / f"{i}.txt").write_text(d.text, encoding="utf-8")
    r = invoke(["run", "boundary", "--model", model, "--haystack", str(hay / "0.txt"),
                "--haystack", str(hay), "--out", str(tmp_path / "out"), *FAST])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["n_pairs"] == 3 and doc["checks"]["first_segment_equal"]["status"] == "passed"
    rec = run_json(doc)
    assert rec["text"]["files"] == 7  # 0.txt given twice: read twice, as asked
    assert rec["options"]["haystack"] == [str((hay / "0.txt").resolve()), str(hay.resolve())]
    again = invoke(["rerun", doc["run_dir"], "--out", str(tmp_path / "again"), "--json"])
    assert again.exit_code == 0, again.stderr
    assert json.loads(again.stdout)["match"] == "exact"


def test_under_reset_b_scores_bitwise_the_same_after_any_real_text_a(model):
    from probes.adapters.txl import load
    from synth import make_rng
    from synth.text.compose import DocPlan, Placed, compose

    w, lm = default_world(), load(model)
    rng = make_rng(9)
    b = DocPlan(90, (Placed(10, w.fact(1, 2, 3)),))
    first = compose(w, rng, [DocPlan(70), b])
    again = compose(w, rng, [DocPlan(70), DocPlan(90, b.placed, first.runs[1])])
    t = np.stack([first.rendered.tokens, again.rendered.tokens])
    d = np.stack([first.rendered.doc_ids, again.rendered.doc_ids])
    assert (t[0, :70] != t[1, :70]).any() and np.array_equal(t[0, 70:], t[1, 70:])
    scored = np.zeros(t.shape, bool)
    scored[:, 71:] = True
    geo = lm.default_geometry()
    out = lm.score(t, d, scored, geo)
    assert np.array_equal(out.nll[0, 71:], out.nll[1, 71:])  # bit for bit
    carried = lm.score(t, d, scored, geo.__class__(**{**geo.to_dict(), "reset": False}))
    assert not np.array_equal(carried.nll[0, 71:], carried.nll[1, 71:])


# every probe that writes real text, at its smoke options (fact-swap has its own test above)
HAYSTACK = [
    (name, probe_smoke.cli_args(name, "haystack"))
    for name in probe_smoke.in_mode("haystack")
    if name != "fact-swap"
]


@pytest.mark.parametrize(("probe", "extra"), HAYSTACK, ids=[p for p, _ in HAYSTACK])
def test_the_other_probes_run_on_real_text_and_pass_their_checks(model, tmp_path, probe, extra):
    r = invoke(["run", probe, "--model", model, "--haystack", "default", *extra,
                "--out", str(tmp_path), *FAST])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["n_pairs"] >= 3 and doc["metrics"]["unmatched_pairs"] == 0
    assert all(c["status"] != "failed" for c in doc["checks"].values())
    for check in registry.get(probe).self_checks:  # every check it declares is run
        assert check in doc["checks"], check


def test_a_synthetic_probe_goes_through_the_bridge_and_maps_every_answer_token(model, tmp_path):
    from probes.api.fact_pairs import answer_job
    from probes.texts.bridged import Bridge, Unmatched
    from synth import Language, make_rng
    from synth.edits import replace
    from synth.generate import make_example

    r = invoke(["run", "fact-swap", "--model", model, "--out", str(tmp_path), *FAST])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    rec = run_json(doc)
    assert (
        rec["vocabulary"]["reads"] == "tokenizer"
        and rec["bridge"]["model_tokens_per_synth_token"] > 1
    )
    assert doc["n_pairs"] + doc["metrics"]["unmatched_pairs"] == 3 * len(doc["bins"])
    lang = Language.default()
    bridge = Bridge(small_bpe(), lang)
    rng = make_rng(2)
    matched = 0
    for _ in range(60):
        base = make_example(lang, rng, [30], lead=8)
        pair = replace(base, rng, lang)
        try:
            job = bridge.job(answer_job(0, pair, base, {}, alt=tuple(pair.meta["new_value"])))
        except Unmatched:  # B's words tokenize to another length than A's: not scored
            continue
        matched += 1
        b, v = job.pair.base, job.pair.variant
        assert len(b) == len(v)
        assert np.array_equal(job.variant_targets, job.base_targets)  # every answer token mapped
        assert np.array_equal(v.tokens[job.variant_targets], b.tokens[job.base_targets])
        answer = " ".join(lang.vocab.words(base.tokens[base.queries[0].answer.indices()]))
        assert small_bpe().decode(b.tokens[job.base_targets]) == " " + answer
        outside = job.pair.alignment >= 0
        assert np.array_equal(b.tokens[outside], v.tokens[outside])
        assert job.distance == int(job.base_targets[0]) - job.fact_end
        assert len(job.alt) == len(job.base_targets)
    assert matched >= 10


@pytest.mark.parametrize(("extra", "needle"), [
    (["--haystack", "default", "--model", "SYNTH"], "reads the synth language"),
    (["--haystack", "BINARY"], "is binary"),
    (["--haystack", "MISSING"], "does not exist"),
    (["--haystack", "default", "--language", "SYNTH"], "--language names a synth language"),
    (["--haystack-documents", "paragraph"], "give --haystack"),
    (["--haystack", "default", "--haystack", "BINARY"], "stands alone"),
    (["--haystack", "default-all", "--haystack", "default"], "stands alone"),
    (["--haystack", "default-all", "--haystack-documents", "paragraph"], "not default-all"),
    (["--tokenizer", "MISSING"], "holds no tokenizer.json"),
    (["--tokenizer", ""], "an empty value"),
    (["--distance", "5-6"], "none of the 24 pairs drawn keeps its base and variant aligned"),
    (["--tokenizer", "OTHER"], "states its own"),
])  # fmt: skip
def test_bad_text_input_is_one_line_exit_2_and_leaves_no_run_dir(model, tmp_path, extra, needle):
    synth_model = str(tiny_checkpoint(tmp_path / "synth"))
    (tmp_path / "bin.txt").write_bytes(b"a\x00b")
    other = tmp_path / "other"  # another tokenizer than the one the model states
    other.mkdir()
    data = {**small_bpe().to_json(), "truncation": None, "padding": {"strategy": "BatchLongest",
            "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0, "pad_type_id": 0,
            "pad_token": "<pad>"}}  # fmt: skip
    (other / "tokenizer.json").write_text(json.dumps(data))
    subs = {
        "SYNTH": synth_model,
        "BINARY": str(tmp_path / "bin.txt"),
        "MISSING": str(tmp_path / "nope"),
        "OTHER": str(other),
    }
    args = [subs.get(a, a) for a in extra]
    if "--model" not in args:
        args += ["--model", model]
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["run", "fact-swap", *args, "--out", str(out), "--quiet"])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], r.stderr
    assert not out.exists() or not any(out.rglob("run.json"))


def test_a_probe_without_real_text_refuses_the_haystack_and_goes_through_the_bridge(
    model, tmp_path
):
    r = CliRunner().invoke(cli, ["run", "fact-update", "--model", model, "--haystack", "default",
                                 "--out", str(tmp_path), "--quiet"])  # fmt: skip
    assert r.exit_code == 2 and "does not write real text" in r.stderr
    r = invoke(["run", "fact-rebind", "--model", model, "--distance", "60-120",
                "--out", str(tmp_path), *FAST])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["n_pairs"] + doc["metrics"]["unmatched_pairs"] == 3 * len(doc["bins"])


def test_diagnose_on_real_text_runs_the_probes_that_write_it_and_names_the_others(model, tmp_path):
    r = invoke(["diagnose", "--model", model, "--haystack", "default", "--n", "2",
                "--out", str(tmp_path), "--quiet", "--json"])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    effects = {row["effect"] for row in doc["rows"]}
    assert {"boundary repair", "retrieval within the horizon", "topic adaptation",
            "retrieval: keyed lookup", "retrieval: copy"} <= effects  # fmt: skip
    assert "fact-update (it does not write real text)" in doc["skipped"]


def test_cross_doc_leaves_out_padding_the_haystack_cannot_hold_and_says_why(model, tmp_path):
    """On a haystack of 200 words, B padded past A's reach (over 500 tokens at --mem
        256) beside gaps as long does not fit. Auto leaves the padding out (the check says why) and
        cuts the gap bins where the haystack ends; asked for (--check-tail on), the padding is kept
    and the auto gaps are cut shorter, and given gaps that cannot hold it are refused in one line."""
    from pathlib import Path

    words = Path(__file__).resolve().parents[1].joinpath("docs", "design.md").read_text().split()
    hay = tmp_path / "hay.txt"
    hay.write_text(" ".join(words[:200]))
    args = ["run", "cross-doc", "--model", model, "--haystack", str(hay), "--mem", "256"]
    r = invoke([*args, "--out", str(tmp_path / "auto"), *FAST])
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    check = doc["checks"]["beyond_reach_zero"]
    assert check["status"] == "not applicable" and "does not fit the haystack" in check["why"]
    assert doc["checks"]["reset_leakage_zero"]["status"] == "passed"
    on = invoke([*args, "--check-tail", "on", "--out", str(tmp_path / "on"), *FAST])
    assert on.exit_code == 0, on.stderr  # the padding kept, the gaps cut shorter to make room
    shorter = json.loads(on.stdout)
    assert shorter["checks"]["beyond_reach_zero"]["status"] == "passed"
    assert shorter["bins"][-1]["distance_hi"] < doc["bins"][-1]["distance_hi"]
    given = invoke([*args, "--check-tail", "on", "--distance", "2-8,500-600", "--out",
                    str(tmp_path / "given"), *FAST])  # fmt: skip
    assert given.exit_code == 2 and "--check-tail off" in given.stderr, given.stderr
    assert len(given.stderr.strip().splitlines()) == 1 and not (tmp_path / "given").exists()


def test_auto_bins_cut_to_a_short_haystack_say_so(model, tmp_path):
    from pathlib import Path

    words = Path(__file__).resolve().parents[1].joinpath("docs", "design.md").read_text().split()
    hay = tmp_path / "hay.txt"
    hay.write_text(" ".join(words[:120]))
    r = invoke(["run", "fact-swap", "--model", model, "--haystack", str(hay), "--mem", "256",
                "--out", str(tmp_path / "o"), "--n", "2", "--quiet"])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("bins: "))
    assert "cut to" in line and "the haystack's" in line
    (summary,) = (tmp_path / "o").glob("fact-swap/*/*/summary.json")
    assert json.loads(summary.read_text())["metrics"]["bins_cut"] == line.removeprefix("bins: ")


@pytest.mark.parametrize(
    "probe, option, bound",
    [("long-nll", "--length", "the haystack's"), ("context-ablation", "--context", "half the haystack's")],
)  # fmt: skip
def test_a_text_longer_than_the_haystack_allows_is_refused_naming_the_haystack(
    model, tmp_path, probe, option, bound
):
    """long-nll cuts one run of the haystack (less a little room); context-ablation's replaced
    context is another document of it, so each of its texts gets half: a given length past
    either is refused in one line naming the bound, before anything is written."""
    from pathlib import Path

    words = Path(__file__).resolve().parents[1].joinpath("docs", "design.md").read_text().split()
    hay = tmp_path / "hay.txt"
    hay.write_text(" ".join(words[:300]))
    r = CliRunner().invoke(cli, ["run", probe, "--model", model, "--haystack", str(hay), option,
                                 "100000", "--out", str(tmp_path / "o"), *FAST])  # fmt: skip
    assert r.exit_code == 2 and bound in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_an_option_real_text_does_not_realise_is_refused_in_one_line_naming_it(model, tmp_path):
    """fact-delete --no-fill cuts the fact out: on real text a deleted fact is always filled."""
    r = invoke(["run", "fact-delete", "--model", model, "--haystack", "default", "--no-fill",
                "--distance", "40-60", "--out", str(tmp_path / "o"), *FAST])  # fmt: skip
    assert r.exit_code == 2, r.stderr
    assert "--no-fill cuts the fact out" in r.stderr and "drop --no-fill or --haystack" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()
