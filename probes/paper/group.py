"""The synthetic ablation group: which shipped model stands for which row of the paper.

Every member has the default model's size, recipe and budget (2 layers, d_model 128, tgt_len 64,
16,000 steps of the same stream; `probes/training/presets.py`); only the position encoding and
the recurrence differ. What differs from the paper's rows:

- the paper trains its absolute-encoding rows (Vaswani, Al-Rfou) with the "half" loss (only the
  second half of each segment scored); here every member trains on the full loss;
- the paper's vanilla Transformer (Al-Rfou) has a training attention length of 128 with auxiliary
  losses left out; here it is the learned-absolute model without recurrence, attention length 64
  (one segment), no auxiliary losses;
- recurrence rows train with mem_len 256 (attention length 320), the paper's with 128 + a memory
  of the same length; "no recurrence" rows train with mem_len 0.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Member:
    model: str  # a shipped model's name (probes/models/<name>)
    label: str  # how the tables name it
    recurrence: bool
    encoding: str  # the paper's name of the position encoding
    table6: str | None  # the row of the paper's Table 6 it stands for (None: no such row)
    table7: str | None
    table8: str | None


GROUP = (
    Member("default", "rel + recurrence", True, "Ours", "6.1", "7.1", "8.4"),
    Member("shaw", "Shaw + recurrence", True, "Shaw et al. (2018)", "6.2", "7.2", "8.5"),
    Member("abs", "abs + recurrence", True, "Vaswani et al. (2017)", None, None, None),
    Member("default-mem0", "rel, no recurrence", False, "Ours", "6.4", "7.3", "8.6"),
    Member("learned-mem0", "learned, no recurrence", False, "Al-Rfou et al. (2018)", "6.9", None, "8.7"),
)  # fmt: skip

# The deeper models of the layered question (fact-swap by reach).
DEEP = ("deep", "deep4")


def member(model: str) -> Member:
    return next(m for m in GROUP if m.model == model)
