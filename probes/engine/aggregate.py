"""Paired records aggregated: per-pair deltas into bins, run metrics and by-reach figures, the
run's own checks and the per-token arrays (what `probes.engine.paired.summarize` puts together;
statistics from `probes.stats`)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from probes import stats
from probes.api.checks import zero_check
from probes.api.distance_bins import label_bin
from probes.api.horizon import REACH_LABELS, WITHIN_HORIZON

NO_REACH = {
    "reach": None,
    "within_horizon": None,
    "reach_fraction": None,
    "direct_window": None,
    "layered_reach": None,
}


def _flags(records: list[dict], key: str) -> np.ndarray:
    return np.array([r[key] for r in records], dtype=bool)


def contrast(records: list[dict]) -> dict[str, Any]:
    """The answer contrast of a set of pairs: in the base, in the variant, their shift."""
    cb = np.array([r["contrast_base"] for r in records])
    cv = np.array([r["contrast_variant"] for r in records])
    return {
        "contrast_base": stats.describe(cb),
        "contrast_variant": stats.describe(cv),
        "contrast_shift": stats.describe(cb - cv),
        "accuracy_variant_alt": stats.accuracy(_flags(records, "correct_variant_alt"))["accuracy"],
    }


def paired_bins(
    groups: list[dict], records: list[dict], toks: list[dict], margin: float
) -> list[dict]:
    """One bin per group: its fields, the delta statistics (Holm across the groups), where its
    answer tokens fall (direct / layered / beyond), accuracies and the contrast."""
    by_group: dict[int, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        by_group[r["group"]].append(i)
    deltas = [np.array([records[i]["delta"] for i in by_group[g]]) for g in range(len(groups))]
    group_stats = stats.grouped(deltas, margin)
    has_alt = any("contrast_base" in r for r in records)
    bins = []
    for g in range(len(groups)):
        ids = by_group[g]
        recs = [records[i] for i in ids]
        b = {**groups[g], **group_stats[g]}
        b["distance_mean"] = float(np.mean([r["distance"] for r in recs])) if ids else None
        b.update(reach_of([toks[i] for i in ids]) or NO_REACH)
        b.update(stats.accuracy(_flags(recs, "correct_base")))
        b["accuracy_variant"] = stats.accuracy(_flags(recs, "correct_variant"))["accuracy"]
        b.update(answer_prob(recs))
        if has_alt:
            b.update(contrast(recs))
        bins.append(b)
    return bins


def reach_of(
    toks: list[dict], select: str | None = None, value: bool = True, distance: str = "distance"
) -> dict | None:
    """Where a bin's scored tokens fall (probes.api.distance_bins.label_bin), over every token of `toks`
    or those whose `select` flag equals `value`, at the distances `toks[distance]` (from what
    the bin measures)."""

    def values(key: str) -> list:
        return [x for t in toks for x in (t[key] if select is None else t[key][t[select] == value])]

    own = distance == "distance" and all("labels" in t for t in toks)  # Horizon.label's
    return label_bin(
        values(distance), values("direct"), values("reach"), values("labels") if own else None
    )


def by_group(groups: list[dict], records: list[dict]) -> list[list[dict]]:
    """The records of each group, in group order."""
    return [[r for r in records if r["group"] == g] for g in range(len(groups))]


def family_bins(
    groups: list[dict],
    records: list[dict],
    toks: list[dict],
    families: list[tuple[dict, str, bool, str]],
    select: str,
    margin: float,
) -> list[dict]:
    """Bins of several per-pair measures over the same groups. Each family is (its fields, the
    record key of its pair value, which tokens it measures: `toks[select] == value`, and the
    token array of distances from what it measures); it gets one bin per group, with Holm
    across the groups of that family, and the reach of its tokens at those distances."""
    recs = by_group(groups, records)
    tok_groups = [[t for t, r in zip(toks, records, strict=True) if r["group"] == g]
                  for g in range(len(groups))]  # fmt: skip
    bins = []
    for fields, key, value, distance in families:
        fam = stats.grouped([np.array([r[key] for r in grp]) for grp in recs], margin)
        for g, grp in enumerate(recs):
            b = {**groups[g], **fields, **fam[g]}
            b["distance_mean"] = float(np.mean([r["distance"] for r in grp])) if grp else None
            b.update(
                reach_of(tok_groups[g], select, value, distance)
                or {"reach": None, "within_horizon": None}
            )
            bins.append(b)
    return bins


def answer_prob(records: list[dict]) -> dict[str, float | None]:
    """Mean over pairs of the answer's probability (teacher forcing) in base and variant: where
    a pretrained model spreads its mass, accuracy (argmax) can read 0 while p(answer) says how
    close it came. Records without the fields (runs of an earlier version) give None."""
    out: dict[str, float | None] = {}
    for side in ("base", "variant"):
        vals = [r[f"p_answer_{side}"] for r in records if f"p_answer_{side}" in r]
        out["answer_prob" if side == "base" else "answer_prob_variant"] = (
            float(np.mean(vals)) if vals else None
        )
    return out


def paired_metrics(records: list[dict], primary: list[dict], has_alt: bool) -> dict[str, Any]:
    """Run metrics: the headline delta and its by-reach split over the `primary` pairs,
    accuracies and the contrast over all pairs."""
    d = stats.describe(np.array([r["delta"] for r in primary]))
    acc = stats.accuracy(_flags(records, "correct_base"))
    m: dict[str, Any] = {
        "delta_mean": d["mean"],
        "delta_ci95": d["ci95"],
        "p_value": d["p_value"],
        "accuracy": acc["accuracy"],
        "accuracy_ci95": acc["accuracy_ci95"],
        "accuracy_variant": stats.accuracy(_flags(records, "correct_variant"))["accuracy"],
        **answer_prob(records),
    }
    if has_alt:
        m.update(contrast(records))
    m["by_reach"] = by_reach(primary)
    m["by_horizon"] = by_horizon(primary)
    return m


def by_horizon(records: list[dict]) -> dict[str, dict]:
    """Delta (describe()) and accuracy of the pairs whose fact is inside the direct window of
    the first answer token or in a recurrent state (whose reach is unbounded) (`within`), and of
    the rest, layered or beyond (`beyond`)."""
    out = {}
    for side, sel in (
        ("within", [r for r in records if r["reach"] in WITHIN_HORIZON]),
        ("beyond", [r for r in records if r["reach"] not in WITHIN_HORIZON]),
    ):
        d = stats.describe(np.array([r["delta"] for r in sel]))
        d["accuracy"] = stats.accuracy(_flags(sel, "correct_base"))["accuracy"]
        out[side] = d
    return out


def by_reach(
    records: list[dict], key: str = "delta", accuracy: str | None = "correct_base"
) -> dict[str, dict]:
    """The pair value `key` (and the accuracy flag `accuracy`, if any) of the pairs whose first
    answer token sees the edit direct / layered / beyond."""
    out = {}
    for label in REACH_LABELS:
        sel = [r for r in records if r["reach"] == label]
        if not sel:
            continue
        d = stats.describe(np.array([r[key] for r in sel]))
        out[label] = {
            "n": d["n"],
            "delta_mean": d["mean"],
            "ci95": d["ci95"],
            "p_value": d["p_value"],
        }
        if accuracy is not None:
            out[label]["accuracy"] = stats.accuracy(_flags(sel, accuracy))["accuracy"]
    return out


def paired_checks(records: list[dict], tol: float) -> dict[str, dict]:
    """identical_prefix and beyond_reach_zero (see probes.engine.paired)."""
    exact = [r["beyond_exact"] for r in records if r["beyond_tokens"]]
    return {
        "identical_prefix": zero_check(
            "tokens before the first difference score the same in base and variant",
            covered=sum(r.get("prefix_tokens", 0) for r in records),
            worst=max((r["prefix_max_abs"] for r in records), default=0.0),
            tolerance=tol,
            why_empty="no pair has a token before its first difference that is not scored",
        ),
        "beyond_reach_zero": zero_check(
            "answer tokens whose layered reach excludes the edit have delta 0",
            covered=sum(r["beyond_tokens"] for r in records),
            worst=max((r["beyond_max_abs"] for r in records), default=0.0),
            tolerance=tol,
            why_empty="every answer token's layered reach includes its edit (or the edit moves "
            "later tokens)",
            n_tokens=sum(r["beyond_tokens"] for r in records),
            exact_zero_pairs=sum(exact),
            pairs=len(exact),
        ),
    }


def flat_arrays(
    records: list[dict], toks: list[dict], keys: list[str], length_key: str
) -> dict[str, np.ndarray]:
    """tokens.npz: every scored token of every pair, flat, with its pair and group (a key a pair
    lacks is NaN there)."""
    out: dict[str, np.ndarray] = {}
    counts = np.array([len(t[length_key]) for t in toks], dtype=np.int64)
    out["pair"] = np.repeat(np.arange(len(toks), dtype=np.int64), counts)
    out["group"] = np.repeat(np.array([r["group"] for r in records], dtype=np.int64), counts)
    for k in keys:
        parts = [
            np.asarray(t.get(k, np.full(c, np.nan))) for t, c in zip(toks, counts, strict=True)
        ]
        out[k] = np.concatenate(parts) if parts else np.zeros(0)
    return out


def token_arrays(records: list[dict], toks: list[dict]) -> dict[str, np.ndarray]:
    """The paired engine's tokens.npz: positions in both texts, distances, both NLLs, the two
    lengths and the reach label of every answer token."""
    keys = ["position_base", "position_variant", "distance", "nll_base", "nll_variant"]
    keys += ["direct", "reach"]
    if any("nll_base_alt" in t for t in toks):
        keys += ["nll_base_alt", "nll_variant_alt"]
    out = flat_arrays(records, toks, keys, "position_base")
    out["reach_label"] = np.concatenate(
        [[REACH_LABELS.index(x) for x in t["labels"]] for t in toks]
    ).astype(np.int8)
    return out
