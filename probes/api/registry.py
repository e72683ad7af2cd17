"""The probe registry: names → probe classes, lazily.

A built-in probe is one file of a probe package with a class decorated by
`@probe("name", version=N)`; `add_probe_package` names such a package (`probes/__init__.py` adds
`probes/library`, so this contract names nothing above it; it names the paired engine that runs a
`PairedProbe` the same way, `set_paired_engine`). Listing never imports a probe: the
package's files are read as text and parsed with `ast` for that decorator, so `probe list` and
`probe --help` stay instant (no numpy, no torch). A probe's module is imported only when the
probe is asked for by name.

A probe from outside the package is named by `path/to/file.py:ClassName`; importing the file runs
its decorator, which registers it like a built-in one.

Each probe carries a version that changes whenever its numbers would (new pair construction,
another statistic): results record it; `probe rerun` compares across versions, naming each change.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import importlib
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from txl import files

NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")


class RegistryError(ValueError):
    """A probe name or definition that cannot be used; the message is one line."""


@dataclass(frozen=True)
class Entry:
    name: str
    version: int
    target: str  # "module:attr" (built-in) or "path/to/file.py:attr" (loaded from a file)
    summary: str  # first line of the class docstring
    diagnose: int | None = None  # its place in `probe diagnose` (None: not part of it)


# name → class, filled by the decorator when a probe module is imported.
_LOADED: dict[str, type] = {}
_BUILTIN: dict[str, Entry] | None = None
# (package, its directory) for every package of built-in probes, in the order they were added
_PACKAGES: list[tuple[str, Path]] = []


def add_probe_package(package: str, directory: Path) -> None:
    """Make the probes declared in the files of `directory` (the package `package`, importable)
    built-in: listed by reading those files, each imported when its probe is asked for."""
    global _BUILTIN
    if (package, Path(directory)) not in _PACKAGES:
        _PACKAGES.append((package, Path(directory)))
        _BUILTIN = None


def probe_packages() -> list[tuple[str, Path]]:
    """The packages of built-in probes: (package, directory)."""
    return list(_PACKAGES)


# The module that scores a `PairedProbe` (probes.api.paired): run machinery above this contract,
# so it is named here by the package, not imported by the contract.
_PAIRED_ENGINE: str | None = None


def set_paired_engine(module: str) -> None:
    """Name the module whose `execute(probe, ctx)` runs a PairedProbe and whose
    `delta_plots(probe, ctx, outcome)` draws its default plots; imported when first used."""
    global _PAIRED_ENGINE
    _PAIRED_ENGINE = module


def paired_engine() -> ModuleType:
    """The module `set_paired_engine` named (`probes/__init__.py` names the built-in one)."""
    if _PAIRED_ENGINE is None:
        raise RuntimeError("no paired engine is set; `import probes` sets the built-in one")
    return importlib.import_module(_PAIRED_ENGINE)


def probe(name: str, *, version: int, diagnose: int | None = None):
    """Register a probe class under `name`. The class needs a frozen dataclass `Params`.
    `diagnose=N`: the probe is part of `probe diagnose`, its rows at place N."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise RegistryError(f"probe name {name!r} must be lowercase words joined by '-'")
    if not isinstance(version, int) or version < 1:
        raise RegistryError(f"probe {name!r}: version must be an integer >= 1, got {version!r}")
    if diagnose is not None and (isinstance(diagnose, bool) or not isinstance(diagnose, int)):
        raise RegistryError(f"probe {name!r}: diagnose must be an integer place, got {diagnose!r}")

    def decorate(cls: type) -> type:
        params = getattr(cls, "Params", None)
        if params is None or not dataclasses.is_dataclass(params):
            raise RegistryError(f"probe {name!r}: {cls.__name__}.Params must be a dataclass")
        if not params.__dataclass_params__.frozen:
            raise RegistryError(f"probe {name!r}: {cls.__name__}.Params must be frozen")
        target = f"{cls.__module__}:{cls.__qualname__}"
        previous = _LOADED.get(name)
        if previous is not None and _target(previous) != target:
            raise RegistryError(
                f"probe name {name!r} is already taken by {_target(previous)}; choose another name"
            )
        builtin = builtin_entries().get(name)
        if builtin is not None and builtin.target != target:
            raise RegistryError(
                f"probe name {name!r} is already taken by the built-in {builtin.target}; "
                "choose another name"
            )
        cls.name = name
        cls.version = version
        cls.diagnose = diagnose
        _LOADED[name] = cls
        return cls

    return decorate


def _target(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _decorator_spec(node: ast.ClassDef) -> tuple[str, int, int | None] | None:
    for dec in node.decorator_list:
        if not isinstance(dec, ast.Call):
            continue
        func = dec.func
        fname = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if fname != "probe" or not dec.args or not isinstance(dec.args[0], ast.Constant):
            continue
        version = next((k.value for k in dec.keywords if k.arg == "version"), None)
        if not isinstance(version, ast.Constant):
            continue
        place = next((k.value for k in dec.keywords if k.arg == "diagnose"), None)
        diagnose = int(place.value) if isinstance(place, ast.Constant) else None
        return str(dec.args[0].value), int(version.value), diagnose
    return None


def scan_file(path: Path, module: str | None = None) -> list[Entry]:
    """The probes a file declares, read without importing it."""
    tree = ast.parse(files.read_text(path, "source"), filename=str(path))
    entries = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        spec = _decorator_spec(node)
        if spec is None:
            continue
        doc = ast.get_docstring(node) or ""
        summary = doc.strip().splitlines()[0] if doc.strip() else ""
        where = module if module is not None else str(path)
        entries.append(Entry(spec[0], spec[1], f"{where}:{node.name}", summary, spec[2]))
    return entries


def builtin_entries() -> dict[str, Entry]:
    """Every probe of the probe packages, by name. Two files declaring one name are refused."""
    global _BUILTIN
    if _BUILTIN is None:
        found: dict[str, Entry] = {}
        for package, directory in _PACKAGES:
            for path in sorted(directory.glob("*.py")):
                if path.name.startswith("_"):
                    continue
                text = path.read_text(encoding="utf-8")
                if "@probe(" not in text:  # cheap filter before parsing
                    continue
                for entry in scan_file(path, module=f"{package}.{path.stem}"):
                    if entry.name in found:
                        raise RegistryError(
                            f"probe name {entry.name!r} is declared twice: "
                            f"{found[entry.name].target} and {entry.target}"
                        )
                    found[entry.name] = entry
        _BUILTIN = found
    return _BUILTIN


def entries() -> list[Entry]:
    """Built-in probes and any loaded from files, sorted by name."""
    out = dict(builtin_entries())
    for name, cls in _LOADED.items():
        if name not in out:
            doc = (cls.__doc__ or "").strip()
            out[name] = Entry(
                name,
                cls.version,
                _target(cls),
                doc.splitlines()[0] if doc else "",
                getattr(cls, "diagnose", None),
            )
    return [out[k] for k in sorted(out)]


def names() -> list[str]:
    return [e.name for e in entries()]


def is_file_spec(spec: str) -> bool:
    return ":" in spec and spec.rsplit(":", 1)[0].endswith(".py")


def get(spec: str) -> type:
    """The probe class for a name, or for `path/to/file.py:ClassName`."""
    if is_file_spec(spec):
        return _load_file(spec)
    if spec in _LOADED:
        return _LOADED[spec]
    entry = builtin_entries().get(spec)
    if entry is None:
        raise RegistryError(unknown_message(spec))
    module = entry.target.split(":")[0]
    importlib.import_module(module)
    cls = _LOADED.get(spec)
    if cls is None:  # the file says @probe(...) but the decorator did not run as expected
        raise RegistryError(f"probe {spec!r}: {entry.target} did not register itself")
    return cls


def unknown_message(spec: str) -> str:
    known = names()
    close = difflib.get_close_matches(spec, known, n=3, cutoff=0.5)
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return (
        f"unknown probe {spec!r}; {hint}known probes: {', '.join(known)} "
        "(or path/to/file.py:ClassName)"
    )


def _load_file(spec: str) -> type:
    file, attr = spec.rsplit(":", 1)
    path = Path(file).expanduser().resolve()
    if not path.is_file():
        raise RegistryError(f"probe file {file!r} does not exist; give path/to/file.py:ClassName")
    module_name = "probes_external." + re.sub(r"\W", "_", str(path.with_suffix("")))
    if module_name in sys.modules:
        module = sys.modules[module_name]
    else:
        spec_obj = importlib.util.spec_from_file_location(module_name, path)
        if spec_obj is None or spec_obj.loader is None:
            raise RegistryError(f"cannot import probe file {file!r}; give a Python file")
        module = importlib.util.module_from_spec(spec_obj)
        sys.modules[module_name] = module
        try:
            spec_obj.loader.exec_module(module)
        except RegistryError:
            del sys.modules[module_name]
            raise
    cls: Any = getattr(module, attr, None)
    if cls is None:
        found = [e.target.rsplit(":", 1)[1] for e in scan_file(path)]
        raise RegistryError(
            f"{file!r} has no class {attr!r}; probes in that file: {', '.join(found) or 'none'}"
        )
    if getattr(cls, "name", None) is None or _LOADED.get(cls.name) is not cls:
        raise RegistryError(
            f"{file}:{attr} is not a probe; decorate it with @probe(name, version=N)"
        )
    return cls
