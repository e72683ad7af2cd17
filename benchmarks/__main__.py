"""Run every benchmark module (or those named on the command line) and print their tables.

Each module in this package named `bench_*.py` defines `run(console) -> None`.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

from rich.console import Console


def main(argv: list[str]) -> int:
    # piped to a file or a log: wide enough that the tables keep their column names
    console = Console() if sys.stdout.isatty() else Console(width=150)
    import benchmarks

    names = sorted(
        m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_")
    )
    wanted = [a.removeprefix("bench_") for a in argv]
    for name in names:
        if wanted and name.removeprefix("bench_") not in wanted:
            continue
        console.rule(name)
        importlib.import_module(f"benchmarks.{name}").run(console)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
