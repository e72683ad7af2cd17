"""The paper's Tables 6–9 on the synthetic language: `python -m probes.paper` (`nox -s paper`).

Dai et al. (2019) report what recurrence and relative positions do; those are this instrument's
known answers. Here the same questions are asked of models built like the paper's rows
(`group.py`: the shipped Transformer-XL ablation group), each with the probe or measurement that
answers it, and written to `results/curated/paper/` one table per paper table — the synthetic
figures, the published figures beside them (`published.py`, cited by table and row), and for
each qualitative claim whether it holds here, with intervals (`claims.py`):

    table6   held-out NLL by evaluation attention length: PPL init, PPL best, Attn Len (`lengths.py`)
    table7   NLL on local-only text, with and without recurrence (`local.py`)
    table8   RECL of the model group at r = 0.1, 0.5, 1.0 (the `recl` probe)
    table9   per-token evaluation time, cached vs recompute (the `speed` probe)
    layered  can a fact climb through cached states? fact-swap by reach on the deep models

A reproduction may fail, and that is a finding: nothing here is asserted by a test.
"""
