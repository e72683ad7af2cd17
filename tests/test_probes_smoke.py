"""Every probe of the library runs its synth smoke configuration (`Probe.smoke["synth"]`, read
from the registry, so a probe added to the library is run here without touching this file) on a
tiny Transformer-XL: the run completes, every self-check it declares is run, and none fails.
The haystack and bridged configurations run in tests/test_text_probes.py and
tests/test_adapters_hf_bridge.py."""

import probe_smoke
import pytest

import probes
from probes.api import registry
from probes.testing import tiny_checkpoint


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny checkpoint, and for a probe of a model group its no-memory sibling beside it."""
    root = tmp_path_factory.mktemp("m")
    return (
        str(tiny_checkpoint(root / "tiny", mem_len=8, tgt_len=8)),
        str(tiny_checkpoint(root / "tiny-mem0", mem_len=0, tgt_len=8, seed=1)),
    )


def test_every_probe_of_the_library_declares_synth_text():
    """A probe that wrote no synth text would be run by no test here: none does."""
    assert probe_smoke.in_mode("synth") == probe_smoke.names()


@pytest.mark.parametrize("name", probe_smoke.in_mode("synth"))
def test_each_probe_runs_its_synth_smoke_configuration_and_passes_its_checks(name, tiny, tmp_path):
    cls = registry.get(name)
    model = list(tiny) if cls.model_group else tiny[0]
    s = probes.run(
        name, model=model, quick=True, out=tmp_path, progress=False, threads=1,
        **probe_smoke.options(name, "synth"),
    )  # fmt: skip
    assert (tmp_path / name).is_dir() and s.run_dir
    for check in cls.self_checks:  # every check it declares is run
        assert check in s.checks, check
    assert all(c["status"] != "failed" for c in s.checks.values()), s.checks
    assert s.passed, s.verdict
