"""How far back a model uses its context, and how: Khandelwal et al.'s claims judged on
context-ablation runs.

`python -m probes.report.context_use RUN_DIR… [--out FILE.md]` reads context-ablation run
directories (summary.json, run.json) and writes, per run, the effect of each ablation by distance
(percent of the intact loss, 95 % t interval over texts) and the claims, each judged by its
interval against the 1 % margin (`probes.report.claims`).

The published findings (Khandelwal, He, Qi and Jurafsky 2018, "Sharp Nearby, Fuzzy Far Away: How
Neural Language Models Use Context", ACL; a 3-layer LSTM on Penn Treebank and WikiText-2, word
tokens, a 300-token context): the loss comes within 1 % of the full context's from about 150
(PTB) to 250 (WikiText-2) tokens — about 200 on average; word order matters within the last 20
or so tokens and not beyond 50, where shuffling the distant context leaves the loss within 1 %;
the distant words still matter as a topic (replacing them hurts while order does not). Claims,
each at the sweep's distance nearest the published one from the side the claim is about:

    far context unused beyond ~200 tokens     drop at the smallest d ≥ 200: within ±1 %
    order unused beyond ~50 tokens            shuffle at the smallest d ≥ 50: within ±1 %
    order used within ~50 tokens              shuffle at the largest d ≤ 20: above +1 % (what
                                              is shuffled then includes the last 20–50 tokens)
    content used beyond 50 tokens             replace at the smallest d ≥ 50: above +1 %

Protocol differences, stated in the table: subword tokens, not words (a word is shuffled whole,
its tokens kept together); transformers of 135 M to 270 M parameters with thousands of positions,
not an LSTM; pydoc text; a window of W scored tokens after the boundary instead of one token, so
a row at d covers distances d … d + W − 1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from probes.report import claims

MARGIN = 1.0  # percent of the intact loss
CITATION = (
    "Khandelwal, He, Qi and Jurafsky 2018, Sharp Nearby, Fuzzy Far Away: How Neural Language "
    "Models Use Context (ACL)"
)
# (claim, published, ablation, published distance, which side of it, kind)
CLAIMS = (
    ("the far context is unused beyond ~200 tokens", "loss within 1 % from 150 (PTB) – 250 "
     "(WikiText-2) tokens", "drop", 200, "at_least", "within"),
    ("word order is unused beyond ~50 tokens", "shuffling beyond 50 tokens: within 1 %",
     "shuffle", 50, "at_least", "within"),
    ("word order within the last ~50 tokens is used", "shuffling closer than 50 tokens hurts",
     "shuffle", 20, "at_most", "above"),
    ("the far words' content is used beyond 50 tokens", "replacing them hurts where order does "
     "not", "replace", 50, "at_least", "above"),
)  # fmt: skip
PROTOCOL = (
    "subword tokens (words shuffled whole); a transformer with its own tokenizer, not a word-level "
    "LSTM; pydoc text; {window} scored tokens after the boundary (a row at d covers d … d + "
    "{last}); {context} tokens of context"
)


def load(run_dir: Path) -> dict[str, Any]:
    summary, run = claims.read_run(run_dir, "context-ablation")
    m = summary["metrics"]
    return {
        "dir": str(run_dir),
        "model": summary["model"]["id"],
        "evaluator": m["policy"]["evaluator"],
        "dtype": m["policy"].get("dtype"),
        "context": m["context"],
        "window": m["window"],
        "distances": m["distances"],
        "nll_intact": m["nll_intact"],
        "effective": m["effective"],
        "n": summary["n_pairs"],
        "bins": summary["bins"],
        "command": run.get("command"),
    }


def pick(run: dict, ablation: str, distance: int, side: str) -> dict | None:
    """The ablation's bin at the sweep's distance nearest `distance` on `side`."""
    mine = [b for b in run["bins"] if b["ablation"] == ablation and b["delta_mean"] is not None]
    if side == "at_least":
        near = [b for b in mine if b["distance"] >= distance]
        return min(near, key=lambda b: b["distance"]) if near else None
    near = [b for b in mine if b["distance"] <= distance]
    return max(near, key=lambda b: b["distance"]) if near else None


def run_table(run: dict) -> dict[str, Any]:
    rows = []
    for d in run["distances"]:
        row: dict[str, Any] = {"distance": d}
        for b in run["bins"]:
            if b["distance"] == d:
                row[b["ablation"]] = {"mean": b["delta_mean"], "ci95": b["ci95"],
                                      "verdict": b["verdict"]}  # fmt: skip
        rows.append(row)
    judged = []
    for claim, published, ablation, distance, side, kind in CLAIMS:
        b = pick(run, ablation, distance, side)
        effect = None if b is None else {"mean": b["delta_mean"], "ci95": b["ci95"]}
        judged.append(
            {
                "claim": claim,
                "published": published,
                "ablation": ablation,
                "distance": None if b is None else b["distance"],
                "effect": effect,
                "result": claims.judge(None if b is None else b["ci95"], kind, MARGIN),
            }
        )
    return {
        "model": run["model"],
        "run": run["dir"],
        "command": run["command"],
        "texts": run["n"],
        "evaluator": run["evaluator"],
        "protocol": PROTOCOL.format(
            window=run["window"], last=run["window"] - 1, context=run["context"]
        ),
        "nll_intact": run["nll_intact"],
        "effective": run["effective"],
        "ablations": list(dict.fromkeys(b["ablation"] for b in run["bins"])),  # the probe's order
        "rows": rows,
        "claims": judged,
    }


def tables(run_dirs: list[Path]) -> list[dict]:
    return [run_table(load(d)) for d in run_dirs]


def markdown(tables_: list[dict]) -> str:
    out = [f"# How far back the context is used\n\nClaims of {CITATION}, judged on "
           f"context-ablation runs (`probes/report/context_use.py`; margin {MARGIN:g} % of the "
           "intact loss). Effects: 100 · mean(NLL ablated − NLL intact) / mean(NLL intact) over "
           "texts [95% t interval].\n"]  # fmt: skip
    for t in tables_:
        nll = t["nll_intact"]
        out.append(
            f"## {t['model']} · {t['texts']} texts · {t['evaluator']} · intact NLL "
            f"{nll['mean']:.3f}\n\nProtocol: {t['protocol']}.\n"
        )
        out.append("| d | " + " | ".join(t["ablations"]) + " |")
        out.append("|---" * (1 + len(t["ablations"])) + "|")
        for r in t["rows"]:
            cells = [claims.fmt(r.get(a), 2) for a in t["ablations"]]
            out.append(f"| {r['distance']:,} | " + " | ".join(cells) + " |")
        eff = t["effective"]
        reach = [f"{a}: {_d(eff[a]['by_mean'])} by the mean, {_d(eff[a]['by_interval'])} by "
                 "the interval" for a in t["ablations"]]  # fmt: skip
        out.append(f"\nThe loss stays within 1 % from d = {'; '.join(reach)}\n")
        out.append(
            "| claim | published (LSTM) | ours: ablation at d | effect % [95% CI] | verdict |"
        )
        out.append("|---|---|---|---|---|")
        for c in t["claims"]:
            at = "—" if c["distance"] is None else f"{c['ablation']} at {c['distance']:,}"
            out.append(
                f"| {c['claim']} | {c['published']} | {at} | {claims.fmt(c['effect'], 2)} | "
                f"{c['result']} |"
            )
        out.append("")
    return "\n".join(out)


def _d(d: int | None) -> str:
    return "none of the sweep" if d is None else f"{d:,}"


def main(argv: list[str]) -> int:
    return claims.main(argv, "context_use", tables, markdown)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
