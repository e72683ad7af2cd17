"""probes/api is the bottom of probes: it imports from the rest of the project only the leaf
modules and two torch-free helpers, so a probe or model author's imports pull in no run
machinery, no adapter and no torch. Read with `ast` (function-local imports included)."""

import ast
from pathlib import Path

import probes.api

API = Path(probes.api.__file__).resolve().parent
ALLOWED = {"probes.limits", "probes.stats", "synth.rng", "txl.files"}
PROJECT = ("probes", "synth", "txl")


def imports_above(source: str) -> set[str]:
    """The project modules `source` imports that api may not (`from M import x`: M.x when that
    is allowed, as `from synth import rng` names synth.rng, else M)."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            named = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            named = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in ALLOWED else node.module
                for a in node.names
            ]
        else:
            continue
        for name in named:
            inside = name == "probes.api" or name.startswith("probes.api.")
            if name.split(".")[0] in PROJECT and not inside and name not in ALLOWED:
                out.add(name)
    return out


def test_api_imports_only_leaf_modules():
    found = {p.name: imports_above(p.read_text()) for p in sorted(API.glob("*.py"))}
    assert not {k: v for k, v in found.items() if v}


def test_an_upward_import_is_caught():
    code = "from probes.framework import runner\nimport torch\nfrom synth import rng\n"
    assert imports_above(code) == {"probes.framework"}
    assert imports_above("def f():\n    from probes.adapters.txl import load\n")
