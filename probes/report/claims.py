"""What every published-claim report shares: the rule that judges a claim by an interval, the
difference of two independent groups, and the command around a report.

A claim is a statement about a difference (or an effect) and a margin m, the smallest size that
counts, in the difference's unit. Its verdict reads the 95 % interval [lo, hi], never the point:

    above      (the difference exceeds +m)      holds if lo > m,   does not hold if hi < m
    not_above  (it stays below +m)              holds if hi < m,   does not hold if lo > m
    below      (it is below −m)                 holds if hi < −m,  does not hold if lo > −m
    within     (it lies inside ±m)              holds if −m < lo and hi < m,
                                                does not hold if lo > m or hi < −m

and inconclusive otherwise. A claim that does not hold on a model is a finding; nothing here is
asserted by a test.

The reports (`probes.report.sinks`, `.context_use`, `.fact_position`) read only run directories
and are run as `python -m probes.report.<name> RUN_DIR… [--out FILE.md]` (the tables printed, and
written as FILE.md and FILE.json with --out; bad input: one line, exit 2).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from probes.stats import t_quantile
from txl.files import read_json

VERDICT_KINDS = ("above", "not_above", "below", "within")


def judge(ci95: Sequence[float] | None, kind: str, margin: float) -> str:
    """holds / does not hold / inconclusive (module docstring); `not measured` without an
    interval."""
    if kind not in VERDICT_KINDS:
        raise ValueError(f"unknown claim kind {kind!r}; one of {VERDICT_KINDS}")
    if not ci95:
        return "not measured"
    lo, hi = ci95
    m = margin
    if kind == "above":
        return "holds" if lo > m else "does not hold" if hi < m else "inconclusive"
    if kind == "not_above":
        return "holds" if hi < m else "does not hold" if lo > m else "inconclusive"
    if kind == "below":
        return "holds" if hi < -m else "does not hold" if lo > -m else "inconclusive"
    if -m < lo and hi < m:
        return "holds"
    return "does not hold" if lo > m or hi < -m else "inconclusive"


def welch(a: Sequence[float], b: Sequence[float]) -> dict[str, Any] | None:
    """mean(a) − mean(b) of two independent groups, with its 95 % Welch interval (unequal
    variances; Welch–Satterthwaite degrees of freedom). None when a group has < 2 values."""

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.size < 2 or y.size < 2:
        return None
    va, vb = x.var(ddof=1) / x.size, y.var(ddof=1) / y.size
    diff = float(x.mean() - y.mean())
    se = math.sqrt(va + vb)
    if se == 0:
        return {"mean": diff, "ci95": [diff, diff], "n": [int(x.size), int(y.size)]}
    df = (va + vb) ** 2 / (va**2 / (x.size - 1) + vb**2 / (y.size - 1))
    half = t_quantile(0.975, df) * se
    return {"mean": diff, "ci95": [diff - half, diff + half], "n": [int(x.size), int(y.size)]}


def fmt(d: dict | None, digits: int = 3) -> str:
    """'+1.234 [+0.500, +1.968]' for a difference with its interval; '—' without one."""
    if d is None or d.get("mean") is None:
        return "—"
    lo, hi = d.get("ci95") or (float("nan"), float("nan"))
    return f"{d['mean']:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def main(
    argv: list[str],
    name: str,
    tables: Callable[[list[Path]], list[dict]],
    markdown: Callable[[list[dict]], str],
) -> int:
    """The command of report `name`: RUN_DIR… [--out FILE.md]. `tables` turns the run
    directories into tables (ValueError, KeyError or OSError: bad input), `markdown` writes them.
    Exit 0 with the tables printed; bad input: one line on stderr, exit 2."""
    out = None
    if "--out" in argv:
        k = argv.index("--out")
        if k + 1 >= len(argv):
            print(f"error: --out needs a file name, e.g. --out {name}.md", file=sys.stderr)
            return 2
        out, argv = argv[k + 1], argv[:k] + argv[k + 2 :]
    if not argv:
        print(f"usage: python -m probes.report.{name} RUN_DIR… [--out FILE.md]", file=sys.stderr)
        return 2
    try:
        result = tables([Path(a) for a in argv])
    except KeyError as e:
        print(f"error: a run directory of another probe or version (no {e})", file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    text = markdown(result)
    if out:
        try:
            Path(out).write_text(text)
            Path(out).with_suffix(".json").write_text(json.dumps(result, indent=1, default=str))
        except OSError as e:
            print(f"error: cannot write {out!r}: {e.strerror or e}", file=sys.stderr)
            return 2
    print(text)
    return 0


def read_run(run_dir: Path, probe: str) -> tuple[dict, dict]:
    """(summary.json, run.json) of a run of `probe`; ValueError when it is not one."""
    if not (run_dir / "summary.json").exists():
        raise ValueError(f"{run_dir} is not a run directory (no summary.json)")
    summary = read_json(run_dir / "summary.json")
    if summary.get("probe") != probe:
        raise ValueError(f"{run_dir} is a {summary.get('probe')} run, not {probe}")
    return summary, read_json(run_dir / "run.json")
