"""probes.api.registry and probes.api.params: lazy listing, refusals, options from Params."""

import dataclasses
import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

import probes
from probes.api import params as P
from probes.api import registry

# every probe of the library, found by scanning it (the check below holds it to the files)
BUILTIN = set(registry.builtin_entries())


def test_listing_imports_no_torch_numpy_or_probe_module():
    code = textwrap.dedent(
        """
        import sys, time
        t = time.perf_counter()
        from probes.cli.main import cli
        cli(["list"], standalone_mode=False)
        cli(["--help"], standalone_mode=False)
        cli(["run", "--help"], standalone_mode=False)
        cli(["diagnose", "--help"], standalone_mode=False)
        cli(["train-compare", "--help"], standalone_mode=False)
        cli(["train", "--help"], standalone_mode=False)
        heavy = [m for m in ("torch", "transformers", "tokenizers", "numpy", "scipy", "matplotlib", "synth", "probes.library.fact_swap") if m in sys.modules]
        print("HEAVY", heavy, time.perf_counter() - t)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    line = next(x for x in out.stdout.splitlines() if x.startswith("HEAVY"))
    assert line.split("]")[0] == "HEAVY [", line


def test_builtin_probes_are_found_by_scanning():
    found = registry.builtin_entries()
    assert "fact-swap" in found
    # one probe per file of the library, each file holding one
    [(package, directory)] = registry.probe_packages()
    assert package == "probes.library" and directory == Path(probes.__file__).parent / "library"
    files = {p.stem for p in directory.glob("*.py") if not p.name.startswith("_")}
    modules = [e.target.split(":")[0] for e in found.values()]
    assert sorted(modules) == sorted(f"probes.library.{stem}" for stem in files)
    e = found["fact-swap"]
    assert e.target == "probes.library.fact_swap:FactSwap" and e.version >= 1 and e.summary


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_every_builtin_probe_loads_with_params_and_version(name):
    entry = registry.builtin_entries()[name]
    cls = registry.get(name)
    module, _, qualname = entry.target.partition(":")
    assert module.startswith("probes.library.") and module.count(".") == 2
    assert (cls.__module__, cls.__qualname__) == (module, qualname)
    assert cls.name == name and isinstance(cls.version, int) and cls.version == entry.version >= 1
    assert dataclasses.is_dataclass(cls.Params) and cls.Params.__dataclass_params__.frozen
    assert cls.Params() == cls.Params()  # every option has a default
    assert entry.summary and entry.summary == (cls.__doc__ or "").strip().splitlines()[0]


def test_unknown_name_suggests_the_close_one():
    with pytest.raises(registry.RegistryError, match="did you mean 'fact-swap'"):
        registry.get("fact-swp")


def test_get_imports_and_returns_the_class():
    cls = registry.get("fact-swap")
    assert cls.name == "fact-swap" and cls.version >= 1


def test_duplicate_names_are_refused():
    registry.get("fact-swap")

    with pytest.raises(registry.RegistryError, match="already taken"):

        @registry.probe("fact-swap", version=1)
        class Impostor:
            @dataclass(frozen=True)
            class Params:
                pass


def test_params_must_be_a_frozen_dataclass():
    with pytest.raises(registry.RegistryError, match="frozen"):

        @registry.probe("thawed-probe", version=1)
        class Thawed:
            @dataclass
            class Params:
                x: int = 1


def test_bad_names_and_versions_are_refused():
    with pytest.raises(registry.RegistryError):
        registry.probe("Bad Name", version=1)
    with pytest.raises(registry.RegistryError):
        registry.probe("ok-name", version=0)


def test_probe_from_a_file(tmp_path):
    f = tmp_path / "my_probe.py"
    f.write_text(
        textwrap.dedent(
            '''
            from dataclasses import dataclass
            from probes.api.probe_base import Probe
            from probes.api.params import param
            from probes.api.registry import probe

            @probe("my-outside-probe", version=3)
            class Outside(Probe):
                """A probe that lives outside the package."""

                @dataclass(frozen=True)
                class Params:
                    depth: int = param(2, help="how deep", min=1)
            '''
        )
    )
    cls = registry.get(f"{f}:Outside")
    assert cls.name == "my-outside-probe" and cls.version == 3
    assert "my-outside-probe" in registry.names()
    with pytest.raises(registry.RegistryError, match="no class 'Nope'"):
        registry.get(f"{f}:Nope")
    with pytest.raises(registry.RegistryError, match="does not exist"):
        registry.get(f"{tmp_path}/missing.py:X")


def test_two_files_declaring_one_name_are_refused(tmp_path, monkeypatch):
    for stem in ("a_probe", "b_probe"):
        (tmp_path / f"{stem}.py").write_text('@probe("twin", version=1)\nclass X:\n    pass\n')
    monkeypatch.setattr(registry, "_PACKAGES", [])
    monkeypatch.setattr(registry, "_BUILTIN", None)
    registry.add_probe_package("outside", tmp_path)
    with pytest.raises(registry.RegistryError, match="declared twice"):
        registry.builtin_entries()
    monkeypatch.setattr(registry, "_BUILTIN", None)


@dataclass(frozen=True)
class Demo:
    count: int = P.param(3, help="how many", min=1)
    ratio: float = P.param(0.5, help="a ratio", min=0.0, max=1.0)
    label: str = P.param("x", help="a label", check=lambda v: None if v != "bad" else int("z"))
    flag: bool = P.param(True, help="a switch")


def test_params_become_click_options_with_help():
    opts = {o.name: o for o in P.click_options(Demo)}
    assert set(opts) == {"count", "ratio", "label", "flag"}
    assert opts["count"].opts == ["--count"] and "how many" in opts["count"].help
    assert opts["flag"].secondary_opts == ["--no-flag"]

    @click.command(params=P.click_options(Demo))
    def cmd(**kw):
        click.echo(json.dumps(kw, sort_keys=True))

    from click.testing import CliRunner

    r = CliRunner().invoke(cmd, ["--count", "5", "--no-flag"])
    assert r.exit_code == 0 and json.loads(r.output)["count"] == 5
    r = CliRunner().invoke(cmd, ["--count", "0"])
    assert r.exit_code == 2 and "--count" in r.output


def test_params_build_validates_like_the_cli():
    assert P.build(Demo, {"count": "4"}).count == 4
    with pytest.raises(P.ParamError, match="below the minimum"):
        P.build(Demo, {"count": 0})
    with pytest.raises(P.ParamError, match="did you mean 'count'"):
        P.build(Demo, {"cout": 1})
    with pytest.raises(P.ParamError, match="--label"):
        P.build(Demo, {"label": "bad"})


def test_common_option_names_cannot_be_reused():
    @dataclass(frozen=True)
    class Clash:
        mem: int = P.param(1, help="clashes")

    with pytest.raises(P.ParamError, match="clashes with the common run option"):
        P.click_options(Clash, taken={"mem"})
