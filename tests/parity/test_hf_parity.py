"""Parity with the reference port: HF transformers 4.35.2 `TransfoXLLMHeadModel` (`nox -s parity`).

Our random weights are copied into HF's model, both run the same token stream segment by segment
from an empty memory, and we compare per-token log-probabilities (HF's `prediction_scores`, the
log-softmax over the vocabulary — not its `labels=` path, which shifts labels inside each segment
and cannot score a segment's first token) and the memories after every segment.

How HF's model maps onto ours (read from transformers/models/transfo_xl/modeling_transfo_xl.py):

- Output layer. With `cutoffs=[]` and `div_val=1`, `ProjectedAdaptiveLogSoftmax` has
  `n_clusters = 0`: one `nn.Linear(d_embed, vocab)` *with a bias* (`crit.out_layers.0`), no
  projection (`out_projs[0] is None` since d_embed = d_model, so `tie_projs` is moot), and
  `prediction_scores = log_softmax(h W^T + b)`. Its weight is the embedding matrix when
  `tie_word_embeddings` (our `tie_weight`); the bias is separate in both. The embedding is scaled by
  √d_model (`emb_scale = d_proj ** 0.5`). Pre-LN has no final LayerNorm in HF either.
- Attention (`attn_type=0`, RelPartialLearnableMultiHeadAttn): `qkv_net` = [W_q; W_k; W_v] stacked
  (no bias), `o_net` = W_o, `r_net` = W_R, `r_w_bias` = u (content bias), `r_r_bias` = v (position
  bias); shared by all layers when `untie_r=False` (then the model-level parameters), one pair per
  layer when `untie_r=True` (HF's default). LayerNorm eps 1e-5 in both.
- Memory. HF's `mems` is a list of n_layer tensors, **time-major (M, B, d)**; ours are
  `Memory.states`, batch-major (B, M, d): `hf_mems[l] == ours.states[l].transpose(0, 1)`.
  `mems[l]` is the **input of layer l** — `mems[0]` is the scaled embedding output (after dropout),
  `mems[l]` the output of layer l−1 — the last `mem_len` positions of [mems[l]; segment], detached.
  It does **not** include the last layer's output (the original code keeps n_layer + 1 entries,
  the last one unused; HF and we keep n_layer). HF's mems carry no doc ids: every test here is a
  single document, where our `reset` policy equals `carry`.
- Empty memory. Given `mems=None`, HF starts from `init_mems`: mem_len positions of **zeros**, which
  the first segment attends to (zero keys still get a position score and softmax weight). The
  original code starts from empty tensors (M = 0), as we do; so we pass HF n_layer empty
  (0, B, d) tensors, and the first segment of every case is the empty-memory case.
- `same_length`, `clamp_len` (clamp > 0; ≤ 0 is off, our None), and the causal mask are the
  reference's formulas; HF's `same_length` uses its configured `mem_len`, which is set to the
  geometry's mem_len here, as our mask uses the geometry's.

Precision. HF casts attention scores to float32 before masking, so a masked float64 forward is
float32 in the middle: float64 parity is tested only at tgt_len = 1 without same_length (HF applies
no mask at all there), and a separate test checks that our float64 and float32 agree. Float32 parity
holds to ~1e-5 (the two compute the same sums in different orders: the rel-shift trick versus our
gather by distance index, scale on scores versus on queries).

Without transformers (or with a version that has dropped TransfoXL) these tests skip, unless
TXL_REQUIRE_PARITY=1 (set by `nox -s parity`), where a missing reference is a failure.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, replace

import pytest
import torch
import torch.nn.functional as F

from txl.config import TXLConfig
from txl.geometry import Geometry
from txl.hf_reference import transfo_xl_kwargs
from txl.memory import Memory
from txl.model import TransformerXL

REQUIRE_PARITY = os.environ.get("TXL_REQUIRE_PARITY") == "1"

try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import transformers
        from transformers import TransfoXLConfig, TransfoXLLMHeadModel
except Exception as e:  # ImportError, or a transformers that fails to import for another reason
    reason = f"HF TransfoXL reference not importable ({type(e).__name__}: {e})"
    if REQUIRE_PARITY:
        pytest.fail(f"{reason}; TXL_REQUIRE_PARITY=1 requires it", pytrace=False)
    pytest.skip(reason, allow_module_level=True)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")

F32_TOL = 1e-5
F64_TOL = 1e-10


@dataclass(frozen=True)
class Case:
    tgt_len: int = 4
    mem_len: int = 4
    clamp_len: int | None = None
    same_length: bool = False
    pre_lnorm: bool = False
    untie_r: bool = False
    tie_weight: bool = True
    batch: int = 2
    n_seg: int = 3
    n_layer: int = 3
    dtype: torch.dtype = torch.float32


CASES = {
    "post-ln/shared-uv/mem=tgt": Case(),
    "pre-ln/shared-uv/mem=tgt": Case(pre_lnorm=True),
    "post-ln/untie-r": Case(untie_r=True),
    "pre-ln/untie-r": Case(pre_lnorm=True, untie_r=True),
    "untied-output-layer": Case(tie_weight=False),
    "empty-memory/mem=0": Case(tgt_len=5, mem_len=0, n_seg=2),
    "mem>tgt/several-segments": Case(tgt_len=3, mem_len=7, n_seg=5),
    "mem>tgt/pre-ln/untie-r": Case(tgt_len=3, mem_len=7, n_seg=5, pre_lnorm=True, untie_r=True),
    "mem<tgt": Case(tgt_len=5, mem_len=2),
    "clamp-small": Case(tgt_len=4, mem_len=6, clamp_len=3, n_seg=4),
    "clamp-small/pre-ln/untie-r": Case(clamp_len=2, pre_lnorm=True, untie_r=True),
    "same-length/mem=tgt": Case(same_length=True),
    "same-length/mem>tgt": Case(tgt_len=3, mem_len=7, same_length=True, n_seg=5),
    "same-length/mem<tgt": Case(tgt_len=5, mem_len=2, same_length=True),
    "same-length/clamp/pre-ln": Case(mem_len=6, clamp_len=2, same_length=True, pre_lnorm=True),
    "tgt=1": Case(tgt_len=1, mem_len=3, n_seg=6),
    "tgt=1/same-length": Case(tgt_len=1, mem_len=3, n_seg=6, same_length=True),
    "batch=1": Case(batch=1),
    "batch=3/same-length/untie-r": Case(batch=3, same_length=True, untie_r=True, mem_len=5),
    "float64/tgt=1": Case(tgt_len=1, mem_len=3, n_seg=6, dtype=torch.float64),
    "float64/tgt=1/pre-ln/untie-r/clamp": Case(
        tgt_len=1,
        mem_len=4,
        n_seg=7,
        clamp_len=2,
        pre_lnorm=True,
        untie_r=True,
        dtype=torch.float64,
    ),
}

VOCAB, D_MODEL, N_HEAD, D_HEAD, D_INNER = 29, 16, 2, 8, 32


def our_model(case: Case) -> TransformerXL:
    config = TXLConfig(
        vocab_size=VOCAB,
        n_layer=case.n_layer,
        d_model=D_MODEL,
        n_head=N_HEAD,
        d_head=D_HEAD,
        d_inner=D_INNER,
        pre_lnorm=case.pre_lnorm,
        tie_weight=case.tie_weight,
        untie_r=case.untie_r,
        tgt_len=case.tgt_len,
        mem_len=case.mem_len,
    )
    torch.manual_seed(0)
    model = TransformerXL(config)
    with torch.no_grad():  # nonzero biases, LayerNorms away from identity, u and v that matter
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    return model.eval().to(case.dtype)


def hf_model(ours: TransformerXL, case: Case) -> TransfoXLLMHeadModel:
    c = ours.config
    config = TransfoXLConfig(
        **transfo_xl_kwargs(
            c,
            mem_len=case.mem_len,
            tgt_len=case.tgt_len,
            clamp_len=case.clamp_len,
            same_length=case.same_length,
        )
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = TransfoXLLMHeadModel(config)
    hf.load_state_dict(hf_state_dict(ours, hf), strict=True)
    return hf.eval().to(case.dtype)


def hf_state_dict(ours: TransformerXL, hf: TransfoXLLMHeadModel) -> dict[str, torch.Tensor]:
    """Our parameters under HF's names. Every one of ours must be used (a parameter HF lacks would
    make parity meaningless), and every HF tensor filled (but its fixed inv_freq buffer)."""
    src = ours.state_dict()
    used: set[str] = set()

    def get(name: str) -> torch.Tensor:
        used.add(name)
        return src[name]

    def attn_bias(layer: str, which: str) -> torch.Tensor:
        return get(f"layers.{layer}.attn.{which}" if ours.config.untie_r else which)

    out = {}
    for key, value in hf.state_dict().items():
        parts = key.split(".")
        if key == "transformer.word_emb.emb_layers.0.weight":
            out[key] = get("word_emb.weight")
        elif key == "crit.out_layers.0.weight":
            out[key] = get("word_emb.weight" if ours.config.tie_weight else "out_weight")
        elif key == "crit.out_layers.0.bias":
            out[key] = get("out_bias")
        elif key == "transformer.r_w_bias":
            out[key] = get("bias_u")
        elif key == "transformer.r_r_bias":
            out[key] = get("bias_v")
        elif key == "transformer.pos_emb.inv_freq":
            out[key] = value  # HF's own sinusoid frequencies (the same formula as ours)
        elif parts[:2] == ["transformer", "layers"]:
            layer, rest = parts[2], ".".join(parts[3:])
            p = f"layers.{layer}."
            if rest == "dec_attn.qkv_net.weight":
                q, k, v = (get(p + f"attn.{n}_proj.weight") for n in "qkv")
                out[key] = torch.cat([q, k, v], dim=0)
            elif rest == "dec_attn.r_w_bias":
                out[key] = attn_bias(layer, "bias_u")
            elif rest == "dec_attn.r_r_bias":
                out[key] = attn_bias(layer, "bias_v")
            else:
                ours_name = {
                    "dec_attn.o_net.weight": "attn.o_proj.weight",
                    "dec_attn.r_net.weight": "attn.r_proj.weight",
                    "dec_attn.layer_norm.weight": "attn.norm.weight",
                    "dec_attn.layer_norm.bias": "attn.norm.bias",
                    "pos_ff.CoreNet.0.weight": "ff.fc1.weight",
                    "pos_ff.CoreNet.0.bias": "ff.fc1.bias",
                    "pos_ff.CoreNet.3.weight": "ff.fc2.weight",
                    "pos_ff.CoreNet.3.bias": "ff.fc2.bias",
                    "pos_ff.layer_norm.weight": "ff.norm.weight",
                    "pos_ff.layer_norm.bias": "ff.norm.bias",
                }[rest]
                out[key] = get(p + ours_name)
        else:
            raise KeyError(f"no mapping for HF tensor {key}")
    unused = sorted(set(src) - used)
    assert not unused, f"our parameters with no HF counterpart: {unused}"
    return {k: v.to(torch.float32) for k, v in out.items()}


def run_both(case: Case, ours: TransformerXL, hf: TransfoXLLMHeadModel, tokens: torch.Tensor):
    """Yield per segment: (our log-probs, HF log-probs, our nll, targets, our memory, HF mems)."""
    B = tokens.shape[0]
    geometry = Geometry(
        tgt_len=case.tgt_len,
        mem_len=case.mem_len,
        clamp_len=case.clamp_len,
        same_length=case.same_length,
        reset=True,
    )
    memory = None
    hf_mems = [torch.empty(0, B, D_MODEL, dtype=case.dtype) for _ in range(case.n_layer)]
    T = case.tgt_len
    with torch.no_grad():
        for s in range(case.n_seg):
            inp, tgt = tokens[:, s * T : (s + 1) * T], tokens[:, s * T + 1 : (s + 1) * T + 1]
            o = ours(inp, memory=memory, targets=tgt, geometry=geometry, return_logits=True)
            h = hf(input_ids=inp, mems=hf_mems)
            memory, hf_mems = o.memory, list(h.mems)
            yield F.log_softmax(o.logits, dim=-1), h.prediction_scores, o.nll, tgt, memory, hf_mems


def max_diffs(case: Case) -> tuple[float, float]:
    ours = our_model(case)
    hf = hf_model(ours, case)
    g = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, VOCAB, (case.batch, case.n_seg * case.tgt_len + 1), generator=g)
    d_logp = d_mem = 0.0
    for s, (logp, hf_logp, nll, tgt, memory, hf_mems) in enumerate(
        run_both(case, ours, hf, tokens)
    ):
        assert logp.dtype == hf_logp.dtype == case.dtype
        assert hf_logp.shape == logp.shape == (case.batch, case.tgt_len, VOCAB)
        hf_nll = -hf_logp.gather(-1, tgt[..., None])[..., 0]
        d_logp = max(d_logp, (logp - hf_logp).abs().max().item(), (nll - hf_nll).abs().max().item())
        want_m = min(case.mem_len, (s + 1) * case.tgt_len)
        assert memory.length == want_m and len(hf_mems) == case.n_layer
        for ours_l, hf_l in zip(memory.states, hf_mems, strict=True):
            assert hf_l.shape == (want_m, case.batch, D_MODEL)  # time-major
            assert ours_l.shape == (case.batch, want_m, D_MODEL)  # batch-major
            if want_m:
                d_mem = max(d_mem, (ours_l - hf_l.transpose(0, 1)).abs().max().item())
    return d_logp, d_mem


@pytest.mark.parametrize("name", list(CASES))
def test_logprobs_and_memories_match_hf_transfo_xl(name: str) -> None:
    case = CASES[name]
    tol = F64_TOL if case.dtype == torch.float64 else F32_TOL
    d_logp, d_mem = max_diffs(case)
    print(f"\nparity {name}: max|Δ log p| = {d_logp:.2e}, max|Δ memory| = {d_mem:.2e}")
    assert d_logp <= tol, f"log-probs differ by {d_logp:.3g} > {tol}"
    assert d_mem <= tol, f"memories differ by {d_mem:.3g} > {tol}"


def test_hf_reference_is_the_pinned_version() -> None:
    assert transformers.__version__ == "4.35.2" or not REQUIRE_PARITY


@pytest.mark.parametrize(
    "case",
    [
        Case(tgt_len=4, mem_len=6, clamp_len=3, same_length=True, n_seg=4),
        Case(tgt_len=5, mem_len=3, pre_lnorm=True, untie_r=True, n_seg=3),
    ],
    ids=["same-length/clamp", "pre-ln/untie-r/mem<tgt"],
)
def test_our_float64_and_float32_agree(case: Case) -> None:
    """Our own model in float64 and float32 give the same log-probs (to float32 precision), in
    every masked configuration HF cannot check in float64."""
    m32 = our_model(case)
    m64 = our_model(replace(case, dtype=torch.float64))
    g = torch.Generator().manual_seed(2)
    tokens = torch.randint(0, VOCAB, (case.batch, case.n_seg * case.tgt_len), generator=g)
    geometry = Geometry(case.tgt_len, case.mem_len, case.clamp_len, case.same_length)
    mem32 = mem64 = None
    with torch.no_grad():
        for s in range(case.n_seg):
            inp = tokens[:, s * case.tgt_len : (s + 1) * case.tgt_len]
            o32 = m32(inp, memory=mem32, geometry=geometry, return_logits=True)
            o64 = m64(inp, memory=mem64, geometry=geometry, return_logits=True)
            mem32, mem64 = o32.memory, o64.memory
            assert o64.logits.dtype == torch.float64 and o32.logits.dtype == torch.float32
            torch.testing.assert_close(
                F.log_softmax(o32.logits, -1).double(),
                F.log_softmax(o64.logits, -1),
                atol=F32_TOL,
                rtol=0,
            )
            for a, b in zip(mem32.states, mem64.states, strict=True):
                torch.testing.assert_close(a.double(), b, atol=F32_TOL, rtol=0)
    assert isinstance(mem64, Memory)
