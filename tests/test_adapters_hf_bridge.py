"""Every probe through the tokenizer bridge: a tiny random Llama-style model with a tokenizer of
its own (a byte-level BPE whose separator is its eos), probed through the CLI; and the bridge's
pairs of the edits that write over filler (evened by `probes.texts.bridged.fill`) held to the
bridge's invariants. Needs the `hf` extra and tokenizers: `nox -s hf` runs it."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
from text_helpers import FOREIGN_EOS, own_tokenizer_llama, require_tokenizers

REQUIRED = os.environ.get("TXL_REQUIRE_HF") == "1"
transformers = __import__("transformers") if REQUIRED else pytest.importorskip("transformers")
require_tokenizers()

import probe_smoke  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from probes.cli.main import cli  # noqa: E402

EOS = FOREIGN_EOS
N = 3


@pytest.fixture(scope="module")
def own(tmp_path_factory):
    return own_tokenizer_llama(tmp_path_factory.mktemp("own") / "llama", max_positions=4096)


@pytest.fixture(scope="module")
def bridge(own):
    from probes.texts.bridged import Bridge
    from synth.language import Language
    from synth.text.tokenizer import TextTokenizer

    tok = TextTokenizer(json.loads((own / "tokenizer.json").read_text()), EOS)
    return Bridge(tok, Language.default())


# every probe that declares the bridge, at its smoke options, and fact-delete --no-fill (its
# length-changing edit); a paired probe draws one pair per bin and records distances
PROBES = [
    *((name, probe_smoke.cli_args(name, "bridged")) for name in probe_smoke.in_mode("bridged")),
    ("fact-delete", ["--no-fill"]),
]


def paired(name: str) -> bool:
    from probes.api import registry
    from probes.api.paired import PairedProbe

    return issubclass(registry.get(name), PairedProbe)


@pytest.mark.parametrize(("probe", "extra"), PROBES,
                         ids=[" ".join([p, *e[:1]]) for p, e in PROBES])  # fmt: skip
def test_every_probe_runs_through_the_bridge_with_distances_in_model_tokens_and_unmatched_counted(
    own, tmp_path, probe, extra
):
    r = CliRunner().invoke(cli, ["run", probe, "--model", str(own), "--evaluator", "stream",
                                 "--mem", "64", *extra, "--out", str(tmp_path), "--n", str(N),
                                 "--quiet", "--json"], catch_exceptions=False)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    run = json.loads((Path(doc["run_dir"]) / "run.json").read_text())
    assert run["vocabulary"]["reads"] == "tokenizer" and run["vocabulary"]["separator"] == EOS
    assert "model_tokens_per_synth_token" in run["bridge"]
    assert all(c["status"] != "failed" for c in doc["checks"].values())
    unmatched = doc["metrics"]["unmatched_pairs"]
    if paired(probe):  # every pair drawn is scored or counted
        per_bin = N
        cells = {json.dumps({k: v for k, v in b.items() if k in ("distance_lo", "distance_hi",
                 "variant", "kind", "k", "depth", "tokens")}) for b in doc["bins"]}  # fmt: skip
        assert doc["n_pairs"] + unmatched == per_bin * len(cells)
        assert doc["n_pairs"] >= 2
    if paired(probe):  # distances in the model's tokens, inside their bins
        lines = (Path(doc["run_dir"]) / "samples.jsonl").read_text().splitlines()
        samples = [json.loads(x) for x in lines]
        ranges = {(b["distance_lo"], b["distance_hi"]) for b in doc["bins"]}
        if probe == "topic-shift":  # the bins hold the ordinary window's distance (even groups)
            samples = [s for s in samples if s["group"] % 2 == 0]
        assert samples
        for s in samples:
            assert any(lo <= s["distance"] <= hi for lo, hi in ranges), s["distance"]
            assert s["distance"] > s["synth_distance"]  # a synth word is one or more tokens


def test_cross_doc_through_the_bridge_keeps_b_identical_and_its_distances_in_bins(own, tmp_path):
    r = CliRunner().invoke(cli, ["run", "cross-doc", "--model", str(own), "--evaluator",
                                 "stream", "--mem", "64", "--out", str(tmp_path), "--n", str(N),
                                 "--quiet", "--json"], catch_exceptions=False)  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    distances = {b["distance_lo"]: b["distance_hi"] for b in doc["bins"]}
    assert doc["n_pairs"] + doc["metrics"]["unmatched_pairs"] == N * len(distances)
    assert doc["checks"]["reset_leakage_zero"]["status"] == "passed"  # B the same after A and F
    tokens = np.load(Path(doc["run_dir"]) / "tokens.npz")
    assert len(tokens["position"]) > 0


def _synth_pairs(bridge, edit, rng, n):
    """`n` draws of edit `edit` on the base `synth.pairs.make_pair` builds for it, evened by the
    bridge, with the answer job scored on the text that states the queried fact."""
    from probes.api.fact_pairs import answer_job
    from probes.texts.bridged import Unmatched
    from synth.pairs import make_pair

    out = []
    for _ in range(n):
        pair = make_pair(edit, bridge.lang, rng, distance=40)
        try:
            filled = bridge.fill(pair, rng, topic=pair.meta.get("new_topic"))
            job = bridge.job(answer_job(0, filled, stating(filled), {}))
        except Unmatched:
            continue
        out.append((pair, filled, job))
    return out


def stating(pair):
    """The text of `pair` that states the queried fact: the base, unless the edit inserts it."""
    return pair.base if pair.base.queries[0].fact >= 0 else pair.variant


def over_filler() -> list[str]:
    """The registered edits whose variant writes over filler (what the bridge evens)."""
    from synth import make_rng
    from synth.edits import EDITS
    from synth.language import Language
    from synth.pairs import make_pair

    names = []
    for name in EDITS:
        pair = make_pair(name, Language.default(), make_rng(0), distance=40)
        b, v = pair.base, pair.variant
        n = min(len(b), len(v))
        edited = b.tokens[:n] != v.tokens[:n]
        if (edited & (b.filler_mask()[:n] | v.filler_mask()[:n])).any():
            names.append(name)
    return names


OVER_FILLER = over_filler()


def test_the_edits_over_filler_are_found_in_the_registry():
    from synth.edits import EDITS

    assert len(OVER_FILLER) >= 4 and "replace" not in OVER_FILLER  # a value swap keeps filler
    assert set(OVER_FILLER) < set(EDITS)


@pytest.mark.parametrize("edit", OVER_FILLER)
def test_an_edit_over_filler_is_evened_to_equal_model_length_with_every_other_token_identical(
    bridge, edit
):
    from synth import make_rng

    pairs = _synth_pairs(bridge, edit, make_rng(7), 20)
    assert len(pairs) >= 15  # evening makes nearly every draw fit
    for synth, filled, job in pairs:
        b, v = job.pair.base, job.pair.variant
        assert len(b) == len(v)  # equal length in model tokens
        outside = job.pair.alignment >= 0
        assert np.array_equal(np.flatnonzero(outside), job.pair.alignment[outside])
        assert np.array_equal(b.tokens[outside], v.tokens[outside])  # nothing else moves
        assert (b.tokens[~outside] != v.tokens[~outside]).any()  # the edit is still there
        # the answer's tokens map to the same ids at the same positions
        assert np.array_equal(job.variant_targets, job.base_targets)
        assert np.array_equal(v.tokens[job.variant_targets], b.tokens[job.base_targets])
        # only filler words were redrawn, and only in the variant
        changed = np.flatnonzero(filled.variant.tokens != synth.variant.tokens)
        assert np.array_equal(filled.base.tokens, synth.base.tokens)
        assert synth.variant.filler_mask()[changed].all()
        # the distance runs from the fact's last token in the text that states it
        text = stating(job.pair)
        q = text.queries[0]
        assert job.fact_end == text.facts[q.fact].span.end - 1
        assert job.distance == int(job.base_targets[0]) - job.fact_end


def test_a_topic_shift_is_evened_with_words_of_the_new_topic(bridge):
    from synth import make_rng

    lang = bridge.lang
    for synth, filled, _ in _synth_pairs(bridge, "topic-shift", make_rng(3), 10):
        changed = np.flatnonzero(filled.variant.tokens != synth.variant.tokens)
        words = lang.filler_word(filled.variant.tokens[changed])
        topic = synth.meta["new_topic"]
        others = [t for t in range(lang.n_topics) if t != synth.meta["old_topic"]]
        assert topic in others and (words >= 0).all()


def test_an_edit_that_cannot_be_evened_is_unmatched_never_scored(bridge):
    from probes.texts.bridged import Unmatched, fill
    from synth import make_rng
    from synth.edits import delete
    from synth.generate import make_example

    lang, rng = bridge.lang, make_rng(5)
    base = make_example(lang, rng, [40], lead=40)
    pair = delete(base, rng, lang, query=0)

    class Long:  # a bridge whose fact word is longer than any filler can make up
        lang = bridge.lang
        lengths = bridge.lengths.copy()

    Long.lengths[base.tokens[base.facts[0].span.start]] = 10_000  # the fact's first word
    with pytest.raises(Unmatched, match="cannot be evened"):
        fill(Long, pair, rng)


PLUGIN = '''
from probes.api.registry import probe
from probes.library.fact_swap import FactSwap


@probe("swap-synth-only", version=1)
class SynthOnly(FactSwap):
    """fact-swap's pairs, declared without the tokenizer bridge."""

    smoke = {"synth": {}}
'''


def test_a_probe_that_does_not_declare_the_bridge_refuses_a_model_with_its_own_tokenizer(
    own, tmp_path
):
    """A probe from outside the package whose `smoke` does not declare "bridged" is refused in one
    line (exit 2) for a model reading its own tokenizer, and nothing is written."""
    plugin = tmp_path / "synth_only.py"
    plugin.write_text(PLUGIN)
    out = tmp_path / "out"
    r = CliRunner().invoke(cli, ["run", f"{plugin}:SynthOnly", "--model", str(own), "--evaluator",
                                 "stream", "--mem", "64", "--n", "2", "--out", str(out),
                                 "--quiet"])  # fmt: skip
    assert r.exit_code == 2, r.output
    assert "cannot map its texts" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not out.exists() or not any(out.rglob("run.json"))
