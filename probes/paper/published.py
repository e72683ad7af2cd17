"""The published figures of Dai et al. 2019 (arXiv:1901.02860 v3), Tables 6–9, cited by table
and row. Table 6's 128M block is the one the synthetic group mirrors (the 151M rows are another
parameter budget); Table 8's second model group (Transformer-XL 128M and its ablations) is the
one with the same members as the synthetic group."""

from __future__ import annotations

CITATION = "Dai et al. 2019, Transformer-XL (ACL 2019; arXiv:1901.02860 v3)"

# Table 6, ablation on WikiText-103, 128M block: (row, recurrence, encoding, loss, PPL init,
# PPL best, Attn Len). "init": evaluated at the training attention length; "best": at the best
# evaluation length; Attn Len: the shortest evaluation length that reaches "best".
TABLE6 = (
    ("6.1 Transformer-XL (128M)", True, "Ours", "Full", 27.02, 26.77, 500),
    ("6.2", True, "Shaw et al. (2018)", "Full", 27.94, 27.94, 256),
    ("6.3", True, "Ours", "Half", 28.69, 28.33, 460),
    ("6.4", False, "Ours", "Full", 29.59, 29.02, 260),
    ("6.5", False, "Ours", "Half", 30.10, 30.10, 120),
    ("6.6", False, "Shaw et al. (2018)", "Full", 29.75, 29.75, 120),
    ("6.7", False, "Shaw et al. (2018)", "Half", 30.50, 30.50, 120),
    ("6.8", False, "Vaswani et al. (2017)", "Half", 30.97, 30.97, 120),
    ("6.9 Transformer (128M), Al-Rfou et al. setting", False, "Al-Rfou et al. (2018)", "Half", 31.16, 31.16, 120),
)  # fmt: skip

# Table 7, ablation on One Billion Word ("a dataset without long-term dependency"): PPL.
TABLE7 = (
    ("7.1 Ours", 25.2),
    ("7.2 With Shaw et al. (2018) encodings", 25.7),
    ("7.3 Without recurrence", 27.1),
)

# Table 8, RECL at r = 0.1 / 0.5 / 1.0; the second group (same parameter budget).
TABLE8 = (
    ("8.4 Transformer-XL 128M", (700, 600, 500)),
    ("8.5 – use Shaw et al. (2018) encoding", (400, 400, 300)),
    ("8.6 – remove recurrence", (300, 300, 300)),
    ("8.7 Transformer", (128, 128, 128)),
)
TABLE8_RS = (0.1, 0.5, 1.0)

# Table 9, how much slower the vanilla model (Al-Rfou et al.) evaluates per token than
# Transformer-XL, by attention length (one GPU).
TABLE9 = ((3800, 1874), (2800, 1409), (1800, 773), (800, 363))
