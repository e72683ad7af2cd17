"""The arrows of docs/design.md ("The parts and their arrows"), held on every import the code
makes — module-level and function-local alike, and a module named as a string for a later
`importlib` import (`"probes.adapters.kinds"`, `f"probes.library.{stem}"`, `"module:function"`)
— read with `ast` (nothing is imported):

- each part imports only the parts below it (ALLOWED), so no import runs upward and the parts
  form no cycle;
- synth imports the standard library, numpy and itself, and `tokenizers` only inside
  functions; txl imports no model library;
- no module imports a private name (`_x`) or a private module of another module's;
- inside probes, torch and transformers are imported only by the adapters, training, the test
  helpers and the process-group calls of one run across processes;
- a function-local import of the project's own modules says why it is local (`# lazy: …`:
  it keeps `probe --help` or a torch-free path light). A local import that only dodged a cycle
  has nothing to say there, and the arrows above leave no cycle to dodge. The CLI, the top of
  the arrows, imports each command's machinery inside the command and says so once.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOPS = ("probes", "synth", "txl")
MODEL_LIBRARIES = ("torch", "transformers", "accelerate", "gguf")
SYNTH_LIBRARIES = ("synth", "numpy")  # beside the standard library (and tokenizers, lazily)

BASE = {"txl", "probes.limits", "probes.stats", "probes.signed_rank", "probes._version"}
# What each part may import: parts, or single modules of one (`synth.rng`). The rows read bottom
# up: api (the contract), engine (rows, scoring, fact-pair planning), texts (what a run writes its
# texts in), library (the probes), framework (the run machinery), suite (diagnose), rerun; report
# renders results and imports none of them; cli and paper sit on top.
ALLOWED: dict[str, set[str]] = {
    "synth": set(),
    "txl": set(),
    "probes.signed_rank": set(),
    "probes.stats": {"probes.signed_rank"},
    "probes.limits": {"txl"},
    "probes._version": set(),
    "probes.api": {
        "probes.limits",
        "probes.stats",
        "synth.rng",
        "synth.generate",
        "txl.files",
        "txl.process_rank",
    },
    "probes.report": BASE,
    "probes.engine": BASE | {"probes.api", "probes.report", "synth"},
    "probes.texts": BASE | {"probes.api", "probes.engine", "synth"},
    "probes.library": BASE
    | {"probes.api", "probes.engine", "probes.texts", "probes.report", "synth"},
    "probes.adapters": BASE | {"probes.api"},
    "probes.testing": BASE | {"probes.api", "probes.adapters", "synth"},
    "probes.framework": BASE
    | {"probes.api", "probes.engine", "probes.texts", "probes.adapters", "synth"},
    "probes.suite": BASE | {"probes.api", "probes.engine", "probes.framework", "synth"},
    "probes.rerun": BASE | {"probes.api", "probes.framework", "probes.suite", "synth"},
    "probes.training": BASE | {"probes.api", "probes.texts", "probes.adapters", "synth"},
    "probes": BASE | {"probes.api", "probes.framework"},
}
# Parts a part may name in a string (for an `importlib` import later) but not import: the
# package's own __init__ names the built-in probes, model kinds and paired engine to the contract.
NAMED_ONLY: dict[str, set[str]] = {"probes": {"probes.library", "probes.adapters", "probes.engine"}}
ALLOWED["probes.cli"] = (
    BASE
    | {"probes", "synth"}
    | {p for p in ALLOWED if p.startswith("probes.") and p != "probes.paper"}
)
ALLOWED["probes.paper"] = ALLOWED["probes.cli"] | {"probes.cli", "probes.library"}
# Where a model library may be imported inside probes.
TORCH_PARTS = {"probes.adapters", "probes.training", "probes.testing"}


@dataclass(frozen=True)
class Import:
    file: str
    line: int
    source: str  # the importing module
    target: str  # the imported module (a name imported from a package counts as its submodule)
    local: bool  # inside a function
    lazy: bool  # the line says `# lazy:`
    type_only: bool  # under `if TYPE_CHECKING:`
    names: tuple[str, ...] = ()  # what `from target import …` takes (empty: the module itself)
    named: bool = False  # a module written as a string, not an import statement


# a project module written as a string, for an import made later by name (`importlib`)
NAMED_MODULE = re.compile(r"(?:probes|synth|txl)(?:\.[A-Za-z_][A-Za-z_0-9]*)*")


def named_modules(tree: ast.Module) -> list[tuple[ast.AST, str]]:
    """Strings (docstrings aside) that name a project module: the whole string, its part
    before `:` (`module:function`), or an f-string's leading text (`f"probes.library.{x}"`)."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    in_fstring = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            head = node.values[0] if node.values else None
            if isinstance(head, ast.Constant) and isinstance(head.value, str):
                text = head.value.rstrip(".")
                if NAMED_MODULE.fullmatch(text) and "." in text:
                    out.append((node, text))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in docstrings or id(node) in in_fstring:
                continue
            text = node.value.split(":", 1)[0] if ":" in node.value else node.value
            if NAMED_MODULE.fullmatch(text) and "." in text:
                out.append((node, text))
    return out


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(text: str, module: str, is_package: bool, file: str = "") -> list[Import]:
    tree = ast.parse(text)
    lines = text.splitlines()
    local, type_only = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            local.update(id(n) for n in ast.walk(node))
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only.update(id(n) for n in ast.walk(node))
    out = []

    def add(node: ast.AST, target: str, lazy: bool, names: tuple[str, ...] = (), named=False):
        local_, type_only_ = id(node) in local, id(node) in type_only
        out.append(
            Import(file, node.lineno, module, target, local_, lazy, type_only_, names, named)
        )

    for node, target in named_modules(tree):
        add(node, target, True, named=True)
    for node in ast.walk(tree):
        names: tuple[str, ...] = ()
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join([*package, base] if base else package)
            targets = [f"{base}.{a.name}" for a in node.names] if base in TOPS else [base]
            names = tuple(a.name for a in node.names)
        else:
            continue
        lazy = "# lazy:" in " ".join(lines[node.lineno - 1 : node.end_lineno])
        for target in targets:
            add(node, target, lazy, names)
    return out


def part(module: str) -> str:
    """The part of the arrows a module belongs to: synth, txl, or probes' sub-package/module."""
    names = module.split(".")
    return names[0] if names[0] != "probes" or len(names) == 1 else ".".join(names[:2])


def project_imports(root: Path = ROOT) -> list[Import]:
    out = []
    for top in TOPS:
        for path in sorted((root / top).rglob("*.py")):
            rel = str(path.relative_to(root))
            out += imports_of(
                path.read_text(), module_name(path, root), path.name == "__init__.py", rel
            )
    return out


def allowed(source_part: str, target: str) -> bool:
    entries = ALLOWED[source_part]
    return part(target) in entries or any(
        target == e or target.startswith(e + ".") for e in entries
    )


def upward(imports: list[Import]) -> list[str]:
    bad = []
    for i in imports:
        if i.target.split(".")[0] not in TOPS or i.type_only:
            continue
        a, b = part(i.source), part(i.target)
        if a == b:
            continue
        if a not in ALLOWED:
            bad.append(f"{i.file}:{i.line} {a} is not a part docs/design.md draws")
        elif not allowed(a, i.target) and not (i.named and b in NAMED_ONLY.get(a, ())):
            bad.append(f"{i.file}:{i.line} {a} imports {i.target}")
    return bad


def unmarked_local(imports: list[Import]) -> list[str]:
    """The CLI is exempt as a whole: it is the top of the arrows (nothing below imports it, so
    none of its local imports can dodge a cycle), and every command imports its machinery when
    it runs, as probes/cli/__init__.py says once."""
    return [
        f"{i.file}:{i.line} {i.source} imports {i.target} inside a function without `# lazy:`"
        for i in imports
        if i.local
        and not i.lazy
        and i.target.split(".")[0] in TOPS
        and part(i.source) != "probes.cli"
    ]


def model_libraries(imports: list[Import]) -> list[str]:
    bad = []
    for i in imports:
        lib = i.target.split(".")[0]
        a = part(i.source)
        if a == "synth" and not (
            lib in SYNTH_LIBRARIES
            or lib in sys.stdlib_module_names
            or (lib == "tokenizers" and i.local)
        ):
            bad.append(f"{i.file}:{i.line} synth imports {i.target}")
        if a == "txl" and lib in MODEL_LIBRARIES[1:]:
            bad.append(f"{i.file}:{i.line} txl imports {i.target}")
        if a.startswith("probes") and lib in MODEL_LIBRARIES and a not in TORCH_PARTS:
            if not (i.local and i.lazy and i.source == "txl.process_rank"):
                bad.append(f"{i.file}:{i.line} {a} imports {i.target}")
    return bad


def private_names(imports: list[Import]) -> list[str]:
    """Imports of another module's private names or of a private module of another package
    (a package's own `_x` modules are its business: `synth.edits._ops` from `synth.edits.x`)."""
    bad = []
    for i in imports:
        if i.target.split(".")[0] not in TOPS:
            continue
        private = [n for n in i.names if n.startswith("_") and not n.startswith("__")]
        inside = i.source == i.target or i.source.startswith(i.target + ".")  # its own package
        if private and not inside:
            bad.append(f"{i.file}:{i.line} {i.source} imports {', '.join(private)} of {i.target}")
        parts = i.target.split(".")
        for k, name in enumerate(parts):
            if name.startswith("_") and not name.startswith("__"):
                owner = ".".join(parts[:k])
                if not (i.source == owner or i.source.startswith(owner + ".")):
                    bad.append(f"{i.file}:{i.line} {i.source} imports the private {i.target}")
                break
    return bad


@pytest.fixture(scope="module")
def everything() -> list[Import]:
    return project_imports()


def test_no_import_runs_upward(everything):
    assert upward(everything) == []


def test_every_function_local_import_of_the_project_says_why(everything):
    assert unmarked_local(everything) == []


def test_model_libraries_stay_in_their_parts(everything):
    assert model_libraries(everything) == []


def test_no_module_imports_another_modules_private_names(everything):
    assert private_names(everything) == []


def test_the_rules_catch_what_they_forbid():
    src = (
        "from probes.framework import runner\n"
        "def f():\n"
        "    from probes.engine import rows\n"
        "    from probes.engine import paired  # lazy: numpy\n"
        "    import torch\n"
    )
    found = imports_of(src, "probes.report.tables", False, "x.py")
    assert upward(found) == [
        "x.py:1 probes.report imports probes.framework",
        "x.py:3 probes.report imports probes.engine",
        "x.py:4 probes.report imports probes.engine",
    ]
    assert unmarked_local(found) == [
        "x.py:3 probes.report.tables imports probes.engine inside a function without `# lazy:`"
    ]
    assert model_libraries(found) == ["x.py:5 probes.report imports torch"]
    api = imports_of("from synth import rng, edits\n", "probes.api.probe_base", False, "a.py")
    assert upward(api) == ["a.py:1 probes.api imports synth.edits"]
    tok = imports_of("import tokenizers\n", "synth.text.tokenizer", False, "t.py")
    assert model_libraries(tok) == ["t.py:1 synth imports tokenizers"]
    assert model_libraries(imports_of("import scipy.special\nimport rich\nimport numpy, re\n",
                                      "synth.rng", False, "r.py")) == [
        "r.py:1 synth imports scipy.special",
        "r.py:2 synth imports rich",
    ]  # fmt: skip
    by_name = (
        'KINDS = "probes.adapters.kinds"\n'
        "def f(stem):\n"
        '    importlib.import_module(f"probes.library.{stem}")\n'
        '    return "probes.engine.paired:execute", "see docs/design.md", "probes"\n'
    )
    top = 'import probes.adapters.txl\nKINDS = "probes.adapters.kinds"\n'
    assert upward(imports_of(top, "probes", True, "i.py")) == [
        "i.py:1 probes imports probes.adapters.txl"
    ]
    assert upward(imports_of(by_name, "probes.api.kinds", False, "k.py")) == [
        "k.py:1 probes.api imports probes.adapters.kinds",
        "k.py:3 probes.api imports probes.library",
        "k.py:4 probes.api imports probes.engine.paired",
    ]
    private = (
        "from synth.text.facts import draw_values, _example\n"
        "from synth.edits._ops import doc_topic\n"
        "from synth.text._inner import x\n"
    )
    own = "from synth.edits import _ops\nfrom . import _ops\nfrom synth.edits._ops import x\n"
    assert private_names(imports_of(own, "synth.edits.replace", False, "o.py")) == []
    assert private_names(imports_of(private, "synth.text.contexts", False, "p.py")) == [
        "p.py:1 synth.text.contexts imports _example of synth.text.facts",
        "p.py:2 synth.text.contexts imports the private synth.edits._ops",
    ]
    command = "def run():\n    from probes.framework import runner\n"  # the CLI says why once
    assert unmarked_local(imports_of(command, "probes.cli.run", False, "c.py")) == []
    assert unmarked_local(imports_of(command, "probes.suite.one", False, "s.py")) == [
        "s.py:2 probes.suite.one imports probes.framework inside a function without `# lazy:`"
    ]


def test_the_allowed_arrows_form_no_cycle():
    """A part that may import another (directly or through others) is never imported by it."""
    parts = {p for p in ALLOWED}

    def below(p: str, seen: frozenset = frozenset()) -> set[str]:
        assert p not in seen, f"the arrows loop through {p}"
        out = set()
        for e in ALLOWED.get(p, ()):
            q = e if e in parts else part(e)
            if q != p:
                out |= {q} | below(q, seen | {p})
        return out

    for p in parts:
        assert p not in below(p), p


def test_every_part_on_disk_is_drawn(everything):
    parts = {part(i.source) for i in everything}
    assert parts <= set(ALLOWED), sorted(parts - set(ALLOWED))
