"""Where in the context a fact is used best: Liu et al.'s "lost in the middle" claims judged on
fact-swap runs that place the fact at several depths of one context length.

`python -m probes.report.fact_position RUN_DIR… [--out FILE.md]` reads fact-swap run directories
(summary.json, run.json, samples.jsonl), one per position of the fact: each run's `--lead` (the
tokens before the fact) and `--distance` (from the fact to the answer) add up to about the same
context, so the runs differ in where the fact sits. Runs are grouped by model; a run's position
is its mean lead / (lead + distance) over its pairs. Per position: the fact-swap delta (NLL of
the answer after the swapped value − after the stated one; > 0: the model reads the value), mean
over pairs with its 95 % t interval. The claims compare positions by the difference of their
mean deltas, with a 95 % Welch interval (the positions are independent pairs), judged against
fact-swap's margin (0.05 nats/answer token; `probes.report.claims`):

    primacy   first − middle: above +m   (a fact at the start is used more than in the middle)
    recency   last − middle: above +m    (a fact at the end is used more than in the middle)
    U-shape   both hold (does not hold when either does not; else inconclusive)

with first, middle and last the runs of the smallest position, the one nearest 0.5 and the
largest.

The published findings (Liu, Lin, Hewitt, Paranjape, Bevilacqua, Petroni and Liang 2023, "Lost
in the Middle: How Language Models Use Long Contexts", TACL 2024): multi-document question
answering (one relevant document among 10–30 retrieved ones, 2 K–6 K tokens) and key-value
retrieval; accuracy is highest with the relevant document first or last and lowest in the
middle, a U-shape, for GPT-3.5-Turbo, Claude, MPT and LongChat; among Llama-2 models the U-shape
appears at 13 B and 70 B, while the 7 B model shows recency only. Protocol differences: a
language model's loss on the stated value (no question, no instruction), one fact sentence in
pydoc filler rather than a relevant document among distractors, models of 135 M–270 M
parameters, about 1 K tokens of context.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from probes import stats
from probes.report import claims
from txl.files import read_jsonl

CITATION = "Liu et al. 2023, Lost in the Middle: How Language Models Use Long Contexts (TACL 2024)"
PUBLISHED = {
    "primacy": "first > middle (GPT-3.5-Turbo, Claude, MPT, LongChat; Llama-2 13B and 70B)",
    "recency": "last > middle (all of them, Llama-2 7B included)",
    "U-shape": "both, for every model but Llama-2 7B (recency only)",
}


def load(run_dir: Path) -> dict[str, Any]:

    summary, run = claims.read_run(run_dir, "fact-swap")
    samples = read_jsonl(run_dir / "samples.jsonl", "metrics")
    deltas = np.array([s["delta"] for s in samples], dtype=np.float64)
    lead = np.array([s["lead"] for s in samples], dtype=np.float64)
    distance = np.array([s["distance"] for s in samples], dtype=np.float64)
    if deltas.size == 0:
        raise ValueError(f"{run_dir} has no scored pairs")
    return {
        "dir": str(run_dir),
        "model": summary["model"]["id"],
        "evaluator": summary["evaluator"],
        "margin": summary["margin"]["value"],
        "command": run.get("command"),
        "deltas": deltas,
        "lead": float(lead.mean()),
        "distance": float(distance.mean()),
        "position": float(np.mean(lead / (lead + distance))),
        "accuracy": float(np.mean([s["correct_base"] for s in samples])),
        "p_answer": float(np.mean([s["p_answer_base"] for s in samples])),
    }


def model_table(runs: list[dict]) -> dict[str, Any]:

    runs = sorted(runs, key=lambda r: r["position"])
    margin = runs[0]["margin"]
    rows = []
    for r in runs:
        d = stats.describe(r["deltas"])
        rows.append(
            {
                "position": r["position"],
                "lead": r["lead"],
                "distance": r["distance"],
                "n": d["n"],
                "delta": {"mean": d["mean"], "ci95": d["ci95"]},
                "accuracy": r["accuracy"],
                "p_answer": r["p_answer"],
                "run": r["dir"],
                "command": r["command"],
            }
        )
    judged = []
    if len(runs) >= 3:
        first, last = runs[0], runs[-1]
        middle = min(runs[1:-1], key=lambda r: abs(r["position"] - 0.5))
        results = {}
        for name, edge in (("primacy", first), ("recency", last)):
            diff = claims.welch(edge["deltas"], middle["deltas"])
            results[name] = claims.judge(None if diff is None else diff["ci95"], "above", margin)
            judged.append({"claim": name, "published": PUBLISHED[name],
                           "compared": f"{edge['position']:.2f} − {middle['position']:.2f}",
                           "difference": diff, "result": results[name]})  # fmt: skip
        both = set(results.values())
        u = ("holds" if both == {"holds"} else "does not hold" if "does not hold" in both
             else "inconclusive")  # fmt: skip
        judged.append({"claim": "U-shape", "published": PUBLISHED["U-shape"],
                       "compared": "primacy and recency", "difference": None, "result": u})  # fmt: skip
    return {
        "model": runs[0]["model"],
        "evaluator": runs[0]["evaluator"],
        "context": float(np.mean([r["lead"] + r["distance"] for r in runs])),
        "margin": margin,
        "rows": rows,
        "claims": judged,
    }


def tables(run_dirs: list[Path]) -> list[dict]:
    by_model: dict[str, list[dict]] = {}
    for d in run_dirs:
        r = load(d)
        by_model.setdefault(r["model"], []).append(r)
    out = []
    for model, runs in by_model.items():
        if len(runs) < 3:
            raise ValueError(
                f"{model}: {len(runs)} position(s); give at least three runs (first, middle, "
                "last) of one model"
            )
        out.append(model_table(runs))
    return out


def markdown(tables_: list[dict]) -> str:
    out = [f"# Where in the context a fact is used\n\nClaims of {CITATION}, judged on fact-swap "
           "runs that place the fact at several depths of one context "
           f"(`probes/report/fact_position.py`). Δ: NLL of the answer after the swapped value − "
           "after the stated one (nats/answer token), mean over pairs [95% t interval]; "
           "differences between positions: Welch 95% intervals.\n"]  # fmt: skip
    for t in tables_:
        out.append(
            f"## {t['model']} · {t['evaluator']} · about {t['context']:,.0f} tokens from the "
            f"context's start to the answer · margin {t['margin']:g}\n"
        )
        out.append("| position | lead | distance | n | Δ [95% CI] | acc | p(ans) |")
        out.append("|---|---|---|---|---|---|---|")
        for r in t["rows"]:
            out.append(
                f"| {r['position']:.2f} | {r['lead']:,.0f} | {r['distance']:,.0f} | {r['n']} | "
                f"{claims.fmt(r['delta'])} | {r['accuracy']:.2f} | {r['p_answer']:.2g} |"
            )
        out.append("")
        out.append("| claim | published | ours: positions | difference [95% CI] | verdict |")
        out.append("|---|---|---|---|---|")
        for c in t["claims"]:
            out.append(
                f"| {c['claim']} | {c['published']} | {c['compared']} | "
                f"{claims.fmt(c['difference'])} | {c['result']} |"
            )
        out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    return claims.main(argv, "fact_position", tables, markdown)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
