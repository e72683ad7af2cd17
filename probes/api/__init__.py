"""The contract of probe and model authors: what a probe is and how it is registered
(`probe`, `Probe`, `RunContext`, `Outcome`), its declared parameters and table columns, and the
`LossModel` door through which every probe reaches a model."""
