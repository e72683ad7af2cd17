"""The transformers model families this project knows, in one table: whether a family is
recurrent (scored by its state, `probes.adapters.hf_state`; no memory length applies), whether
`probe train` trains it (`probes.training.hf_arch`), and whether `probes.testing.tiny_transformers`
builds a tiny one for the tests. Every list of families is derived from it. Torch-free.

A family is named as config.json's `model_type` names it, except `gemma3`, the tiny fixture of
Gemma 3's text model (`model_type` gemma3_text)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    recurrent: bool  # scored by its state, not by attention over a window
    trainable: bool  # `probe train` builds and trains it (probes.training.hf_arch)
    tiny_fixture: bool  # probes.testing.tiny_transformers builds it for the tests


FAMILIES: dict[str, Family] = {
    "gpt2": Family(recurrent=False, trainable=False, tiny_fixture=True),
    "llama": Family(recurrent=False, trainable=True, tiny_fixture=True),
    "mistral": Family(recurrent=False, trainable=True, tiny_fixture=True),
    "gemma3": Family(recurrent=False, trainable=False, tiny_fixture=True),
    "mamba": Family(recurrent=True, trainable=True, tiny_fixture=True),
    "mamba2": Family(recurrent=True, trainable=True, tiny_fixture=False),
    "falcon_mamba": Family(recurrent=True, trainable=False, tiny_fixture=False),
    "rwkv": Family(recurrent=True, trainable=True, tiny_fixture=True),
}


def families(**wanted: bool) -> tuple[str, ...]:
    """The families whose fields have the values given (`families(recurrent=True)`), in the
    table's order."""
    return tuple(
        name for name, f in FAMILIES.items() if all(getattr(f, k) == v for k, v in wanted.items())
    )


RECURRENT = families(recurrent=True)
