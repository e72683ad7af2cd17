"""Property 5 (stop-gradient, both halves) and no NaN from fully masked rows (property 8).

Stop-gradient cuts the path back into the segment that MADE the memory, not the parameters that READ
it: segment τ+1's loss gives no gradient to segment τ's inputs and hidden states, and still gives
W_K and W_V gradient through the memory rows.
"""

from __future__ import annotations

import pytest
import torch
from txl_helpers import one_thread, tiny_model  # noqa: F401 (one_thread: autouse)

from txl.geometry import Geometry
from txl.memory import Memory
from txl.model import TransformerXL

VOCAB = 19


def _model(**overrides) -> TransformerXL:
    # tie_weight=False: input embedding rows then get gradient only through the inputs
    return tiny_model(
        VOCAB, train=True, **{"tgt_len": 5, "mem_len": 5, "tie_weight": False, **overrides}
    )


def _segments():
    """Segment τ uses tokens 2 … 9, segment τ+1 tokens 10 … 18: their embedding rows are disjoint."""
    g = torch.Generator().manual_seed(3)
    seg1 = torch.randint(2, 10, (3, 6), generator=g)  # inputs 5 + the first input of seg 2
    seg2 = torch.randint(10, VOCAB, (3, 6), generator=g)
    x1, y1 = seg1[:, :5], seg1[:, 1:]
    x2, y2 = seg2[:, :5], seg2[:, 1:]
    return x1, y1, x2, y2


def _capture_layer_inputs(model):
    captured: list[torch.Tensor] = []
    hooks = [
        layer.register_forward_pre_hook(lambda _m, args: captured.append(args[0]))
        for layer in model.layers
    ]
    return captured, hooks


@pytest.mark.parametrize("pos_enc", ["rel", "shaw", "abs", "learned"])
def test_next_segment_loss_gives_no_gradient_to_previous_segment(pos_enc):
    model = _model(pos_enc=pos_enc)
    x1, y1, x2, y2 = _segments()
    captured, hooks = _capture_layer_inputs(model)
    out1 = model(x1, targets=y1)
    seg1_hiddens = list(captured)  # the graph nodes of segment τ that made the memory
    for hook in hooks:
        hook.remove()
    assert all(not s.requires_grad and s.grad_fn is None for s in out1.memory.states)

    loss2 = model(x2, memory=out1.memory, targets=y2).nll.sum()
    grads = torch.autograd.grad(
        loss2, [*seg1_hiddens, model.word_emb.weight], allow_unused=True, retain_graph=True
    )
    assert all(g is None for g in grads[:-1])  # no path into segment τ's hidden states
    emb_grad = grads[-1]
    assert torch.count_nonzero(emb_grad[2:10]) == 0  # nor into its input embeddings
    assert torch.count_nonzero(emb_grad[x2.unique()]) > 0  # segment τ+1's own inputs do get some

    # control: the same memory WITHOUT the stop-gradient would carry gradient back (the test can fail)
    leaky = Memory(tuple(seg1_hiddens), out1.memory.doc_ids)
    loss_leaky = model(x2, memory=leaky, targets=y2).nll.sum()
    leak = torch.autograd.grad(loss_leaky, seg1_hiddens[0])[0]
    assert leak.abs().max() > 1e-6


@pytest.mark.parametrize("pos_enc", ["rel", "shaw", "abs", "learned"])
def test_memory_rows_give_wk_and_wv_gradient(pos_enc):
    model = _model(pos_enc=pos_enc)
    x1, y1, x2, y2 = _segments()
    memory = model(x1, targets=y1).memory
    empty = Memory.empty(model.config.n_layer, 3, model.config.d_model, dtype=torch.float64)
    for layer in model.layers:
        params = [layer.attn.k_proj.weight, layer.attn.v_proj.weight]
        with_mem = torch.autograd.grad(model(x2, memory=memory, targets=y2).nll.sum(), params)
        without = torch.autograd.grad(model(x2, memory=empty, targets=y2).nll.sum(), params)
        for g, g0 in zip(with_mem, without, strict=True):
            assert g.abs().max() > 1e-6
            assert (g - g0).abs().max() > 1e-6  # the memory rows add their own share


@pytest.mark.parametrize("reset", [True, False])
@pytest.mark.parametrize("same_length", [True, False])
@pytest.mark.parametrize("pos_enc", ["rel", "shaw", "abs", "learned"])
def test_fully_masked_rows_give_no_nan_forward_or_backward(pos_enc, same_length, reset):
    """Padding queries (doc id −1) see no key under reset (and none at all in an all-padding row):
    no NaN appears in the loss or in any gradient."""
    model = _model(pos_enc=pos_enc)
    geometry = Geometry(tgt_len=5, mem_len=4, clamp_len=None, same_length=same_length, reset=reset)
    g = torch.Generator().manual_seed(5)
    x = torch.randint(0, VOCAB, (3, 5), generator=g)
    y = torch.randint(0, VOCAB, (3, 5), generator=g)
    docs = torch.tensor([[-1] * 5, [0, 0, -1, -1, 1], [2, 2, 2, 2, 2]])
    memory = model(x, docs, geometry=geometry).memory  # the padding is cached too
    out = model(x, docs, memory=memory, targets=y, geometry=geometry)
    assert torch.isfinite(out.nll).all()
    out.nll.sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name


def test_fully_masked_query_row_attends_to_nothing():
    """A query row with no visible key gets an all-zero attention output (pre-LN: out = h), and a
    zero gradient back into the scores."""
    model = _model(pre_lnorm=True)
    attn = model.layers[0].attn
    g = torch.Generator().manual_seed(6)
    h = torch.randn(2, 3, 16, generator=g, dtype=torch.float64, requires_grad=True)
    mem = torch.randn(2, 4, 16, generator=g, dtype=torch.float64)
    mask = torch.ones(2, 1, 3, 7, dtype=torch.bool).tril(4)
    mask[1, 0, 1] = False  # row 1, query 1 sees nothing
    dist = torch.arange(4, 7)[:, None] - torch.arange(7)[None]
    out = attn(h, mem, mask, rel_dist=dist.clamp(min=0), n_dist=7, r=model.sinusoid(7),
               bias_u=model.bias_u, bias_v=model.bias_v)  # fmt: skip
    torch.testing.assert_close(out[1, 1], h[1, 1], rtol=0.0, atol=0.0)
    assert (out[0, 1] - h[0, 1]).abs().max() > 1e-6
    (grad,) = torch.autograd.grad(out.sum(), h)
    assert torch.isfinite(grad).all()
