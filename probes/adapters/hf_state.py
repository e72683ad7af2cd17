"""The `state` evaluator: recurrent transformers causal LMs (Mamba, Mamba-2, Falcon-Mamba, RWKV)
behind the LossModel protocol. docs/design.md, *Models this project did not train*, says what it
means; this docstring says how it is computed. `probes.adapters.hf.load` sends a recurrent
`model_type` here.

What the transformers source (5.x) does with a state, and what follows from it:
- Mamba's mixer, given a multi-token input over an existing cache, runs its selective scan from a
  zero state (only the convolution state carries); only one-token calls continue the recurrent
  state. RWKV carries its state across multi-token calls. So a row is never continued from a
  cache here: every forward starts from a fresh state and covers everything it needs.
- Padding is zeroed by Mamba's `attention_mask` but still steps the scan, so a padded position
  can change the state. Rows here are right-padded only (padding after the last input a forward
  needs is causal: it changes nothing before it), and no attention mask is passed.

Evaluators (`--evaluator`):
- `state` (the default): **carry** — each row in one forward from a fresh state, split only at
  padding; **reset** — each document of a row scored as its own forward from a fresh state (the
  row is cut at every document boundary), so document B's losses depend on nothing before its
  `<eod>`: the first token of a document is predicted from the end of the previous one, as with
  the attention evaluators, and everything after it from B's own fresh state. The reach is
  unbounded (`probes.api.horizon.Horizon(state=True)`: direct window 0, bins labelled "state", the
  beyond-reach check not applicable). Neither `--mem` nor `--tgt-len` changes a score: `--mem`
  other than 0 is refused (it would suggest a window; use `window`), `--tgt-len` is recorded and
  unused. Every piece is its own forward, and all pieces of one `score` call are padded to one
  length, so a piece's arithmetic depends on its own tokens and that shape only (a
  multi-threaded CPU matrix product may round a row by where it sits in a batch).
- `window`: every scored token t predicted by a fresh forward (a fresh state) over the
  W = mem + tgt_len tokens before it (from its document's start under reset) — exact, one
  forward per scored token; also `score_window`, for context sweeps and RECL.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

from probes.adapters.hf_scoring import HFBase, blank_scores, token_nll, window_jobs
from probes.api.errors import AdapterError
from probes.api.horizon import Horizon
from probes.api.model import ModelInfo, TokenScores, check_inputs
from txl.geometry import Geometry

STATE_EVALUATORS = ("state", "window")
DEFAULT_STATE_EVALUATOR = "state"
DEFAULT_TGT_LEN = 64
WINDOW_MEM = 192  # `window`'s default mem: W = 256
BUDGET = 400 * 2**20  # bytes of activations per forward


def runs(doc_ids: np.ndarray, reset: bool) -> list[tuple[int, int]]:
    """[a, b) spans of one row's inputs forwarded from one fresh state: maximal runs of one
    document (reset) or of non-padding tokens (carry)."""
    d = np.asarray(doc_ids)
    if d.size == 0:
        return []
    key = d if reset else (d >= 0).astype(np.int64)
    cuts = np.flatnonzero(np.diff(key) != 0) + 1
    bounds = np.concatenate([[0], cuts, [d.size]])
    return [(int(a), int(b)) for a, b in itertools.pairwise(bounds) if d[a] >= 0]


class HFStateModel(HFBase):
    """A recurrent transformers causal LM behind the LossModel protocol (module docstring)."""

    def __init__(self, model, info: ModelInfo, *, evaluator: str, dtype: str = "float32"):
        if evaluator not in STATE_EVALUATORS:
            raise AdapterError(
                f"--evaluator {evaluator!r} does not fit a recurrent model; use "
                f"{', '.join(STATE_EVALUATORS)}"
            )
        super().__init__(model, info, evaluator=evaluator, dtype=dtype)
        if self.dtype == torch.float64:
            with torch.inference_mode():
                probe = self._forward(np.zeros((1, 2), dtype=np.int64))
            if probe.dtype != torch.float64:  # the model casts its own logits (Mamba does)
                raise AdapterError(
                    f"--dtype float64: model_type {self.config.model_type!r} returns float32 "
                    "logits whatever its weights, so its loss cannot be float64; use float32"
                )

    # -- geometry and horizon ---------------------------------------------------------------

    def default_geometry(self) -> Geometry:
        mem = WINDOW_MEM if self.evaluator == "window" else 0
        return Geometry(tgt_len=DEFAULT_TGT_LEN, mem_len=mem, clamp_len=None)

    def check_geometry(self, geometry: Geometry) -> None:
        """ValueError (one line) for a geometry this adapter cannot honour."""
        if geometry.same_length:
            raise ValueError("--same-length is a Transformer-XL option; drop it")
        if geometry.clamp_len is not None:
            raise ValueError("--clamp-len is a Transformer-XL option; drop it")
        if self.evaluator == "state" and geometry.mem_len != 0:
            raise ValueError(
                f"--mem {geometry.mem_len}: --evaluator state carries the recurrent state over "
                "the whole row (each document under --reset), so no memory length applies; "
                "drop --mem, or use --evaluator window for a fresh state over mem + tgt_len"
            )

    def window(self, geometry: Geometry) -> int:
        return geometry.mem_len + geometry.tgt_len

    def horizon(self, geometry: Geometry) -> Horizon:
        if self.evaluator == "window":
            return Horizon.of(geometry, self.n_layer, window=self.window(geometry))
        return Horizon.of(geometry, self.n_layer, state=True)

    def _per_token_bytes(self) -> int:
        c = self.config
        d = int(getattr(c, "hidden_size", 256))
        inner = int(getattr(c, "intermediate_size", 0) or 2 * d)
        n = int(getattr(c, "state_size", 0) or 1)
        # the scan's (inner × state) per token, the logits and their log-softmax
        return 4 * (4 * inner * n + 8 * d + 3 * int(c.vocab_size))

    def _row_length(self, geometry: Geometry) -> int:
        return max(1, self.window(geometry) if self.evaluator == "window" else 1024)

    def row_bytes(self, geometry: Geometry) -> int:
        """Bytes one forward row needs (an estimate, checked before a run starts): the scan's
        state and the logits of every token of a row (`window`: W tokens; `state`: 1,024)."""
        return self._row_length(geometry) * self._per_token_bytes()

    def max_rows(self, geometry: Geometry) -> int:
        return max(1, min(64, BUDGET // self.row_bytes(geometry)))

    # -- the one forward ---------------------------------------------------------------------

    def _forward(self, ids: np.ndarray) -> torch.Tensor:
        """Logits of one forward over right-padded `ids` (B, L), from a fresh state: float64 for a
        float64 model, else float32."""
        x = torch.from_numpy(np.ascontiguousarray(ids, dtype=np.int64)).to(self.device)
        logits = self.model(input_ids=x, use_cache=False).logits
        return logits if logits.dtype == torch.float64 else logits.float()

    # -- evaluators --------------------------------------------------------------------------

    def score(self, tokens, doc_ids, positions, geometry) -> TokenScores:
        check_inputs(tokens, doc_ids, positions)
        if self.evaluator == "window":
            return self.score_window(tokens, doc_ids, positions, self.window(geometry), geometry)
        tokens, doc_ids, nll, correct, nothing = blank_scores(tokens, doc_ids, positions)
        if nothing:
            return TokenScores(nll, correct)
        R = tokens.shape[0]
        rr, tt = np.nonzero(positions)
        if (doc_ids[rr, tt - 1] < 0).any():
            raise ValueError("a scored token follows padding: nothing predicts it")
        last = int(tt.max())  # inputs 0 … last − 1 are needed
        # piece (r, a, b): inputs a … b − 1 of row r, from a fresh state, predict a + 1 … b
        pieces = [(r, a, b) for r in range(R) for a, b in runs(doc_ids[r, :last], geometry.reset)]
        L = max(b - a for _, a, b in pieces)
        with torch.inference_mode():
            for i in range(len(pieces)):  # one piece per forward (module docstring)
                chunk = pieces[i : i + 1]
                ids = np.zeros((len(chunk), L), dtype=np.int64)
                targets = np.zeros((len(chunk), L), dtype=np.int64)
                for j, (r, a, b) in enumerate(chunk):
                    ids[j, : b - a] = tokens[r, a:b]
                    targets[j, : b - a] = tokens[r, a + 1 : b + 1]
                n, c = token_nll(self._forward(ids), targets)
                for j, (r, a, b) in enumerate(chunk):
                    nll[r, a + 1 : b + 1], correct[r, a + 1 : b + 1] = n[j, : b - a], c[j, : b - a]
        nll[~positions] = np.nan
        correct[~positions] = False
        return TokenScores(nll, correct)

    def score_window(self, tokens, doc_ids, positions, window: int, geometry) -> TokenScores:
        """Truncated context (probes.api.model): each scored token t by a fresh forward from a
        fresh state over the `window` tokens before it (from its query's document start under
        reset)."""
        check_inputs(tokens, doc_ids, positions)
        tokens, doc_ids, nll, correct, _ = blank_scores(tokens, doc_ids, positions)
        window = int(window)
        if window < 1:
            raise ValueError(f"a window of {window} tokens predicts nothing; need >= 1")
        jobs = window_jobs(doc_ids, positions, window, geometry.reset)
        if not jobs:
            return TokenScores(nll, correct)
        L = max(t - a for _, t, a in jobs)  # one length for the call (see module docstring)
        with torch.inference_mode():
            for i in range(len(jobs)):  # one window per forward (module docstring)
                chunk = jobs[i : i + 1]
                ids = np.zeros((len(chunk), L), dtype=np.int64)
                for j, (r, t, a) in enumerate(chunk):
                    ids[j, : t - a] = tokens[r, a:t]
                logits = self._forward(ids)
                ends = torch.tensor([t - a - 1 for _, t, a in chunk], device=logits.device)
                picked = logits[torch.arange(len(chunk), device=logits.device), ends]
                n, c = token_nll(picked, np.array([tokens[r, t] for r, t, _ in chunk]))
                for j, (r, t, _) in enumerate(chunk):
                    nll[r, t], correct[r, t] = n[j], c[j]
        return TokenScores(nll, correct)


def info_extra(model, raw: dict) -> dict:
    """What run.json records about a recurrent model beyond ModelInfo's fields."""
    import importlib.util

    c = model.config
    parallel = bool(getattr(c, "use_mambapy", False)) and bool(importlib.util.find_spec("mambapy"))
    return {
        "state": {
            "kind": "rwkv" if raw["model_type"] == "rwkv" else "selective-scan",
            # transformers' scan: mambapy's parallel one when the config asks and it is
            # installed, else its sequential loop (equal up to float rounding)
            **(
                {}
                if raw["model_type"] == "rwkv"
                else {"scan": "mambapy parallel" if parallel else "sequential"}
            ),
            "state_size": getattr(c, "state_size", None),
            "conv_kernel": getattr(c, "conv_kernel", None),
            "carry": "one forward per row from a fresh state",
            "reset": "one forward per document from a fresh state",
        },
    }
