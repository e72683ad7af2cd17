"""Every capability the code looks for on a model is documented in probes/api/model.py: a model
author reads that one module to learn what a LossModel may offer. The code is read with `ast`
for `getattr(<model>, "name")` / `hasattr(<model>, "name")`, and for fields read off its
`info` (`getattr(<model>.info, "name")`), which must be ModelInfo's."""

import ast
import dataclasses
import re
from pathlib import Path

import probes.api.model as model_module
from probes.api.model import ModelInfo

PROBES = Path(model_module.__file__).resolve().parent.parent
# How probes/ names a LossModel where it probes one for a capability (ctx.model, self.model, lm…).
MODEL_NAMES = {"model", "lm", "m", "source"}
# The model side: adapters and training read their own library's objects (a transformers model,
# a torch module), not a LossModel's capabilities.
MODEL_SIDE = {"adapters", "training"}


def _name(expr: ast.expr) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


def capabilities_read(source: str) -> set[tuple[str, str]]:
    """("model", name) for each capability probed on a model, ("info", name) for each field
    read off its info, in the code `source`."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            continue
        target, name = node.args[0], node.args[1].value
        if _name(target) in MODEL_NAMES:
            found.add(("model", name))
        elif isinstance(target, ast.Attribute) and target.attr == "info":
            if _name(target.value) in MODEL_NAMES:
                found.add(("info", name))
    return found


def documented() -> set[str]:
    """The members model.py's docstring lists (`- \\`name…`)."""
    return set(re.findall(r"^- `(\w+)", model_module.__doc__, flags=re.M))


def undocumented(found: set[tuple[str, str]]) -> set[str]:
    fields = {f.name for f in dataclasses.fields(ModelInfo)}
    known = {"model": documented(), "info": fields}
    return {f"{kind}.{name}" for kind, name in found if name not in known[kind]}


def test_every_capability_read_off_a_model_is_documented_in_api_model():
    found: dict[str, set] = {}
    for path in sorted(PROBES.rglob("*.py")):
        if path.relative_to(PROBES).parts[0] in MODEL_SIDE:
            continue
        for item in undocumented(capabilities_read(path.read_text())):
            found.setdefault(item, set()).add(str(path.relative_to(PROBES.parent)))
    assert not found, f"read off a model but not documented in probes/api/model.py: {found}"


def test_the_scan_sees_the_capabilities_the_runner_and_probes_use():
    seen = set()
    for path in PROBES.rglob("*.py"):
        if path.relative_to(PROBES).parts[0] not in MODEL_SIDE:
            seen |= {n for kind, n in capabilities_read(path.read_text()) if kind == "model"}
    assert {"check_geometry", "max_row_length", "evaluator", "special_tokens"} <= seen
    assert {"tokenizer_origin", "score_shared", "score_window"} <= seen


def test_an_undocumented_capability_is_caught():
    code = (
        "def run(ctx, lm):\n"
        "    if hasattr(ctx.model, 'score_window'):\n"
        "        getattr(self.model, 'secret_power', None)\n"
        "    return getattr(lm.info, 'colour', None), getattr(lm.info, 'dtype', None)\n"
    )
    assert undocumented(capabilities_read(code)) == {"model.secret_power", "info.colour"}
