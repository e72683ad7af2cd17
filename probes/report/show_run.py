"""What `probe show` shows of a run, read from its directory only (summary.json, samples.jsonl,
tokens.npz, texts.npz; run.json is read by the caller): per pair, its base and variant rows as
token ids and strings, each token's NLL in its own text and Δ = NLL(variant) − NLL(base) where
both texts scored it, the edit, fact and answer marked, and where the answer's direct window and
layered reach lie; for a sweep probe, its curve per text.

Δ exists only for tokens the run scored in both texts that predict the same token: the answer
tokens always, and with `--token-view N` the N tokens after the edit and the N before the
answer (tokens.npz's `view_*` arrays). A token is not shaded where it has none.

The edit is where the two rows differ: from their first different token to their common suffix
(rows end at the last scored token, so an edit that changes length keeps the end aligned). The
fact is marked at its last token (distances run from it: the answer's first token minus the
pair's distance). Files are read bounded (txl.files) and numeric only (allow_pickle=False).
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from txl import files

EDIT, FACT, ANSWER = 1, 2, 4  # mark bits
DIRECT, LAYERED, BEYOND = 1, 2, 3  # where a token lies for the answer's first token (0: after it)
ARRAYS_LIMIT = 1 << 30  # a run's texts.npz / tokens.npz, read and unpacked


class ShowError(ValueError):
    """A run `probe show` cannot show; the message is one line: what is missing, how to get it."""


def read_npz(path: Path) -> dict[str, np.ndarray] | None:
    """A run's .npz file (None if absent): a regular file within ARRAYS_LIMIT whose members
    unpack to within it too, numeric arrays only."""
    if not (path.exists() or path.is_symlink()):
        return None
    try:
        raw = files.read_bytes(path, "json", "run arrays", limit=ARRAYS_LIMIT)
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            if sum(i.file_size for i in z.infolist()) > ARRAYS_LIMIT:
                raise ShowError(f"{str(path)!r} unpacks to more than {ARRAYS_LIMIT:,} bytes")
        with np.load(io.BytesIO(raw), allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except files.FileRefused as e:
        raise ShowError(str(e)) from None
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
        raise ShowError(
            f"{str(path)!r} is not the .npz `probe run` writes ({str(e)[:80]}); run it again"
        ) from None


def recorded_strings(texts: dict[str, np.ndarray] | None) -> dict[int, str] | None:
    """texts.npz's token strings (probes/framework/token_strings.py), None if not recorded."""
    if texts is None or "vocab_ids" not in texts:
        return None
    ids, off, utf8 = texts["vocab_ids"], texts["vocab_offsets"], texts["vocab_utf8"].tobytes()
    if len(off) != len(ids) + 1:
        raise ShowError("texts.npz: vocab_offsets does not match vocab_ids; run it again")
    return {int(i): utf8[off[j] : off[j + 1]].decode("utf-8", "replace") for j, i in enumerate(ids)}


@dataclass
class RunArrays:
    """A run's per-token files and samples."""

    path: Path
    samples: dict[int, dict]  # by pair (or text) index
    tokens: dict[str, np.ndarray] | None
    texts: dict[str, np.ndarray] | None

    @property
    def kind(self) -> str:
        """ "paired" (base and variant rows), "sweep" (losses by context length) or "other"."""
        if self.tokens is not None and "position_base" in self.tokens:
            return "paired"
        if self.tokens is not None and "contexts" in self.tokens:
            return "sweep"
        return "other"

    @property
    def viewed(self) -> bool:
        return self.tokens is not None and "view_pair" in self.tokens

    def ids_used(self) -> np.ndarray:
        t = self.texts or {}
        keys = [k for k in ("base_tokens", "variant_tokens", "alt_tokens") if k in t]
        return np.unique(np.concatenate([t[k] for k in keys])) if keys else np.zeros(0, int)


def read_run(path: Path) -> RunArrays:
    samples = {}
    file = path / "samples.jsonl"
    if file.exists() or file.is_symlink():
        try:
            lines = files.read_jsonl(file, "metrics", "samples")
        except files.FileRefused as e:
            raise ShowError(str(e)) from None
        for i, rec in enumerate(lines):
            if isinstance(rec, dict):
                samples[int(rec.get("pair", rec.get("text", i)))] = rec
    return RunArrays(path, samples, read_npz(path / "tokens.npz"), read_npz(path / "texts.npz"))


@dataclass
class Side:
    """One text of a pair: its tokens, what the page draws on each."""

    ids: np.ndarray
    nll: np.ndarray  # NLL of each token in this text (nan: not scored)
    other: np.ndarray  # the same token's NLL in the other text (nan: not scored there)
    delta: np.ndarray  # NLL(variant) − NLL(base) (nan: not scored in both)
    mark: np.ndarray  # EDIT | FACT | ANSWER bits
    reach: np.ndarray  # DIRECT / LAYERED / BEYOND for the answer's first token, 0 after it
    doc: np.ndarray  # document ids


@dataclass
class PairRows:
    pair: int
    group: int
    sample: dict[str, Any]
    base: Side
    variant: Side
    notes: list[str] = field(default_factory=list)


def pair_count(arrays: RunArrays) -> int:
    return max(0, len(arrays.texts["base_offsets"]) - 1) if arrays.texts else 0


def first_of_each_group(arrays: RunArrays) -> list[int]:
    """The first pair of every group (bin), in group order."""
    pairs, groups = arrays.tokens["pair"], arrays.tokens["group"]
    first: dict[int, int] = {}
    for p, g in sorted(zip(pairs.tolist(), groups.tolist(), strict=True)):
        first.setdefault(g, p)
    return [first[g] for g in sorted(first)]


def _row(texts, side: str, k: int) -> tuple[np.ndarray, np.ndarray]:
    a, b = texts[f"{side}_offsets"][k : k + 2]
    return texts[f"{side}_tokens"][a:b].astype(np.int64), texts[f"{side}_doc_ids"][a:b]


def _edit_span(base: np.ndarray, variant: np.ndarray) -> tuple[int, int, int]:
    """(first differing position, end of the edit in base, end in variant)."""
    n = min(len(base), len(variant))
    diff = np.flatnonzero(base[:n] != variant[:n])
    first = int(diff[0]) if diff.size else n
    if first == n and len(base) == len(variant):
        return n, n, n
    suffix = 0
    while (
        suffix < min(len(base), len(variant)) - first
        and base[len(base) - 1 - suffix] == variant[len(variant) - 1 - suffix]
    ):
        suffix += 1
    return first, len(base) - suffix, len(variant) - suffix


def pair_rows(arrays: RunArrays, k: int) -> PairRows:
    """Pair k's two rows with their NLLs, Δ, marks and the answer's reach (module docstring)."""
    texts, tok = arrays.texts, arrays.tokens
    b_ids, b_doc = _row(texts, "base", k)
    v_ids, v_doc = _row(texts, "variant", k)
    nb, nv = len(b_ids), len(v_ids)
    sides = {
        "base": Side(b_ids, *(np.full(nb, np.nan) for _ in range(3)), np.zeros(nb, np.int8),
                     np.zeros(nb, np.int8), b_doc),
        "variant": Side(v_ids, *(np.full(nv, np.nan) for _ in range(3)), np.zeros(nv, np.int8),
                        np.zeros(nv, np.int8), v_doc),
    }  # fmt: skip
    base, variant = sides["base"], sides["variant"]

    def put(pb, pv, nll_b, nll_v) -> None:
        ok = (pb < nb) & (pv < nv) & (pb >= 0) & (pv >= 0)
        pb, pv, nll_b, nll_v = pb[ok], pv[ok], nll_b[ok], nll_v[ok]
        base.nll[pb], variant.nll[pv] = nll_b, nll_v
        base.other[pb], variant.other[pv] = nll_v, nll_b
        same = b_ids[pb] == v_ids[pv]  # an edited token is another token: no Δ
        base.delta[pb[same]] = variant.delta[pv[same]] = (nll_v - nll_b)[same]

    if arrays.viewed:
        m = tok["view_pair"] == k
        put(tok["view_position_base"][m], tok["view_position_variant"][m],
            tok["view_nll_base"][m], tok["view_nll_variant"][m])  # fmt: skip
    m = tok["pair"] == k
    ab, av = tok["position_base"][m], tok["position_variant"][m]
    put(ab, av, tok["nll_base"][m], tok["nll_variant"][m])
    base.mark[ab[ab < nb]] |= ANSWER
    variant.mark[av[av < nv]] |= ANSWER
    first, end_b, end_v = _edit_span(b_ids, v_ids)
    base.mark[first:end_b] |= EDIT
    variant.mark[first:end_v] |= EDIT
    sample = arrays.samples.get(k, {})
    if ab.size:
        fact = int(ab[0]) - int(tok["distance"][m][0])
        if 0 <= fact < nb:
            base.mark[fact] |= FACT
            shifted = fact if fact < first else fact + (nv - nb) if fact >= end_b else None
            if shifted is not None and 0 <= shifted < nv:
                variant.mark[shifted] |= FACT
        for side, a0 in ((base, int(ab[0])), (variant, int(av[0]))):
            direct = sample.get("direct_window", int(tok["direct"][m][0]))
            reach = sample.get("layered_reach", int(tok["reach"][m][0]))
            pos = np.arange(len(side.ids))
            side.reach[:] = np.where(pos >= a0, 0, np.where(
                pos >= a0 - direct, DIRECT, np.where(pos >= a0 - reach, LAYERED, BEYOND)))  # fmt: skip
    group = int(tok["group"][m][0]) if m.any() else int(sample.get("group", 0))
    return PairRows(k, group, sample, base, variant)


def shown_positions(side: Side, context: int, limit: int) -> list[tuple[int, int]]:
    """The spans of a row to show, [start, end): the whole row when it is at most `limit`
    tokens, else its first tokens and `context` tokens around every marked or Δ-carrying
    stretch (the edit, the view, the answer), the rest elided."""
    n = len(side.ids)
    if n <= limit:
        return [(0, n)]
    keep = np.zeros(n, dtype=bool)
    keep[: min(8, n)] = True
    for p in np.flatnonzero((side.mark != 0) | np.isfinite(side.delta)):
        keep[max(0, p - context) : p + context + 1] = True
    spans, start = [], None
    for p, k in enumerate([*keep.tolist(), False]):
        if k and start is None:
            start = p
        elif not k and start is not None:
            spans.append((start, p))
            start = None
    merged: list[tuple[int, int]] = []
    for a, b in spans:  # an elision shorter than a few tokens is not worth its marker
        if merged and a - merged[-1][1] <= 4:
            merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return merged


def sweep_curves(arrays: RunArrays) -> tuple[list[int], dict[int, list[float]], str]:
    """A sweep probe's curve per text: (context lengths, {text: mean NLL per context}, what)."""
    tok = arrays.tokens
    contexts = [int(c) for c in tok["contexts"]]
    if "nll_truncated" in tok:  # context-sweep: (contexts, tokens), tokens tagged by text
        loss, texts, what = (
            tok["nll_truncated"],
            tok["text"],
            "mean NLL over the text's scored tokens",
        )
    else:  # recl: (models, contexts, tokens); the first model
        loss, texts, what = tok["losses"][0], tok["text"], "mean NLL over the text's tokens"
    curves = {
        int(t): [float(np.nanmean(loss[c, texts == t])) for c in range(len(contexts))]
        for t in np.unique(texts)
    }
    return contexts, curves, what
