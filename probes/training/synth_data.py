"""The synth training stream from a training config's `data` table (opaque to txl).

`data.language` is a `synth.language.LanguageConfig` table (default: `Language.default()`); every
other key of `data` is a `synth.stream.StreamConfig` field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from synth.language import Language, LanguageConfig
from synth.stream import StreamConfig, TrainStream

if TYPE_CHECKING:
    from synth.language import Language
    from synth.stream import TrainStream
    from txl.train_config import TrainConfig


def language_from(data: dict[str, Any]) -> Language:
    """The language a `data` table names (ValueError, one line, for a bad table)."""

    table = data.get("language")
    if table is None:
        return Language.default()
    if not isinstance(table, dict):
        raise ValueError(f"bad value for data.language: {table!r}; expected a table")
    return Language(LanguageConfig.from_dict(table))


def synth_stream(
    lang: Language,
    config: TrainConfig,
    seed: int,
    batch_size: int,
    rank: int,
    world_size: int,
    curriculum: bool = True,
) -> TrainStream:
    """A rank's synth training stream (StreamConfig from the `data` table, minus `language`);
    without `curriculum`, the mixture from the first token (the held-out NLL measures the text the
    model is trained on for good, not the curriculum's repeated spans and bursty pairs)."""

    table = {k: v for k, v in config.data.items() if k != "language"}
    if not curriculum:
        for stage in ("repeat_first", "bursty_first"):  # synth.stream.StreamConfig's curriculum
            table.pop(stage, None)
    try:
        stream_config = StreamConfig.from_dict(table)
    except TypeError as e:
        raise ValueError(f"bad data table: {e}") from None
    return TrainStream(
        lang,
        stream_config,
        batch_size=batch_size,
        tgt_len=config.model.tgt_len,
        seed=seed,
        rank=rank,
        world_size=world_size,
    )
