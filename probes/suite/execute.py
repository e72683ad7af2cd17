"""Running the prepared suite into its run directory, one probe run after the other, with a
resumed diagnose keeping what an earlier attempt finished."""

from __future__ import annotations

import os
from typing import Any

from probes.framework import runner
from probes.framework.progress import Progress
from probes.suite.plan import SuiteRun
from probes.suite.store import finished, interrupted


def resolve_progress(progress: Any):
    """The progress to report to: the one given, or a new one (None, True: shown; False:
    quiet)."""
    if progress is None or isinstance(progress, bool):
        return Progress.auto(quiet=progress is False)
    return progress


def run_suite(runs: list[SuiteRun], run_dir: Any, progress: Any, keep: bool = False) -> None:
    """Run the suite into `run_dir/runs`; `keep` (a resumed run): a probe whose run an earlier
    attempt finished (`finished`) is read back, not run again."""
    for k, r in enumerate(runs):
        who = "" if r.column is None else f" · {r.plan.model.info.id}"
        done = finished(r, run_dir.path / "runs") if keep else None
        if done is not None:
            progress.log(f"diagnose: {r.name}{who} ({k + 1}/{len(runs)}) kept from "
                         f"{os.path.relpath(done['run_dir'], run_dir.path)}")  # fmt: skip
            r.summary = done
            continue
        progress.log(f"diagnose: {r.name}{who} ({k + 1}/{len(runs)}) …")
        kept = interrupted(r, run_dir.path / "runs") if keep else None
        if kept is not None:
            progress.log(f"diagnose: {r.name}{who} picks up {len(kept[1])} samples of "
                         f"{os.path.relpath(kept[0], run_dir.path)}")  # fmt: skip
        r.summary = runner.execute(r.plan, out=run_dir.path / "runs", kept=kept).to_dict()
