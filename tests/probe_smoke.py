"""The library's probes and their smoke runs, from the probes' own declarations (`Probe.smoke`:
the text modes a probe writes and a smoke run's options in each; `Probe.self_checks`), so a probe
added to the library is tested in every mode it declares without touching a test file."""

from __future__ import annotations

from typing import Any

from probes.api import registry


def names() -> list[str]:
    return sorted(registry.builtin_entries())


def in_mode(mode: str) -> list[str]:
    """The library's probes that write texts in `mode` ("synth", "haystack", "bridged")."""
    return [n for n in names() if mode in registry.get(n).smoke]


def with_check(check: str) -> list[str]:
    return [n for n in names() if check in registry.get(n).self_checks]


def options(name: str, mode: str) -> dict[str, Any]:
    """Keyword options (`probes.run`) of `name`'s smoke run in `mode`."""
    return dict(registry.get(name).smoke[mode])


def cli_args(name: str, mode: str) -> list[str]:
    """The same as `probe run` arguments."""
    out: list[str] = []
    for key, value in options(name, mode).items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            out.append(flag if value else f"--no-{key.replace('_', '-')}")
        else:
            out += [flag, str(value)]
    return out


def diagnosed() -> list[str]:
    """The library's probes of `probe diagnose` (`@probe(..., diagnose=N)`), in their places."""
    entries = registry.builtin_entries()
    return sorted((n for n in names() if entries[n].diagnose is not None),
                  key=lambda n: entries[n].diagnose)  # fmt: skip


def skip_all_but(*kept: str) -> list[str]:
    """`probe diagnose` arguments that leave out each of its probes but `kept`."""
    return [arg for name in diagnosed() if name not in kept for arg in ("--skip", name)]
