"""Paired, per-token probes of a long-context language model."""

__version__ = "0.1.0"
