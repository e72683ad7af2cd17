"""A faithful Transformer-XL core: relative attention, memory, exact document reset, evaluators."""
