"""The score mask: the shared-band fast path equals the general mask, bias for bias."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from txl.masking import ScoreMask, attention_mask, score_mask


@st.composite
def doc_layouts(draw):
    """(doc_q, doc_k): B rows of K keys whose last T are the queries; documents in runs, some
    rows of one document only, padding (−1) sometimes."""
    B, T = draw(st.integers(1, 3)), draw(st.integers(1, 9))
    K = T + draw(st.integers(0, 12))
    kind = draw(st.sampled_from(["one", "runs", "padding"]))
    rows = []
    for _ in range(B):
        if kind == "one":
            rows.append([draw(st.integers(0, 3))] * K)
            continue
        ids, doc = [], draw(st.integers(0, 2))
        for _ in range(K):
            doc += draw(st.integers(0, 1)) if draw(st.booleans()) else 0
            ids.append(doc)
        if kind == "padding":
            n_pad = draw(st.integers(1, K))
            ids[:n_pad] = [-1] * n_pad
        rows.append(ids)
    doc_k = torch.tensor(rows, dtype=torch.long)
    return doc_k[:, K - T :], doc_k


@given(
    doc_layouts(),
    st.one_of(st.none(), st.integers(1, 14)),
    st.booleans(),
    st.sampled_from([torch.float32, torch.float64, torch.bfloat16]),
)
@settings(max_examples=200, deadline=None)
def test_score_mask_equals_the_general_mask_for_every_layout(docs, same_length_mem, reset, dtype):
    doc_q, doc_k = docs
    B, T = doc_q.shape
    n_head = 3
    fast = score_mask(doc_q, doc_k, n_head, same_length_mem=same_length_mem, reset=reset)
    general = ScoreMask(
        attention_mask(doc_q, doc_k, same_length_mem=same_length_mem, reset=reset), n_head
    )
    K = doc_k.shape[1]
    assert torch.equal(fast.bias(dtype).expand(B, T, K), general.bias(dtype))
    assert torch.equal(fast.has_key.expand(B, T, 1), general.has_key)
    assert torch.equal(fast.per_head(dtype), general.per_head(dtype))
    assert fast.per_head(dtype).shape == (n_head * B, T, K)


def test_one_document_without_padding_shares_one_band_across_rows():
    doc_k = torch.zeros(4, 20, dtype=torch.long) + 7
    mask = score_mask(doc_k[:, 12:], doc_k, 2, same_length_mem=10, reset=True)
    assert mask.bias(torch.float32).shape == (1, 8, 20)
    padded = doc_k.clone()
    padded[1, 0] = -1  # one padding key: every row gets its own mask
    assert score_mask(padded[:, 12:], padded, 2, reset=True).bias(torch.float32).shape == (4, 8, 20)


def _visible_by_definition(doc_q, doc_k, same_length_mem, reset):
    """The visibility rule of txl.masking's docstring, key by key."""
    B, T = doc_q.shape
    K = doc_k.shape[1]
    M = K - T
    out = torch.zeros(B, T, K, dtype=torch.bool)
    for b in range(B):
        for i in range(T):
            for j in range(K):
                ok = j <= M + i and doc_k[b, j] >= 0
                if same_length_mem is not None:
                    ok = ok and j >= M + i - same_length_mem + 1
                if reset:
                    ok = ok and doc_k[b, j] == doc_q[b, i]
                out[b, i, j] = ok
    return out


@given(
    doc_layouts(),
    st.one_of(st.none(), st.integers(1, 14)),
    st.booleans(),
    st.sampled_from([torch.float32, torch.bfloat16]),
)
@settings(max_examples=60, deadline=None)
def test_score_mask_bias_and_has_key_follow_the_visibility_rule(
    docs, same_length_mem, reset, dtype
):
    doc_q, doc_k = docs
    B, T = doc_q.shape
    K = doc_k.shape[1]
    visible = _visible_by_definition(doc_q, doc_k, same_length_mem, reset)
    mask = score_mask(doc_q, doc_k, 2, same_length_mem=same_length_mem, reset=reset)
    half = torch.finfo(dtype).min / 2
    expected = torch.where(visible, torch.tensor(0.0, dtype=dtype), torch.tensor(half, dtype=dtype))
    assert torch.equal(mask.bias(dtype).expand(B, T, K), expected)
    assert torch.equal(mask.has_key.expand(B, T, 1), visible.any(-1, keepdim=True))


def test_a_mask_kept_from_an_evaluation_in_inference_mode_never_reaches_a_training_step():
    """The shared band's ScoreMask is kept per shape; one made under torch.inference_mode (how
    the adapters score) holds inference tensors, which a backward pass cannot save: a training
    step of the same shape gets its own."""
    from txl_helpers import tiny_model

    from txl.geometry import Geometry

    model = tiny_model(31, train=True)
    tokens = torch.randint(0, 31, (2, 8))
    geometry = Geometry(8, 0, clamp_len=None)
    with torch.inference_mode():
        model.eval()
        model(tokens, geometry=geometry)
    model.train()
    loss = model(tokens, targets=tokens, geometry=geometry).nll.mean()
    loss.backward()  # raised "Inference tensors cannot be saved for backward" when shared
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
