"""LossModel adapters: the only modules of `probes` that import torch or a model library.
`txl` wraps Transformer-XL checkpoints (the cached streaming evaluator and the recompute
baseline), `hf` transformers models and GGUF files, `planted` is a torch-free model with planted
effects, for tests and calibration. `base` holds what the torch adapters share; `kinds`
registers each kind of `--model` (torch-free)."""
