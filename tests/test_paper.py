"""The paper tables' own arithmetic (probes/paper): what `nox -s paper` computes from the
measured losses. The measurements themselves are the probes' and the adapters' (tested there)."""

import subprocess
import sys

import numpy as np
import pytest

from probes.paper import claims, lengths, local, published, render
from probes.paper.group import GROUP


def test_attn_len_is_the_shortest_length_reaching_the_best_and_censored_at_the_edge():
    f = lengths.figures(np.array([3.0, 2.0, 1.5, 1.5, 1.7]), [64, 128, 192, 256, 320], 128)
    assert (f["nll_init"], f["nll_best"], f["attn_len"]) == (2.0, 1.5, 192)
    assert not f["attn_len_censored"] and f["nll_max_len"] == 1.7
    edge = lengths.figures(np.array([3.0, 2.0, 1.0]), [64, 128, 192], 64)
    assert edge["attn_len"] == 192 and edge["attn_len_censored"]


@pytest.mark.parametrize(
    ("support", "word"),
    [(1.0, "holds"), (0.95, "holds"), (0.5, "inconclusive"), (0.05, "does not hold")],
)
def test_claim_words_follow_the_bootstrap_support(support, word):
    n = 100
    draws = [True] * round(support * n) + [False] * (n - round(support * n))
    c = claims.judge("x", bool, True, draws, "")
    assert c["support"] == pytest.approx(support) and c["result"] == word


def test_resamples_are_paired_so_a_constant_gap_is_certain():
    rng = np.random.default_rng(0)
    a = rng.normal(2.0, 0.5, size=(3, 12))  # 3 lengths × 12 rows, wildly different rows
    t = lengths.table(
        {"a": a, "b": a + 0.01},
        [64, 128, 192],
        {"a": 64, "b": 64},
        np.arange(12)[None, :].repeat(50, 0),
    )
    assert all(abs(d["b"]["nll_best"] - d["a"]["nll_best"] - 0.01) < 1e-12 for d in t["draws"])
    rows = np.random.default_rng(1).integers(0, 12, size=(200, 12))
    t = lengths.table({"a": a, "b": a + 0.01}, [64, 128, 192], {"a": 64, "b": 64}, rows)
    c = claims.judge(
        "a lower", lambda f: f["a"]["nll_best"] < f["b"]["nll_best"], t["point"], t["draws"], ""
    )
    assert c["result"] == "holds" and c["support"] == 1.0


def test_nll_by_length_scores_the_same_tokens_at_every_length_as_the_model_does(tmp_path):
    from probes.adapters.txl import load
    from probes.api.model import geometry
    from probes.testing import tiny_checkpoint

    lm = load(tiny_checkpoint(tmp_path / "m", mem_len=8, tgt_len=8))
    rng = np.random.default_rng(0)
    tokens = rng.integers(4, lm.info.vocab_size, size=(3, 97))
    docs = np.zeros_like(tokens)
    out, lens = lengths.nll_by_length(lm, tokens, docs, mems=(0, 8, 24))
    assert lens == [8, 16, 32] and out.shape == (3, 3)
    scored = np.zeros(tokens.shape, dtype=bool)
    scored[:, 32:] = True  # every length scores the tokens after the longest window
    for j, mem in enumerate((0, 8, 24)):
        r = lm.score(tokens, docs, scored, geometry(lm, mem_len=mem))
        np.testing.assert_allclose(out[j], np.nanmean(np.where(scored, r.nll, np.nan), axis=1))
    assert not np.allclose(out[0], out[2])  # a memory changes what the model sees


def test_heldout_and_local_texts_are_deterministic_and_of_the_stated_shape():
    from synth.language import Language

    lang = Language.default()
    a, da = lengths.heldout_text(lang, lang.vocab.size, rows=2, segments=3)
    b, _ = lengths.heldout_text(lang, lang.vocab.size, rows=2, segments=3)
    assert a.shape == (2, 3 * 64 + 1) and np.array_equal(a, b) and da.min() >= 0
    t, d = local.local_text(lang, rows=3, length=129)
    t2, _ = local.local_text(lang, rows=3, length=129)
    assert t.shape == (3, 129) and np.array_equal(t, t2)
    assert (t[:, 0] == lang.vocab.eod_id).all() and (d == 0).all()  # one document per row


def test_every_paper_row_the_group_names_is_published():
    for table, rows in (
        ("table6", published.TABLE6),
        ("table7", published.TABLE7),
        ("table8", published.TABLE8),
    ):
        ids = {r[0].split()[0] for r in rows}
        for m in GROUP:
            ref = getattr(m, table)
            assert ref is None or ref in ids, (m.model, table, ref)
    assert [r[0] for r in published.TABLE9] == [3800, 2800, 1800, 800]


def test_table6_renders_every_member_with_its_paper_row():
    a = np.linspace(3.0, 2.0, 3)[:, None] + np.zeros((3, 4))
    nll = {m.model: a + 0.01 * k for k, m in enumerate(GROUP)}
    t = lengths.table(
        nll, [64, 128, 192], {m.model: 64 for m in GROUP}, np.zeros((0, 4), dtype=int)
    )
    t.pop("point"), t.pop("draws")
    t["claims"] = []
    t["text"] = {"rows": 4, "tokens_per_row": 100, "scored_from": 192}
    text = render.table6(t)
    assert "6.1 Transformer-XL (128M)" in text and "27.02 / 26.77 / 500" in text
    assert text.count("\n| ") >= len(GROUP) * 2  # the figures and the NLL-by-length rows


def test_out_naming_a_file_is_refused_with_exit_2(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = subprocess.run(
        [sys.executable, "-m", "probes.paper", "--out", str(f)], capture_output=True, text=True
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "is a file" in r.stderr
