"""Table 6: held-out NLL by evaluation attention length — PPL init, PPL best and Attn Len.

Text: held-out rows of the group's training stream (the "tiny" preset's mixture, a seed no
training or evaluation stream uses): `ROWS` rows of `SEGMENTS` × tgt_len tokens. Each model
streams every row with evaluation memory M for each M of `MEMS` (attention length L = M +
tgt_len, the paper's "attention length during evaluation"; a model trained without recurrence is
evaluated with a memory too, as the paper's no-recurrence rows are), at its default geometry
otherwise (clamp_len at its training attention length). The scored tokens are the same for every
L: those after the first max L tokens of a row, so that each has a full window at every L.

    NLL(L)      mean over rows of the row's mean NLL at L (nats; PPL = e^NLL)
    init        at the training attention length (train mem_len + tgt_len)
    best        the lowest NLL(L) of the sweep; Attn Len: the shortest L that reaches it
                (censored, "≥", when that is the sweep's last L: the loss still falls there)

Intervals: percentile bootstrap over rows (1,000 resamples, the same for every model).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from probes.api.model import geometry
from probes.engine.bootstrap import percentile_interval
from probes.paper.claims import interval
from probes.training.presets import resolve_dict
from probes.training.synth_data import synth_stream
from txl.train_config import TrainConfig

MEMS = (0, 64, 128, 192, 256, 384, 512, 640, 896, 1280)
ROWS = 16
SEGMENTS = 64
HELDOUT_SEED = 2_000_003  # apart from training (config seed) and its evaluation (1_000_003 + k)


def heldout_text(lang, vocab_size: int, rows: int = ROWS, segments: int = SEGMENTS):
    """(tokens, doc_ids), rows × (segments × tgt_len + 1), of the default recipe's stream."""

    table = resolve_dict("tiny")
    table["model"] = {**table["model"], "vocab_size": vocab_size}
    config = TrainConfig.from_dict(table)
    stream = synth_stream(lang, config, HELDOUT_SEED, rows, 0, 1, curriculum=False)
    parts = [stream.next_batch() for _ in range(segments)]
    tokens = np.concatenate([parts[0][0]] + [p[0][:, 1:] for p in parts[1:]], axis=1)
    docs = np.concatenate([parts[0][1]] + [p[1][:, 1:] for p in parts[1:]], axis=1)
    return tokens, docs


def nll_by_length(lm, tokens, docs, mems=MEMS, log=None) -> tuple[np.ndarray, list[int]]:
    """(len(mems), rows) row-mean NLL of the scored tokens at each memory; and the lengths L."""

    g0 = lm.default_geometry()
    lengths = [m + g0.tgt_len for m in mems]
    scored = docs >= 0
    scored[:, : max(lengths)] = False
    out = np.zeros((len(mems), tokens.shape[0]))
    for j, mem in enumerate(mems):
        r = lm.score(tokens, docs, scored, geometry(lm, mem_len=mem))
        nll = np.where(scored, r.nll, 0.0)
        out[j] = nll.sum(axis=1) / scored.sum(axis=1)
        if log:
            log(f"  {lm.info.id}: L={lengths[j]} NLL {out[j].mean():.4f}")
    if not np.all(np.isfinite(out)):
        raise RuntimeError(f"{lm.info.id}: a non-finite NLL")
    return out, lengths


def figures(means: np.ndarray, lengths: list[int], train_len: int) -> dict[str, Any]:
    """init / best / Attn Len from (len(lengths),) mean NLLs."""
    j_best = int(np.argmin(means))  # the first minimum: the shortest L that reaches it
    j_init = lengths.index(train_len)
    return {
        "nll_init": float(means[j_init]),
        "nll_best": float(means[j_best]),
        "attn_len": int(lengths[j_best]),
        "attn_len_censored": j_best == len(lengths) - 1,
        "nll_max_len": float(means[-1]),
    }


def table(
    nll: dict[str, np.ndarray],
    lengths: list[int],
    train_len: dict[str, int],
    resamples: np.ndarray,
) -> dict[str, Any]:
    """Per model: the figures with intervals; and the resampled figures for the claims."""

    rows, point, draws = {}, {}, []
    models = list(nll)
    point = {m: figures(nll[m].mean(axis=1), lengths, train_len[m]) for m in models}
    for idx in resamples:
        draws.append(
            {m: figures(nll[m][:, idx].mean(axis=1), lengths, train_len[m]) for m in models}
        )
    for m in models:
        f = point[m]
        rows[m] = {
            "train_attn_len": train_len[m],
            **f,
            "ppl_init": math.exp(f["nll_init"]),
            "ppl_best": math.exp(f["nll_best"]),
            "nll_init_ci95": interval([d[m]["nll_init"] for d in draws]),
            "nll_best_ci95": interval([d[m]["nll_best"] for d in draws]),
            "attn_len_ci95": percentile_interval([d[m]["attn_len"] for d in draws]),
            "by_length": nll[m].mean(axis=1).tolist(),
        }
    return {"lengths": lengths, "rows": rows, "point": point, "draws": draws}
