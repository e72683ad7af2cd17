"""Errors of the contract that run machinery catches without importing an adapter (torch)."""


class ModelDirError(ValueError):
    """A path that is not a usable model (what a model kind's detector or check finds wrong
    with it, before anything is loaded); the message is one line."""


class AdapterError(ValueError):
    """A model that cannot be used as asked; the message is one line."""
