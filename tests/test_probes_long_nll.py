"""long-nll: runs with the same seed and length score the same texts under any cache, so
policies compare text by text; a band's NLL is the mean over texts of its tokens' mean; on a
planted model the cost of a cut context appears exactly where fewer tokens are visible; bad
sizes are refused before anything is written."""

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import probes
from probes.adapters.planted import PlantedModel
from probes.cli.main import cli

torch.set_num_threads(1)


def arrays(summary, name):
    with np.load(f"{summary.run_dir}/{name}", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def test_the_same_seed_and_length_score_the_same_texts_under_any_cache(tmp_path):
    runs = [probes.run("long-nll", model="default", mem=m, length=300, n=2, out=tmp_path,
                       progress=False) for m in (0, 64)]  # fmt: skip
    a, b = (arrays(s, "texts.npz") for s in runs)
    assert a["tokens"].shape == (2, 300) and np.array_equal(a["tokens"], b["tokens"])
    na, nb = (arrays(s, "tokens.npz")["nll"] for s in runs)
    assert not np.array_equal(na, nb)  # the memory changes what the later tokens see
    assert runs[1].metrics["nll_after_fill"]["mean"] < runs[0].metrics["nll_after_fill"]["mean"]


def test_a_bands_nll_is_the_mean_over_texts_of_its_tokens_mean(tmp_path):
    s = probes.run("long-nll", model="default", mem=32, length=400, stride=3, n=3, out=tmp_path,
                   progress=False)  # fmt: skip
    t = arrays(s, "tokens.npz")
    assert (t["position"] % 3 == 0).all() and t["position"].min() == 3
    for b in s.bins:
        inside = (t["position"] >= b["band_lo"]) & (t["position"] <= b["band_hi"])
        per_text = [t["nll"][inside & (t["text"] == i)].mean() for i in range(3)]
        assert b["nll"] == pytest.approx(np.mean(per_text), abs=1e-12)
    covered = sum(b["band_hi"] - b["band_lo"] + 1 for b in s.bins)
    assert covered == 399 and s.bins[0]["band_lo"] == 1  # the bands partition positions 1 … 399


def test_a_cut_context_costs_exactly_where_fewer_tokens_are_visible():
    """Planted: +2, +1.5, +1, +0.5 nats when 1, 2, 3, 4 tokens are visible, the rest keyed to
    the target only. Without memory every segment start pays it; with a memory of 16 only the
    text's first tokens do."""
    from probes.api import params as pm
    from probes.api.model import horizon
    from probes.api.probe_base import RunContext
    from probes.library.long_nll import LongNLL
    from probes.texts.synth_ids import SynthTexts
    from synth.language import Language

    curves = {}
    for mem in (0, 16):
        m = PlantedModel(tgt_len=16, mem_len=mem, noise="token", boundary_nats=2.0, boundary_len=4)
        g = m.default_geometry()
        ctx = RunContext(m, g, horizon(m, g), SynthTexts(Language.default()), n=2, seed=0)
        p = LongNLL(pm.build(LongNLL.Params, {"length": 160}))
        p.plan(ctx)
        curves[mem] = p.execute(ctx).arrays["nll"].reshape(2, -1)
    position = np.arange(1, 160)
    ramp = np.array([2.0, 1.5, 1.0, 0.5] + [0.0] * 12)[(position - 1) % 16]
    cost = curves[0] - curves[16]
    np.testing.assert_allclose(cost[:, position >= 16], np.tile(ramp[position >= 16], (2, 1)))
    assert (cost[:, position < 16] == 0).all()


@pytest.mark.parametrize(("args", "says"), [
    (["--length", "5", "--stride", "4"], "leave nothing to score"),
    (["--length", "1000001"], "--length"),
    (["--mem", "0", "--tgt-len", "1"], "leaves no band"),
    (["--mem", "300", "--length", "320"], "end before the cache first cuts"),
])  # fmt: skip
def test_sizes_it_cannot_use_are_refused_in_one_line_before_any_directory(tmp_path, args, says):
    r = CliRunner().invoke(cli, ["run", "long-nll", "--model", "default", *args, "--out",
                                 str(tmp_path / "out"), "--quiet"])  # fmt: skip
    assert r.exit_code == 2, r.output
    assert len(r.stderr.strip().splitlines()) == 1 and says in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_the_cli_writes_its_bands_and_curve(tmp_path):
    r = CliRunner().invoke(cli, ["run", "long-nll", "--model", "default", "--mem", "32",
                                 "--length", "256", "--n", "2", "--out", str(tmp_path),
                                 "--json", "--quiet"])  # fmt: skip
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [b["positions"] for b in doc["bins"]][:2] == ["1–95", "96–191"]
    assert doc["metrics"]["policy"]["mem_len"] == 32 and doc["metrics"]["length"] == 256
    assert doc["metrics"]["fill_from"] == 65  # the segment starting at 64 is the first past mem
    assert (tmp_path / "long-nll").exists() and "nll_by_position.png" in doc["plots"]
