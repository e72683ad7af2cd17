"""`probe diagnose`: what the cache does for one model, the three effects side by side.

Runs the diagnostic set with its default parameters (and the common options given) on one model,
and `recl` on the model and its group (`--model` repeated, or the model's `-mem0` sibling when
there is one; without a group, or when the geometry leaves RECL a single context — mem_len 0 — RECL
is left out and `skipped` says why), then prints one table:

    effect                            probe          metric (in that probe's summary.json)
    boundary repair                   boundary       gain.first: NLL_nomem − NLL_mem, segment start
    retrieval within the horizon      fact-swap      by_reach.direct: pair delta, fact in the window
    retrieval beyond the horizon      fact-swap      pairs whose fact is layered or beyond
    topic adaptation                  topic-shift    delta on ordinary tokens
    stale state: previous document    cross-doc      carry_minus_reset.answer
    stale state: outdated fact        fact-update    delta: NLL with the stale statement − without
    effective context (truncation)    context-sweep  effective_context.all (tokens)
    RECL (r = 0.1)                    recl           recl[model]["0.1"] (tokens)

each with its 95 % interval (t intervals over pairs; bootstrap percentile intervals for the two
lengths — a step statistic on the sweep's grid, where BCa's corrections are ill-defined: see
probes/context_sweep.py), the Wilcoxon p where there is one, and whether the verdict rule calls it
significant (nats rows only; the two lengths are descriptive).

Every probe is prepared first — inputs checked, each model loaded once, pairs built — so bad input
(a geometry one probe cannot use, say --tgt-len 4 with boundary's first 4 positions) is one line,
exit 2, and no directory.

Everything lands in one run directory, `<out>/diagnose/<model-id>/<UTC-time>-<8 hex>/`:
`run.json` (provenance, options, the models), `summary.json` (the table's rows, every sub-run's
verdict and checks, relative paths), `diagnose.png` (the rows in nats as a forest plot), and
`runs/<probe>/<model-id>/<run>/` — each probe's complete run directory. Exit code 1 when a probe
failed its own check.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

# This module is imported by `probe --help` (through probes.cli.diagnose, for the constants
# below): nothing heavy at module level (numpy, torch and the probes load inside the functions).

PROBES = ("boundary", "fact-swap", "topic-shift", "cross-doc", "fact-update", "context-sweep")
GROUP_PROBES = ("recl",)  # run on the model group (--model repeated, or the model's -mem0 sibling)
ALL_PROBES = (*PROBES, *GROUP_PROBES)


def diagnose(
    *,
    model: Any = None,
    mem: int | None = None,
    tgt_len: int | None = None,
    clamp_len: int | None = None,
    same_length: bool | None = None,
    n: int | None = None,
    seed: int = 0,
    device: str = "auto",
    dtype: str = "float32",
    threads: int | None = None,
    out: str | os.PathLike = "results",
    quick: bool = False,
    language: str | os.PathLike | None = None,
    skip: tuple[str, ...] | list[str] = (),
    progress: Any = None,
    argv: list[str] | None = None,
) -> dict[str, Any]:
    """Run the set and return the summary (also written to the run directory).

    Every probe is prepared (inputs checked, model loaded once, pairs planned) before the run
    directory is created: bad input raises ProbeInputError and leaves nothing behind. A probe
    the geometry cannot host (RECL at mem_len 0: one context only) is left out with the reason,
    in `skipped`."""
    from probes.framework import registry, runner
    from probes.framework.probe import ProbeInputError, ProbeNotApplicable, Progress
    from probes.framework.results import RunDir, RunDirError, check_writable

    t0 = time.perf_counter()
    unknown = [s for s in skip if s not in ALL_PROBES]
    if unknown:
        raise ProbeInputError(
            f"--skip {unknown[0]!r}: not a diagnose probe; choose from {', '.join(ALL_PROBES)}"
        )
    try:
        check_writable(Path(out))
    except RunDirError as e:
        raise ProbeInputError(str(e)) from None
    sources = runner.model_sources(registry.get("recl"), model)
    if progress is None or isinstance(progress, bool):
        progress = Progress.auto(quiet=progress is False)

    # ------------------------------------------------------------ prepare all, nothing written
    models = runner.ModelCache()
    common = dict(
        mem=mem,
        tgt_len=tgt_len,
        clamp_len=clamp_len,
        same_length=same_length,
        n=n,
        seed=seed,
        device=device,
        dtype=dtype,
        threads=threads,
        out=out,
        quick=quick,
        language=language,
        progress=progress,
        argv=argv,
        models=models,
    )
    prepared: dict[str, runner.Prepared] = {}
    skipped = [name for name in ALL_PROBES if name in skip]
    for name in PROBES:
        if name not in skip:
            prepared[name] = runner.prepare(name, model=sources[0], **common)
    if "recl" not in skip:
        if len(sources) < 2:
            skipped.append("recl (no model group)")
        else:
            try:
                prepared["recl"] = runner.prepare("recl", model=sources, **common)
            except ProbeNotApplicable as e:
                skipped.append(f"recl ({e.reason})")
    if not prepared:
        raise ProbeInputError(f"nothing left to run (skipped: {', '.join(skipped)}); skip fewer")
    first = next(iter(prepared.values()))
    lm, geometry = first.model, first.ctx.geometry
    group = prepared["recl"].ctx.group if "recl" in prepared else [lm]
    infos = [m.info for m in group]
    try:
        run_dir = RunDir.create(Path(out), "diagnose", lm.info.id)
    except RunDirError as e:
        raise ProbeInputError(str(e)) from None

    # ------------------------------------------------------------ the run
    from probes import __version__
    from probes.framework import provenance

    options = {
        "model": [str(s) if isinstance(s, Path) else s.info.path for s in sources],
        "mem": mem,
        "tgt_len": tgt_len,
        "clamp_len": clamp_len,
        "same_length": same_length,
        "n": n,
        "seed": seed,
        "device": device,
        "dtype": dtype,
        "threads": threads,
        "out": str(out),
        "quick": quick,
        "language": None if language is None else str(language),
        "skip": list(skip),
    }
    record = {
        "schema_version": 1,
        "status": "running",
        "command": "diagnose",
        "argv": list(argv) if argv is not None else None,
        "options": options,
        "model": lm.info.to_dict(),
        "group": [i.to_dict() for i in infos],
        "geometry": geometry.to_dict(),
        "git": provenance.git_state(),
        "package_version": __version__,
        "versions": provenance.versions(),
        "machine": provenance.machine(),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    run_dir.write_json("run.json", record)
    progress.log(f"diagnose: run directory {run_dir.path}")
    summaries: dict[str, dict] = {}
    try:
        for k, (name, plan) in enumerate(prepared.items()):
            progress.log(f"diagnose: {name} ({k + 1}/{len(prepared)}) …")
            summaries[name] = runner.execute(plan, out=run_dir.path / "runs").to_dict()
        rows = table_rows(summaries, lm.info.id)
        summary = {
            "schema_version": 1,
            "command": "diagnose",
            "model": {"id": lm.info.id, "path": lm.info.path, "sha256": lm.info.sha256},
            "group": [{"id": i.id, "path": i.path, "sha256": i.sha256} for i in infos],
            "geometry": geometry.to_dict(),
            "rows": rows,
            "runs": {
                name: os.path.relpath(s["run_dir"], run_dir.path) for name, s in summaries.items()
            },
            "verdicts": {name: s["verdict"] for name, s in summaries.items()},
            "checks": {name: s["checks"] for name, s in summaries.items()},
            "passed": all(s["passed"] for s in summaries.values()),
            "skipped": skipped,
            "run_dir": str(run_dir.path),
            "elapsed_s": round(time.perf_counter() - t0, 3),
            "row_docs": ROW_DOCS,
        }
        plot = forest_plot(run_dir.path / "diagnose.png", rows, lm.info.id, geometry)
        summary["plots"] = [plot] if plot else []
        run_dir.write_json("summary.json", summary)
        record["status"] = "complete" if summary["passed"] else "failed-check"
        record["elapsed_s"] = summary["elapsed_s"]
        run_dir.write_json("run.json", record)
        return summary
    except KeyboardInterrupt:
        record["status"] = "interrupted"
        run_dir.write_json("run.json", record)
        raise
    except BaseException as e:
        record["status"] = "error"
        record["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:500]
        run_dir.write_json("run.json", record)
        raise
    finally:
        run_dir.close()


# ---------------------------------------------------------------------------- the table


def _row(effect, probe, metric, unit, value=None, ci95=None, p_value=None, n=None, detail=""):
    from probes.stats import significant

    return {
        "effect": effect,
        "probe": probe,
        "metric": metric,
        "measure": MEASURES[effect.split(" (")[0]],
        "censored": False,
        "unit": unit,
        "value": value,
        "ci95": ci95,
        "p_value": p_value,
        "significant": significant(p_value, tuple(ci95) if ci95 else None)
        if p_value is not None
        else None,
        "n": n,
        "detail": detail,
    }


def _samples(summary: dict) -> list[dict]:
    from probes.framework.results import load_samples

    return load_samples(Path(summary["run_dir"]))


def table_rows(summaries: dict[str, dict], model_id: str) -> list[dict]:
    import numpy as np

    from probes import stats

    rows = []
    s = summaries.get("boundary")
    if s:
        g = s["metrics"]["gain"]["first"]
        k = s["metrics"]["first_k"]
        rows.append(
            _row(
                "boundary repair",
                "boundary",
                "gain.first",
                "nats/token",
                g["mean"],
                g["ci95"],
                g["p_value"],
                g["n"],
                f"first {k} positions; rest of the segment "
                f"{_f(s['metrics']['gain']['rest']['mean'])}",
            )
        )
    s = summaries.get("fact-swap")
    if s:
        recs = _samples(s)
        for label, effect, sel in (
            ("direct", "retrieval within the horizon", lambda r: r["reach"] == "direct"),
            ("layered+beyond", "retrieval beyond the horizon", lambda r: r["reach"] != "direct"),
        ):
            d = stats.describe(np.array([r["delta"] for r in recs if sel(r)]))
            acc = [r["correct_base"] for r in recs if sel(r)]
            detail = f"accuracy {np.mean(acc):.2f}" if acc else "no pairs"
            if label != "direct":
                parts = []
                for lab in ("layered", "beyond"):
                    x = [r["delta"] for r in recs if r["reach"] == lab]
                    if x:
                        parts.append(f"{lab} Δ={np.mean(x):+.3f} (n={len(x)})")
                detail += "; " + ", ".join(parts) if parts else ""
            rows.append(
                _row(
                    effect,
                    "fact-swap",
                    f"pair delta, reach {label}",
                    "nats/answer token",
                    d["mean"],
                    d["ci95"],
                    d["p_value"],
                    d["n"],
                    detail,
                )
            )
    s = summaries.get("topic-shift")
    if s:
        d = s["metrics"]["by_tokens"]["ordinary"]
        a = s["metrics"]["by_tokens"]["answer"]
        rows.append(
            _row(
                "topic adaptation",
                "topic-shift",
                "by_tokens.ordinary",
                "nats/token",
                d["mean"],
                d["ci95"],
                d["p_value"],
                d["n"],
                f"answer tokens {_f(a['mean'])}",
            )
        )
    s = summaries.get("cross-doc")
    if s:
        d = s["metrics"]["carry_minus_reset"]["answer"]
        m = s["metrics"]
        rows.append(
            _row(
                "stale state: previous document",
                "cross-doc",
                "carry_minus_reset.answer",
                "nats/answer token",
                d["mean"],
                d["ci95"],
                d["p_value"],
                d["n"],
                f"first tokens {_f(m['carry_minus_reset']['first']['mean'])}, pull toward A's "
                f"value {_f(m['pull']['mean'])}, reset leakage max "
                f"{m['reset_leakage']['max_abs']:.1g}",
            )
        )
    s = summaries.get("fact-update")
    if s:
        m = s["metrics"]
        sh = m.get("stale_share_shift", {})
        rows.append(
            _row(
                "stale state: outdated fact",
                "fact-update",
                "delta_mean",
                "nats/answer token",
                m["delta_mean"],
                m["delta_ci95"],
                m["p_value"],
                s["n_pairs"],
                f"stale share {_f(m.get('stale_share', {}).get('mean'), '{:.2f}')} "
                f"(shift {_f(sh.get('mean'))})",
            )
        )
    s = summaries.get("context-sweep")
    if s:
        e = s["metrics"]["effective_context"]
        top = s["metrics"]["max_context"]
        rows.append(
            _row(
                "effective context (truncation)",
                "context-sweep",
                "effective_context.all.c",
                "tokens",
                e["all"]["c"],
                e["all"]["ci95"],
                None,
                s["n_pairs"],
                f"within 1% of the perplexity at c={top}; answer "
                f"{'≥' if e['answer']['censored'] else ''}{e['answer']['c']}, ordinary "
                f"{'≥' if e['ordinary']['censored'] else ''}{e['ordinary']['c']}",
            )
        )
        rows[-1]["censored"] = bool(e["all"]["censored"])
    s = summaries.get("recl")
    if s:
        m = s["metrics"]
        r0 = f"{min(m['rs']):g}"
        v = m["recl"][model_id][r0]
        others = ", ".join(
            f"{mid} {'≥' if x[r0]['censored'] else ''}{x[r0]['recl']}"
            for mid, x in m["recl"].items()
            if mid != model_id
        )
        rows.append(
            _row(
                f"RECL (r = {r0})",
                "recl",
                f"recl.{model_id}.{r0}",
                "tokens",
                v["recl"],
                v["ci95"],
                None,
                s["n_pairs"],
                f"Δ={m['delta']}, start c={m['start']}; group: {others}",
            )
        )
        rows[-1]["censored"] = bool(v["censored"])
    return rows


MEASURES = {
    "boundary repair": "NLL without memory − with memory in the first positions of a segment, "
    "local-only text",
    "retrieval within the horizon": "fact-swap pair delta NLL(fact says B) − NLL(fact says A) "
    "on the answer, fact inside the direct window",
    "retrieval beyond the horizon": "the same for facts only in the layered reach or beyond it",
    "topic adaptation": "NLL of ordinary tokens with the distant filler in another topic − "
    "in the document's topic",
    "stale state: previous document": "NLL of B's answer with the previous document carried in "
    "the cache − with reset",
    "stale state: outdated fact": "NLL of the updated answer with the stale statement − without",
    "effective context": "smallest truncated context within 1% of the perplexity at the largest "
    "c (context-sweep)",
    "RECL": "relative effective context length over the model group (paper's Appendix C)",
}


def _f(x, fmt: str = "{:+.3f}") -> str:
    return "—" if x is None else fmt.format(x)


ROW_DOCS = {
    "value": "the row's number in its unit (see each probe's metric_docs for the definition)",
    "ci95": "95% interval: Student-t over pairs (nats rows); bootstrap percentile over texts "
    "(effective context, RECL: a first-crossing c on the sweep's grid, where BCa's bias and "
    "acceleration estimates break on ties; descriptive, may under-cover with few texts)",
    "p_value": "two-sided Wilcoxon signed-rank p over pairs (no correction across rows)",
    "significant": "p < 0.05 and the interval excludes 0 (nats rows only)",
    "detail": "context from the same run",
}


def forest_plot(path: Path, rows: list[dict], model_id: str, geometry) -> str | None:
    """The nats-valued rows with their intervals, one line each (None: no such row)."""
    pts = [r for r in rows if r["unit"].startswith("nats") and r["value"] is not None]
    if not pts:
        return None
    from probes.report import plots

    plots.forest(
        path,
        pts,
        title=f"probe diagnose · {model_id} · mem {geometry.mem_len} tgt {geometry.tgt_len}",
    )
    return path.name


def print_table(summary: dict, out=None) -> None:
    from rich.table import Table

    from probes.report.tables import console

    c = console(out)
    g = summary["geometry"]
    c.print("probe diagnose", style="bold")
    c.print(
        f"model {summary['model']['id']} ({summary['model']['sha256'][:12]}) · mem "
        f"{g['mem_len']} tgt {g['tgt_len']} clamp {g['clamp_len']}"
        + (
            f" · group: {', '.join(x['id'] for x in summary['group'][1:])}"
            if summary["group"][1:]
            else ""
        )
    )
    t = Table(show_lines=False)
    for h in ("effect", "value", "95% CI", "p", "sig", "n", "unit", "detail"):
        t.add_column(h, justify="right" if h in ("value", "95% CI", "p", "n") else "left")
    for r in summary["rows"]:
        nats = r["unit"].startswith("nats")
        v = r["value"]
        ci = r["ci95"]
        t.add_row(
            r["effect"],
            "—"
            if v is None
            else (f"{v:+.3f}" if nats else ("≥" if r["censored"] else "") + str(v)),
            "—" if not ci else (f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if nats else f"[{ci[0]}, {ci[1]}]"),
            "—" if r["p_value"] is None else f"{r['p_value']:.2g}",
            "—" if r["significant"] is None else ("yes" if r["significant"] else "no"),
            str(r["n"]),
            r["unit"],
            r["detail"],
            style="bold" if r["significant"] else None,
        )
    c.print(t)
    failed = [
        name
        for name, ch in summary["checks"].items()
        if not all(v.get("passed", True) for v in ch.values())
    ]
    if failed:
        c.print(f"checks FAILED: {', '.join(failed)}", style="bold red")
    if summary.get("skipped"):
        c.print(f"skipped: {', '.join(summary['skipped'])}")
    c.print(f"run directory: {summary['run_dir']}")
