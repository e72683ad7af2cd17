"""Model kinds (probes.api.kinds): what a `--model` is decides its loader and the options it
takes; registering a kind imports no torch, and a kind registered from outside the package is
detected and built like a built-in one."""

import subprocess
import sys
from pathlib import Path

import pytest

from probes.api import kinds
from probes.api.probe_base import ProbeInputError
from probes.framework.models import ModelCache, model_source


@pytest.fixture
def registry(monkeypatch):
    """The registered kinds, restored after the test."""
    kinds.kinds()
    monkeypatch.setattr(kinds, "_KINDS", dict(kinds._KINDS))
    return kinds


class Toy:
    def __init__(self, spec):
        self.spec = spec


def is_toy(path) -> bool:
    return Path(path, "toy.txt").is_file()


def load_toy(path, **options):
    return ("toy", Path(path).name, options)


def test_the_builtin_kinds_and_the_order_detection_tries_them():
    names = [k.name for k in kinds.kinds()]
    assert names == ["planted", "gguf", "transformers", "txl"]
    assert [k.name for k in kinds.kinds() if k.fallback] == ["txl"]
    assert kinds.get("planted").builds_from_spec
    assert [k.name for k in kinds.by_prefix("hf:some/dir")[1]] == ["gguf", "transformers"]
    assert kinds.by_prefix("some/dir") is None


def test_each_kind_takes_only_its_own_options():
    txl, hf = kinds.get("txl"), kinds.get("transformers")
    assert txl.accepts("cache") and not txl.accepts("sinks")
    assert hf.accepts("sinks") and hf.accepts("cache_positions") and not hf.accepts("cache")
    assert txl.refusal({"sinks": 0}, Path("ck")) == (
        "--sinks applies to a transformers model's --evaluator sinks, not to the "
        "Transformer-XL checkpoint 'ck'"
    )
    assert txl.refusal({"sinks": None, "cache_positions": False, "cache": "kv"}, Path("c")) is None
    assert "not to the gguf model 'm.gguf'" in kinds.get("gguf").refusal({"cache": "kv"}, "m.gguf")


def test_registering_and_detecting_a_kind_imports_no_torch():
    code = (
        "import sys; from pathlib import Path; from probes.api import kinds; "
        "assert kinds.detect(Path('probes/models/default')).name == 'txl'; "
        "bad = [m for m in ('torch', 'transformers', 'numpy') if m in sys.modules]; "
        "assert not bad, bad"
    )
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_a_kind_registered_from_outside_is_detected_built_and_loaded(registry, tmp_path):
    me = __name__
    registry.register_model_kind("toy-spec", prefix="toy:", load=f"{me}:Toy")
    registry.register_model_kind(
        "toy", detect=f"{me}:is_toy", load=f"{me}:load_toy", refuses={"cache": "no {kind}"}
    )
    assert model_source("toy:a=1").spec == "toy:a=1"  # built from its spec, no path
    (tmp_path / "toy.txt").write_text("")
    assert registry.detect(tmp_path).name == "toy"
    lm = registry.detect(tmp_path).load_model(
        tmp_path, evaluator=None, device="cpu", dtype="float32", cache=None, sinks=3
    )
    assert lm == ("toy", tmp_path.name, {"device": "cpu", "dtype": "float32", "sinks": 3})
    with pytest.raises(ProbeInputError, match=r"^no toy$"):
        ModelCache().get(tmp_path, evaluator=None, device="cpu", dtype="float32", cache="kv")


def test_a_kind_registers_once_and_names_only_known_options(registry):
    with pytest.raises(ValueError, match="registered twice"):
        registry.register_model_kind("txl", load="m:f")
    with pytest.raises(ValueError, match="unknown options"):
        registry.register_model_kind("x", load="m:f", refuses={"colour": "no"})
    with pytest.raises(ValueError, match="fallback kind is registered already"):
        registry.register_model_kind("y", load="m:f", fallback=True)
