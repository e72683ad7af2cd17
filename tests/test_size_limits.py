"""Every size a user gives is checked before anything is allocated (probes.limits): each case
runs the real CLI in a child process under a 4 GiB address-space cap, so a regression fails here
instead of exhausting the machine, and must exit 2 with one line naming the limit and leave
nothing behind."""

import json
import shutil

import pytest
from capped import probe


@pytest.fixture(scope="module")
def oversized_model(tmp_path_factory):
    """The shipped default with a config.json claiming d_model 16384 × 40 layers."""
    from probes.framework.models import resolve_model_path

    d = tmp_path_factory.mktemp("big") / "model"
    shutil.copytree(resolve_model_path("default"), d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["model"].update(d_model=16384, d_head=2048, n_layer=40)
    (d / "config.json").write_text(json.dumps(cfg))
    return d


CASES = [
    (("synth", "show", "--edit", "replace", "--distance", "1000000000"), "above the limit"),
    (("synth", "show", "--edit", "replace", "--length", "1000000000"), "above the limit"),
    (("run", "fact-swap", "--mem", "1000000000000"), "--mem"),
    (("run", "fact-swap", "--tgt-len", "100000000"), "--tgt-len"),
    (("run", "fact-swap", "--clamp-len", "10000000000"), "--clamp-len"),
    (("run", "fact-swap", "--n", "1000000000000"), "--n"),
    (("run", "fact-swap", "--distance", "1000000-2000000"), "above the limit"),
    (("run", "fact-swap", "--mem", "131072", "--tgt-len", "16384"), "lower --mem or --tgt-len"),
    (("diagnose", "--mem", "1000000000000"), "--mem"),
    (("train", "--set", "model.d_model=100000000", "--steps", "1"), "make the model or the batch"),
]


@pytest.mark.parametrize(("args", "fragment"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_an_oversized_request_is_one_line_exit_2_and_writes_nothing(tmp_path, args, fragment):
    out = tmp_path / "out"
    extra = ("--out", str(out)) if args[0] in ("run", "diagnose", "train") else ()
    r = probe(*args, *extra, cwd=tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.count("\n") == 1 and fragment in r.stderr, r.stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_config_claiming_a_bigger_model_than_its_weights_is_refused_before_building(
    tmp_path, oversized_model
):
    r = probe(
        "run",
        "fact-swap",
        "--model",
        str(oversized_model),
        "--out",
        str(tmp_path / "o"),
        cwd=tmp_path,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "config.json implies" in r.stderr and not (tmp_path / "o").exists()


def test_the_row_estimate_grows_with_the_geometry_it_is_asked_about():
    from probes.adapters.txl import load
    from probes.api.model import geometry, row_bytes
    from probes.framework.models import resolve_model_path

    lm = load(resolve_model_path("default"))
    small, big = (row_bytes(lm, geometry(lm, mem_len=m)) for m in (64, 6400))
    assert 0 < small < big


def test_require_memory_compares_with_what_is_available():
    from probes.limits import LimitError, available_bytes, require_memory

    require_memory("a byte", 1, "")
    with pytest.raises(LimitError, match="needs about"):
        require_memory("everything", 10 * available_bytes(), "ask for less")
    with pytest.raises(LimitError, match="ask for less"):
        require_memory("a GPU's worth", 2**30, "ask for less", available=2**20)


MEASURE = """
import json, resource, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from text_helpers import small_bpe
tok = small_bpe(512)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
if sys.argv[2] == "haystack":
    from probes.texts.choose import HAYSTACK_BYTES_FACTOR as factor, load_world
    load_world(tok, [sys.argv[3]], None)
else:
    from probes.training.text_data import BYTES_FACTOR as factor, load_text, text_table
    load_text(text_table({"text": {"paths": [sys.argv[3]]}}), Path(tempfile.mkdtemp()) / "r", False)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"grew": peak - base, "factor": factor}))
"""


@pytest.mark.parametrize("use", ["haystack", "train"])
def test_the_memory_estimate_of_a_text_covers_what_reading_it_takes(tmp_path, use):
    """The estimate checked before a haystack or a training text is read (bytes × factor) is
    at least the peak memory measured reading and tokenizing 3 MB of prose."""
    import subprocess
    import sys

    from capped import ROOT, _cap

    from synth.text.default_corpus import default_corpus

    text = " ".join(d.text for d in default_corpus("train").documents)
    d = tmp_path / "text"
    d.mkdir()
    for i in range(3):
        (d / f"t{i}.txt").write_text((text * (10**6 // len(text) + 1))[: 10**6])
    r = subprocess.run(
        [sys.executable, "-c", MEASURE, str(ROOT / "tests"), use, str(d)],
        capture_output=True, text=True, preexec_fn=_cap, timeout=600,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    size = 3 * 10**6
    assert got["grew"] <= got["factor"] * size, (got["grew"] / size, got["factor"])
