"""Errors of the contract that run machinery catches without importing an adapter (torch)."""


class AdapterError(ValueError):
    """A model that cannot be used as asked; the message is one line."""
