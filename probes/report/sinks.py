"""The attention-sink claims (Xiao et al. 2023, StreamingLLM) judged on long-nll runs.

`python -m probes.report.sinks RUN_DIR… [--out FILE.md]` reads long-nll run directories (only
their files: summary.json, run.json, tokens.npz, texts.npz), groups the runs that scored the
same texts (one model, one --seed, --length and --n: checked token for token), and per group
compares every cache policy with full attention and with a sliding window with recomputation,
text by text on the positions both scored after the cache fills (≥ the group's widest mem +
tgt). A difference is the mean over texts of each text's mean NLL difference, with its 95 %
Student-t interval over texts.

The published figures (perplexity on PG19 books): Llama-2-13B, window attention 5,158.07,
StreamingLLM (4 sink tokens + recent) 5.40, sliding window with recomputation 5.43 (Table 1);
Llama-2-7B with 0 / 1 / 2 / 4 / 8 initial tokens kept: 3,359.95 / 11.88 / 10.51 / 9.59 / 9.54
(Table 2). Each claim is judged by its interval against the margin m (0.05 nats/token, a 5 %
perplexity change):

    window attention hurts once the cache fills   Δ(stream − recompute): holds if CI > +m,
                                                  does not hold if CI < +m, else inconclusive
    4 sinks recover recomputation                 Δ(4 sinks − recompute): holds if CI < +m,
                                                  does not hold if CI > +m
    one sink recovers most of it                  Δ(1 sink − stream): holds if CI < −m,
                                                  does not hold if CI > −m
    8 sinks add little to 4                       Δ(8 − 4 sinks): holds if CI inside ±m,
                                                  does not hold if CI outside it

and, where a group has runs that differ only in tgt_len, what chunked scoring changes:
Δ(tgt_len 1 − tgt_len 64) per evaluator. Nothing here is asserted by a test: a claim that
does not hold on a model is a finding.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from probes import stats
from probes.report import claims

MARGIN = 0.05
CITATION = (
    "Xiao et al. 2023, Efficient Streaming Language Models with Attention Sinks (arXiv:2309.17453)"
)
PUBLISHED = {
    "table1": "Llama-2-13B: window attention 5,158.07, sliding window with recomputation 5.43, "
    "4 sinks + recent 5.40",
    "table2": "Llama-2-7B, 0 / 1 / 2 / 4 / 8 sinks: 3,359.95 / 11.88 / 10.51 / 9.59 / 9.54",
}


def load(run_dir: Path) -> dict[str, Any]:
    summary, run = claims.read_run(run_dir, "long-nll")
    with np.load(run_dir / "texts.npz", allow_pickle=False) as z:
        tokens = z["tokens"]
    with np.load(run_dir / "tokens.npz", allow_pickle=False) as z:
        scores = {k: z[k] for k in ("text", "position", "nll")}
    m = summary["metrics"]
    policy = m["policy"]
    mem, tgt = policy["mem_len"], policy["tgt_len"]
    positions = policy.get("cached_positions") or run["model"].get("extra", {}).get(
        "cached_positions"
    )
    return {
        "dir": run_dir,
        "model": summary["model"]["id"],
        "seed": summary["seed"],
        "dtype": summary.get("dtype"),
        "length": m["length"],
        # the first target a cut cache has cut off (long-nll v1 did not record it)
        "fill": m.get("fill_from") or (mem // tgt + 1) * tgt + 1,
        "evaluator": policy["evaluator"],
        "mem": mem,
        "tgt": tgt,
        "sinks": policy.get("sinks"),
        "positions": positions or "text",
        "tokens": tokens,
        "scores": scores,
        "elapsed_s": summary.get("elapsed_s"),
    }


def cache_size(r: dict) -> int:
    """Keys a query keeps besides its own segment: mem (+ the sinks), or the window's mem."""
    return r["mem"] + (r["sinks"] or 0)


def name(r: dict) -> str:
    where = ", positions re-indexed in the cache" if r["positions"] == "cache" else ""
    if r["evaluator"] == "sinks":
        k = r["sinks"]
        return f"{k} sink{'' if k == 1 else 's'} + {r['mem']} recent{where}"
    if r["evaluator"] == "stream":
        return f"window attention ({r['mem']} recent){where}"
    if r["evaluator"] == "window":
        every = np.diff(np.unique(r["scores"]["position"]))
        step = int(every.min()) if len(every) else 1
        sampled = f"; every {step}th token" if step > 1 else ""
        return f"sliding window with recomputation ({r['mem'] + r['tgt']}{sampled})"
    return r["evaluator"]


def per_text(r: dict, positions_by_text: dict[int, np.ndarray]) -> np.ndarray:
    """Each text's mean NLL over the given positions."""
    s = r["scores"]
    out = []
    for t, pos in sorted(positions_by_text.items()):
        at = s["text"] == t
        keep = np.isin(s["position"][at], pos)
        out.append(float(s["nll"][at][keep].mean()))
    return np.array(out)


def common_positions(runs: list[dict], start: int) -> dict[int, np.ndarray]:
    """Per text, the positions ≥ start that every run scored."""
    texts = sorted(set(runs[0]["scores"]["text"].tolist()))
    out = {}
    for t in texts:
        sets = [set(r["scores"]["position"][r["scores"]["text"] == t].tolist()) for r in runs]
        out[t] = np.array(sorted(p for p in set.intersection(*sets) if p >= start))
    return out


def difference(a: dict, b: dict, start: int) -> dict[str, Any]:
    """a − b, text by text, on the positions ≥ start both scored."""

    pos = common_positions([a, b], start)
    d = per_text(a, pos) - per_text(b, pos)
    desc = stats.describe(d)
    return {
        "mean": desc["mean"],
        "ci95": desc["ci95"],
        "n": len(d),
        "tokens_per_text": int(np.mean([len(p) for p in pos.values()])),
    }


def judge(d: dict | None, kind: str) -> str:
    """The claim's verdict on a difference (`probes.report.claims.judge`, margin MARGIN)."""
    return claims.judge(None if d is None else d.get("ci95"), kind, MARGIN)


def identity(r: dict) -> tuple:
    return (r["evaluator"], r["sinks"], r["mem"], r["tgt"], r["positions"])


def groups(runs: list[dict]) -> list[list[dict]]:
    """Runs that scored the same texts at one dtype, in the order first seen; two runs of one
    policy in a group are refused (which one a claim rests on would be a guess)."""
    out: dict[tuple, list[dict]] = {}
    for r in runs:
        key = (r["model"], r["seed"], r["length"], r["tokens"].shape, r["dtype"])
        out.setdefault(key, []).append(r)
    for members in out.values():
        seen = {}
        for r in members:
            if not np.array_equal(r["tokens"], members[0]["tokens"]):
                raise ValueError(
                    f"{r['dir']} and {members[0]['dir']} claim the same texts but differ in "
                    "their tokens"
                )
            if identity(r) in seen:
                raise ValueError(
                    f"{r['dir']} and {seen[identity(r)]} ran the same policy on the same texts; "
                    "give one of them"
                )
            seen[identity(r)] = r["dir"]
    return list(out.values())


def find(group: list[dict], evaluator: str, *, sinks=None, tgt=None, positions=None, cache=None):
    """The run of a policy: `cache` (keys kept besides the segment) picks the cache size."""
    for r in group:
        if r["evaluator"] != evaluator or (sinks is not None and r["sinks"] != sinks):
            continue
        if tgt is not None and r["tgt"] != tgt:
            continue
        if positions is not None and r["positions"] != positions:
            continue
        if cache is not None and cache_size(r) != cache:
            continue
        return r
    return None


def group_table(group: list[dict]) -> dict[str, Any]:
    tgt = max(r["tgt"] for r in group)
    main = [r for r in group if r["tgt"] == tgt]
    start = max(r["fill"] for r in main)
    full = find(main, "full")
    rows = []
    order = {"full": 0, "window": 1, "stream": 2, "sinks": 3}
    for r in sorted(main, key=lambda r: (order.get(r["evaluator"], 9), r["positions"],
                                         r["sinks"] or 0)):  # fmt: skip
        pos = common_positions([r], start)
        nll = float(per_text(r, pos).mean())
        rows.append(
            {
                "policy": name(r),
                "evaluator": r["evaluator"],
                "sinks": r["sinks"],
                "mem": r["mem"],
                "tgt": r["tgt"],
                "positions": r["positions"],
                "nll_after_fill": nll,
                "ppl_after_fill": math.exp(nll),
                "vs_full": difference(r, full, start) if full and r is not full else None,
                "run": str(r["dir"]),
                "elapsed_s": r["elapsed_s"],
            }
        )

    def diff(a, b):
        return difference(a, b, start) if a is not None and b is not None else None

    claims = []
    streams = sorted((r for r in main if r["evaluator"] == "stream"),
                     key=lambda r: (r["positions"] != "text", cache_size(r)))  # fmt: skip
    for stream in streams:  # one block of claims per cache size and position convention
        positions = stream["positions"]
        size = cache_size(stream)  # the cache every compared policy keeps
        recompute = find(main, "window", cache=size)
        s1, s4, s8 = (find(main, "sinks", sinks=k, positions=positions, cache=size)
                      for k in (1, 4, 8))  # fmt: skip
        where = (
            f" (cache {size:,}" + (", positions re-indexed" if positions == "cache" else "") + ")"
        )
        claims += [
            {"claim": f"window attention hurts once the cache fills{where}: "
                      "Δ(window − recompute) > +m",
             "published": PUBLISHED["table1"], "difference": diff(stream, recompute),
             "kind": "above"},
            {"claim": f"4 sinks + recent recover recomputation{where}: "
                      "Δ(4 sinks − recompute) < +m",
             "published": PUBLISHED["table1"], "difference": diff(s4, recompute),
             "kind": "not_above"},
            {"claim": f"one sink recovers most of the loss{where}: Δ(1 sink − window) < −m",
             "published": PUBLISHED["table2"], "difference": diff(s1, stream), "kind": "below"},
            {"claim": f"8 sinks add little to 4{where}: Δ(8 − 4 sinks) within ±m",
             "published": PUBLISHED["table2"], "difference": diff(s8, s4), "kind": "within"},
        ]  # fmt: skip
    for c in claims:
        c["result"] = judge(c["difference"], c.pop("kind"))
    chunking = []
    for ev in ("stream", "sinks"):
        one, many = find(group, ev, tgt=1), find(group, ev, tgt=64)
        if one is not None and many is not None:
            chunking.append(
                {
                    "policy": name(one),
                    "difference": difference(one, many, max(one["fill"], many["fill"])),
                }
            )
    first = group[0]
    return {
        "model": first["model"],
        "length": first["length"],
        "texts": len(first["tokens"]),
        "dtype": first["dtype"],
        "after_fill_from": start,
        "rows": rows,
        "claims": claims,
        "chunking": chunking,
    }


def markdown(tables: list[dict]) -> str:
    out = [f"# Attention sinks on real text\n\nClaims of {CITATION}, judged on long-nll runs "
           f"(`probes/report/sinks.py`; margin m = {MARGIN} nats/token).\n"]  # fmt: skip
    for t in tables:
        out.append(
            f"## {t['model']} · {t['texts']} texts of {t['length']:,} tokens · after the cache "
            f"fills (positions ≥ {t['after_fill_from']:,})\n"
        )
        if t["rows"]:
            out.append("| policy | NLL | PPL | Δ vs full [95% CI] |")
            out.append("|---|---|---|---|")
            for r in t["rows"]:
                out.append(
                    f"| {r['policy']} | {r['nll_after_fill']:.3f} | {r['ppl_after_fill']:.2f} "
                    f"| {claims.fmt(r['vs_full'])} |"
                )
            out.append("")
            out.append("| claim | published | ours: Δ [95% CI] | verdict |")
            out.append("|---|---|---|---|")
            for c in t["claims"]:
                out.append(
                    f"| {c['claim']} | {c['published']} | {claims.fmt(c['difference'])} | "
                    f"{c['result']} |"
                )
            out.append("")
        if t["chunking"]:
            out.append("One token per step against chunks of 64 (same texts, same cache):\n")
            out.append("| policy | Δ(tgt_len 1 − tgt_len 64) [95% CI] |")
            out.append("|---|---|")
            for c in t["chunking"]:
                out.append(f"| {c['policy']} | {claims.fmt(c['difference'])} |")
            out.append("")
    return "\n".join(out)


def tables(run_dirs: list[Path]) -> list[dict]:
    return [group_table(g) for g in groups([load(d) for d in run_dirs])]


def main(argv: list[str]) -> int:
    return claims.main(argv, "sinks", tables, markdown)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
