"""synth works where torch (and txl, probes) cannot even be imported."""

import subprocess
import sys
import textwrap

BLOCKER = textwrap.dedent(
    """
    import importlib.abc, sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "txl", "probes"):
                raise ImportError(f"{name} is blocked in this test")
            return None

    sys.meta_path.insert(0, Block())
    """
)

USE = textwrap.dedent(
    """
    import json
    import synth
    from synth import Language, TrainStream, make_pair, make_rng, make_local_example
    from synth.edits import EDITS
    lang = Language.from_json(json.loads(json.dumps(Language.default().to_json())))
    for name in EDITS:
        make_pair(name, lang, make_rng(1, "probe"), distance=40)
    make_local_example(lang, make_rng(2), 50)
    TrainStream(lang, batch_size=2, tgt_len=8).next_batch()
    assert not any(m.split(".")[0] in ("torch", "txl", "probes") for m in sys.modules)
    print("ok")
    """
)


def test_synth_imports_and_runs_without_torch():
    out = subprocess.run(
        [sys.executable, "-c", BLOCKER + USE], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


TEXT = textwrap.dedent(
    """
    import importlib, pkgutil
    import synth, synth.text
    from synth.text.corpus import read_corpus
    from synth.text.default_corpus import default_corpus
    names = [m.name for m in pkgutil.iter_modules(synth.text.__path__)]
    for name in names:  # every module of the real-text package imports without tokenizers
        importlib.import_module(f"synth.text.{name}")
    assert len(default_corpus("haystack").documents) > 0
    from synth.text.tokenizer import TokenizerError, train_bpe
    try:
        train_bpe(["some words"], 512)
    except TokenizerError as e:
        assert "pip install -e .[text]" in str(e)
    else:
        raise AssertionError("a BPE was trained without tokenizers")
    assert not any(m.split(".")[0] in ("torch", "txl", "probes", "tokenizers") for m in sys.modules)
    print("ok", len(names))
    """
)


def test_synth_and_its_real_text_package_import_without_tokenizers():
    blocker = BLOCKER.replace(
        '("torch", "txl", "probes")', '("torch", "txl", "probes", "tokenizers")'
    )
    out = subprocess.run(
        [sys.executable, "-c", blocker + USE + TEXT], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-2] == "ok" and int(out.stdout.split()[-1]) >= 10


def test_the_blocker_really_blocks():
    out = subprocess.run(
        [sys.executable, "-c", BLOCKER + "import torch"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode != 0 and "blocked" in out.stderr
