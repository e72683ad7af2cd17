"""Measure everything `nox -s paper` reports (probes/paper/__init__.py): each table's figures, the
resampled figures its claims are judged on, and the probe runs it took, as one dict."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import numpy as np

import probes
from probes.adapters.txl import load
from probes.engine.bootstrap import resamples
from probes.framework.models import PACKAGE_MODELS, resolve_model_path
from probes.library.recl import recl_values
from probes.paper import claims as cl
from probes.paper import lengths as L
from probes.paper import local
from probes.paper.group import DEEP, GROUP
from probes.texts.choose import load_language
from synth import rng as rnd

SEED = 0
RECL_GROUP = ("default", "shaw", "default-mem0", "learned-mem0")  # the paper's Table 8 group
RECL_MEM = 640
SPEED_LENGTHS = (800, 1800, 2800, 3800)  # the paper's Table 9 attention lengths


def _ci(ci) -> str:
    return "[—]" if ci is None else f"[{ci[0]:+.4f}, {ci[1]:+.4f}]"


def _bootstrap(n: int, name: str) -> np.ndarray:

    return resamples(n, rnd.make_rng(SEED, f"paper-{name}"))


def table6(models: dict, lang, log, quick: bool) -> dict[str, Any]:

    rows, segments = (4, 24) if quick else (L.ROWS, L.SEGMENTS)
    vocab = models["default"].info.vocab_size
    tokens, docs = L.heldout_text(lang, vocab, rows, segments)
    nll, train_len, lens = {}, {}, []
    for m in GROUP:
        lm = models[m.model]
        nll[m.model], lens = L.nll_by_length(lm, tokens, docs, log=log)
        train_len[m.model] = lm.info.train_mem_len + lm.info.train_tgt_len
    t = L.table(nll, lens, train_len, _bootstrap(rows, "table6"))
    point, draws = t.pop("point"), t.pop("draws")
    others = [m.model for m in GROUP if m.model != "default"]
    rel = [m.model for m in GROUP if m.encoding == "Ours"]

    def lowest_best(f):
        return all(f["default"]["nll_best"] < f[m]["nll_best"] for m in others)

    def longest_len(f):
        return all(f["default"]["attn_len"] > f[m]["attn_len"] for m in others)

    def shaw_second(f):
        rest = [m for m in others if m != "shaw"]
        return (
            f["default"]["nll_best"] < f["shaw"]["nll_best"] < min(f[m]["nll_best"] for m in rest)
        )

    def longer_helps_only_rel(f):
        return all((f[m]["nll_max_len"] < f[m]["nll_init"]) == (m in rel) for m in f)

    def gap(m, key="nll_best"):
        d = [x[m][key] - x["default"][key] for x in draws]
        return f"{m} − default {point[m][key] - point['default'][key]:+.4f} {_ci(cl.interval(d))}"

    t["claims"] = [
        cl.judge(
            "rel + recurrence has the lowest PPL best",
            lowest_best,
            point,
            draws,
            "NLL best, " + "; ".join(gap(m) for m in others),
        ),
        cl.judge(
            "rel + recurrence has the longest Attn Len",
            longest_len,
            point,
            draws,
            "Attn Len " + ", ".join(f"{m} {point[m]['attn_len']}" for m in point),
        ),
        cl.judge(
            "Shaw + recurrence is second: PPL best above rel + recurrence, below the rest",
            shaw_second,
            point,
            draws,
            "NLL best " + ", ".join(f"{m} {point[m]['nll_best']:.4f}" for m in point),
        ),
        cl.judge(
            "a longer evaluation attention length lowers the loss only with the paper's "
            "relative encoding (NLL at the longest L below NLL init exactly for the rel members)",
            longer_helps_only_rel,
            point,
            draws,
            "NLL(max L) − NLL(init): "
            + ", ".join(
                f"{m} {point[m]['nll_max_len'] - point[m]['nll_init']:+.4f}" for m in point
            ),
        ),
    ]
    t["text"] = {"rows": int(tokens.shape[0]), "tokens_per_row": int(tokens.shape[1]),
                 "scored_from": max(lens), "seed": L.HELDOUT_SEED}  # fmt: skip
    return t


def table7(models: dict, lang, log, quick: bool) -> dict[str, Any]:

    rows = 8 if quick else local.ROWS
    tokens, docs = local.local_text(lang, rows)
    nll = {m.model: local.row_nll(models[m.model], tokens, docs) for m in GROUP}
    nll["default @ mem 0"] = local.row_nll(models["default"], tokens, docs, mem_len=0)
    for k, v in nll.items():
        log(f"  table7: {k} NLL {v.mean():.4f}")
    res = _bootstrap(rows, "table7")
    point = {k: float(v.mean()) for k, v in nll.items()}
    draws = [{k: float(v[idx].mean()) for k, v in nll.items()} for idx in res]
    rows_out = {
        k: {"nll": point[k], "ppl": float(np.exp(point[k])),
            "nll_ci95": cl.interval([d[k] for d in draws])}
        for k in nll
    }  # fmt: skip

    def diff(a, b):
        ci = cl.interval([d[a] - d[b] for d in draws])
        return f"{a} − {b} {point[a] - point[b]:+.4f} {_ci(ci)}"

    claims = [
        cl.judge(
            "recurrence lowers the loss on local-only text (rel + recurrence below rel without)",
            lambda f: f["default"] < f["default-mem0"],
            point,
            draws,
            diff("default-mem0", "default")
            + "; the same weights without memory: "
            + diff("default @ mem 0", "default"),
        ),
        cl.judge(
            "the paper's relative encoding beats Shaw's on local-only text",
            lambda f: f["default"] < f["shaw"],
            point,
            draws,
            diff("shaw", "default"),
        ),
    ]
    return {"rows": rows_out, "claims": claims,
            "text": {"rows": rows, "tokens_per_row": int(tokens.shape[1]), "skip": local.SKIP}}  # fmt: skip


def table8(runs: Path, log, quick: bool) -> dict[str, Any]:
    s = probes.run(
        "recl", model=list(RECL_GROUP), mem=RECL_MEM, r="0.1,0.5,1.0", seed=SEED,
        out=str(runs), quick=quick, progress=False,
    )  # fmt: skip
    m = s.metrics
    arrays = np.load(Path(s.run_dir) / "tokens.npz", allow_pickle=False)
    losses, text = arrays["losses"], arrays["text"]
    contexts = list(m["contexts"])
    n_texts = int(text.max()) + 1
    boots = [
        np.concatenate([np.flatnonzero(text == k) for k in pick])
        for pick in _bootstrap(n_texts, "table8")
    ]
    ids = [x["id"] for x in m["models"]]
    name = dict(zip(ids, RECL_GROUP, strict=True))
    out_claims = []
    for r in m["rs"]:

        def figures(idx, r=r):
            vals = recl_values(losses[:, :, idx], contexts, r, m["threshold"])
            return {name[i]: v for i, (v, _) in zip(ids, vals, strict=True)}

        point = {name[i]: m["recl"][i][f"{r:g}"]["recl"] for i in ids}
        draws = [figures(idx) for idx in boots]
        out_claims.append(
            cl.judge(
                f"RECL at r = {r:g}: Transformer-XL > Shaw > vanilla (learned, no recurrence)",
                lambda f: f["default"] > f["shaw"] > f["learned-mem0"],
                point,
                draws,
                ", ".join(f"{k} {v}" for k, v in point.items()),
            )
        )
        out_claims.append(
            cl.judge(
                f"RECL at r = {r:g}: recurrence lengthens it (Transformer-XL > rel without)",
                lambda f: f["default"] > f["default-mem0"],
                point,
                draws,
                f"default {point['default']}, default-mem0 {point['default-mem0']}",
            )
        )
    log(f"  table8: {s.verdict}")
    rows = {name[i]: {f"{r:g}": m["recl"][i][f"{r:g}"] for r in m["rs"]} for i in ids}
    return {"rows": rows, "claims": out_claims, "run": s.run_dir, "delta": m["delta"],
            "start": m["start"], "contexts": contexts, "gains": {name[i]: m["gains"][i] for i in ids},
            "verdict": s.verdict}  # fmt: skip


def table9(runs: Path, log, quick: bool) -> dict[str, Any]:

    tgt = 64
    lengths = SPEED_LENGTHS[-2:] if quick else SPEED_LENGTHS
    s = probes.run(
        "speed", model="default", lengths=",".join(str(L - tgt) for L in sorted(lengths)),
        tokens=8 if quick else 16, repeats=5, seed=SEED, out=str(runs), progress=False,
    )  # fmt: skip
    bins = sorted(s.bins, key=lambda b: b["attn_len"])
    ratios = [b["ratio"] for b in bins]
    ranges = [b["ratio_range"] for b in bins]
    increasing = all(a < b for a, b in itertools.pairwise(ratios))
    separated = all(a[1] < b[0] for a, b in itertools.pairwise(ranges))
    result = (
        "holds" if increasing and separated else ("inconclusive" if increasing else "does not hold")
    )
    claim = {
        "claim": "the speed-up of the cache grows with the attention length",
        "point": increasing,
        "support": None,
        "result": result,
        "evidence": "ratio (range over repeats) "
        + ", ".join(f"L={b['attn_len']}: {b['ratio']:.1f}× [{r[0]:.1f}, {r[1]:.1f}]" for b, r in zip(bins, ranges, strict=True)),
        "resamples": 0,
    }  # fmt: skip
    log(f"  table9: {claim['evidence']}")
    return {"rows": bins, "claims": [claim], "run": s.run_dir, "evaluator": "hidden"}


def layered(runs: Path, log, quick: bool) -> dict[str, Any]:

    out = {}
    for name in DEEP:
        if not (PACKAGE_MODELS / name).is_dir():
            continue
        s = probes.run(
            "fact-swap", model=name, seed=SEED, out=str(runs), quick=quick, progress=False
        )
        by_reach = s.metrics["by_reach"]
        lay = [b for b in s.bins if b.get("reach") == "layered"]
        words = {b.get("verdict") for b in lay}
        result = (
            "holds" if "significant" in words
            else "does not hold" if words == {"negligible"}
            else "inconclusive"
        )  # fmt: skip
        claim = {
            "claim": f"{name}: a fact in the layered band moves the answer (it climbed through cached states)",
            "point": "significant" in words,
            "support": None,
            "result": result,
            "evidence": "; ".join(
                f"{b['distance_lo']}–{b['distance_hi']} ({b['reach']}): Δ {b['delta_mean']:+.4f} "
                f"[{b['ci95'][0]:+.4f}, {b['ci95'][1]:+.4f}] {b['verdict']}" for b in s.bins
            ),
            "resamples": 0,
        }  # fmt: skip
        log(f"  layered: {name}: {s.verdict}")
        out[name] = {"bins": s.bins, "by_reach": by_reach, "claims": [claim], "run": s.run_dir,
                     "geometry": s.geometry, "verdict": s.verdict}  # fmt: skip
    return out


def measure(out: Path, *, quick: bool = False, log=print) -> dict[str, Any]:
    """Every table; probe runs under `out/runs`. Returns the figures and timings."""

    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    lang = load_language(None)
    models = {m.model: load(resolve_model_path(m.model)) for m in GROUP}
    runs = out / "runs"
    result: dict[str, Any] = {"quick": quick, "group": [vars(m) for m in GROUP]}
    stages = (
        ("table6", lambda: table6(models, lang, log, quick)),
        ("table7", lambda: table7(models, lang, log, quick)),
        ("table8", lambda: table8(runs, log, quick)),
        ("table9", lambda: table9(runs, log, quick)),
        ("layered", lambda: layered(runs, log, quick)),
    )
    for name, stage in stages:
        t = time.perf_counter()
        log(f"paper: {name} …")
        result[name] = stage()
        timings[name] = round(time.perf_counter() - t, 1)
    timings["total"] = round(time.perf_counter() - t0, 1)
    result["timings_s"] = timings
    result["models"] = {k: {"id": v.info.id, "sha256": v.info.sha256} for k, v in models.items()}
    return result
