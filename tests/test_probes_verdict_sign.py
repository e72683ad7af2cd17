"""A verdict's head follows the sign of the significant effect: a probe declares which sign of Δ
its finding claims (`finding_sign`), and a run whose significant bins all have the other sign
says so (`opposite`) instead of the finding. Planted models put the effect there with either
sign (`copy` < 0: a token seen in the context gets dearer)."""

import pytest

import probes
from probes.api.paired import PairedProbe
from probes.api.registry import builtin_entries, get
from probes.stats import signed_effect


def _bin(mean, word="significant"):
    return {"delta_mean": mean, "verdict": word}


def test_signed_effect_names_the_sign_of_the_significant_bins():
    assert signed_effect([_bin(1.0), _bin(0.01, "negligible")], 1) == "significant"
    assert signed_effect([_bin(-1.0), _bin(0.01, "negligible")], 1) == "opposite"
    assert signed_effect([_bin(-1.0)], -1) == "significant"
    assert signed_effect([_bin(1.0), _bin(-1.0)], 1) == "mixed"
    assert signed_effect([_bin(-3.0, "negligible")], 1) == "negligible"
    assert signed_effect([_bin(-3.0, "inconclusive")], 1) == "inconclusive"


def test_every_paired_probe_declares_the_sign_its_finding_claims():
    for name in builtin_entries():  # the shipped probes (tests register others of their own)
        cls = get(name)
        if issubclass(cls, PairedProbe):
            assert cls.finding_sign in (1, -1), name
            assert "finding_sign" in vars(cls) and "opposite" in vars(cls), name
            assert cls.opposite != cls.finding, name


# distractor: a near miss ("deep amber") puts the answer's token in view, which the planted copy
# rewards: the answer gets cheaper (Δ < 0) with the distractors
@pytest.mark.parametrize(
    ("name", "model", "options", "finding"),
    [
        ("fact-delete", "planted:copy=-2,noise=token", {}, "the fact's presence helps the answer"),
        ("fact-swap", "planted:copy=-2,noise=token", {}, "the model reads the fact"),
        (
            "distractor",
            "planted:copy=2,noise=token",
            {"k": "1", "distance": "48-64"},
            "distractors interfere",
        ),
    ],
)
def test_a_significant_effect_of_the_other_sign_does_not_read_as_the_finding(
    name, model, options, finding, tmp_path
):
    s = probes.run(name, model=model, out=tmp_path, progress=False, **options)
    cls = get(name)
    sig = [b for b in s.bins if b["verdict"] == "significant"]
    assert sig and all((b["delta_mean"] > 0) != (cls.finding_sign > 0) for b in sig), s.bins
    head = s.verdict.split(" — ")[0]
    assert head.startswith(f"{name}: {cls.opposite}"), s.verdict
    assert f"not that {finding}" in s.verdict


def test_the_claimed_sign_still_reads_as_the_finding(tmp_path):
    s = probes.run(
        "fact-delete", model="planted:copy=2,noise=token", n=12, out=tmp_path, progress=False
    )
    assert s.verdict.startswith("fact-delete: the fact's presence helps the answer — "), s.verdict


def test_a_significant_loss_at_segment_starts_is_not_called_inconclusive(tmp_path):
    # boundary_nats < 0: a token that sees little is cheaper, so the memory costs segment starts
    model = "planted:boundary_nats=-1,noise=token"
    s = probes.run("boundary", model=model, out=tmp_path, progress=False)
    assert s.metrics["gain"]["first"]["mean"] < 0
    assert s.verdict.startswith("boundary: the memory hurts segment starts"), s.verdict


def test_quick_says_too_few_pairs_where_no_bin_could_be_significant(tmp_path):
    """--quick's 6 pairs per bin reach a Holm p of 0.125 at best: its head says the sample
    cannot decide rather than 'no evidence' beside an interval far from 0."""
    from probes import run

    summary = run("fact-swap", quick=True, out=str(tmp_path), progress=False)
    assert "too few pairs to decide whether the model reads the fact" in summary.verdict
    assert all(b["can_be_significant"] is False for b in summary.bins if b["n"])
