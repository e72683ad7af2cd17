"""A probe's parameters: a frozen dataclass whose fields become CLI options.

    @dataclass(frozen=True)
    class Params:
        distance: str = param("auto", help="distance bins, LO-HI,...", check=parse_ranges)
        k: int = param(2, help="distractors per kind", min=1)

Field name `k` becomes `--k`, `max_k` becomes `--max-k`; the help text, bounds and choices come
from the field's metadata. `check` is a function of the value that raises ValueError with a
message saying what would be right; it runs when the option is parsed (a usage error, exit 2) and
when the dataclass is built from Python. Values stay plain JSON data (str, int, float, bool), so
`run.json` records exactly what was asked for.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from collections.abc import Callable
from typing import Any, Literal, get_args, get_origin

PLAIN = (str, int, float, bool)


class ParamError(ValueError):
    """A parameter value that cannot be used; the message is one line."""


def param(
    default: Any,
    *,
    help: str,
    min: float | None = None,
    max: float | None = None,
    check: Callable[[Any], Any] | None = None,
) -> Any:
    """A Params field with CLI metadata."""
    meta = {"help": help, "min": min, "max": max, "check": check}
    return dataclasses.field(default=default, metadata=meta)


def option_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def _field_types(params_cls: type) -> dict[str, Any]:
    return typing.get_type_hints(params_cls)


def _check_value(params_cls: type, field: dataclasses.Field, kind: Any, value: Any) -> Any:
    opt = option_name(field.name)
    choices = get_args(kind) if get_origin(kind) is Literal else None
    if choices is not None:
        if value not in choices:
            raise ParamError(
                f"{opt}: {value!r} is not one of {', '.join(repr(c) for c in choices)}"
            )
        return value
    if kind is bool:
        if not isinstance(value, bool):
            raise ParamError(f"{opt}: expected true/false, got {value!r}")
        return value
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            try:
                value = int(str(value), 10)
            except ValueError:
                raise ParamError(f"{opt}: {value!r} is not an integer") from None
    elif kind is float:
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ParamError(f"{opt}: {value!r} is not a number") from None
    elif kind is str:
        value = str(value)
    meta = field.metadata
    lo, hi = meta.get("min"), meta.get("max")
    if lo is not None and value < lo:
        raise ParamError(f"{opt}: {value!r} is below the minimum {lo}")
    if hi is not None and value > hi:
        raise ParamError(f"{opt}: {value!r} is above the maximum {hi}")
    check = meta.get("check")
    if check is not None:
        try:
            check(value)
        except ValueError as e:
            raise ParamError(f"{opt}: {e}") from None
    return value


def build(params_cls: type, values: dict[str, Any]) -> Any:
    """Params from a dict of field values (missing fields keep their defaults), validated."""
    fields = {f.name: f for f in dataclasses.fields(params_cls)}
    for key in values:
        if key not in fields:
            close = difflib.get_close_matches(key, list(fields), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            known = ", ".join(fields) or "none"
            raise ParamError(f"unknown parameter {key!r}{hint} (this probe's: {known})")
    kinds = _field_types(params_cls)
    clean = {k: _check_value(params_cls, fields[k], kinds[k], v) for k, v in values.items()}
    return params_cls(**clean)


def to_dict(params: Any) -> dict[str, Any]:
    return dataclasses.asdict(params)


def click_options(params_cls: type, taken: set[str] = frozenset()) -> list:
    """One click.Option per field. Field names that clash with the common run options are
    refused (`taken`: their parameter names)."""
    import click

    kinds = _field_types(params_cls)
    options = []
    for field in dataclasses.fields(params_cls):
        if field.name in taken:
            raise ParamError(
                f"{params_cls.__qualname__}.{field.name} clashes with the common run option "
                f"{option_name(field.name)}; rename the field"
            )
        kind = kinds[field.name]
        meta = field.metadata
        help_text = meta.get("help") or ""
        default = field.default
        if kind is bool:
            flag = field.name.replace("_", "-")
            options.append(
                click.Option(
                    [f"--{flag}/--no-{flag}", field.name],
                    default=default,
                    show_default=True,
                    help=help_text,
                )
            )
            continue
        if get_origin(kind) is Literal:
            click_type: Any = click.Choice([str(c) for c in get_args(kind)])
        elif kind is int:
            click_type = click.IntRange(min=meta.get("min"), max=meta.get("max"))
        elif kind is float:
            click_type = click.FloatRange(min=meta.get("min"), max=meta.get("max"))
        else:
            click_type = click.STRING
        check = meta.get("check")
        callback = None
        if check is not None:

            def callback(ctx, param, value, check=check):
                if value is None:
                    return value
                try:
                    check(value)
                except ValueError as e:
                    raise click.BadParameter(str(e), ctx=ctx, param=param) from None
                return value

        options.append(
            click.Option(
                [option_name(field.name), field.name],
                type=click_type,
                default=None,  # None: keep the dataclass default (so build() sees only given ones)
                help=f"{help_text}  [default: {default}]",
                callback=callback,
            )
        )
    return options
