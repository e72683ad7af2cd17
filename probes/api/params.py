"""Declared options: a frozen dataclass whose fields become CLI options, validated values and
recorded JSON — one declaration for a probe's own parameters and for the run options every probe
shares (`probes.framework.options.RunOptions`).

    @dataclass(frozen=True)
    class Params:
        distance: str = param("auto", help="distance bins, LO-HI,...", check=parse_ranges)
        k: int = param(2, help="distractors per kind", min=1)

Field name `k` becomes `--k`, `max_k` becomes `--max-k` (or the field's own `flags`, e.g.
"--reset/--carry"); the help text, bounds and choices come from the field's metadata. Types:
str, int, float, bool, a `Literal[...]` of choices, any of them `| None` (None: not given, the
default decides later), or `Any` (passed through unchecked: the caller validates it). `check` is a
function of the value that raises ValueError with a message saying what would be right; it runs
when the option is parsed (a usage error, exit 2) and when the dataclass is built from Python.
Values stay plain JSON data, so `run.json` records exactly what was asked for.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Callable, Collection, Sequence
from typing import Any, Literal, get_args, get_origin

from probes.limits import check_number


class ParamError(ValueError):
    """A parameter value that cannot be used; the message is one line."""


def param(
    default: Any,
    *,
    help: str,
    min: float | None = None,
    max: float | None = None,
    check: Callable[[Any], Any] | None = None,
    flags: str | None = None,
    metavar: str | None = None,
    show_default: bool = False,
    alias: str | None = None,
) -> Any:
    """A declared field with CLI metadata. `flags`: the option's own spelling ("--quick",
    "--reset/--carry"); `show_default`: click prints the default instead of the help's note;
    `alias`: a second spelling of a valued option ("-n")."""
    meta = {
        "help": help,
        "min": min,
        "max": max,
        "check": check,
        "flags": flags,
        "metavar": metavar,
        "show_default": show_default,
        "alias": alias,
    }
    return dataclasses.field(default=default, metadata=meta)


def increasing_ints(
    text: str, what: str, example: str, auto: Callable[[], list[int]] | None = None
) -> list[int]:
    """A parameter written as a comma list of increasing integers >= 1 ("8,256,1024"), or
    "auto" when `auto` gives the default list. ValueError (one line) saying what is right."""
    text = text.strip()
    if text == "auto" and auto is not None:
        return auto()
    hint = f"write 'auto' or e.g. {example}" if auto is not None else f"e.g. {example}"
    try:
        out = [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"{text!r} is not a list of {what}; {hint}") from None
    if any(x < 1 for x in out) or sorted(set(out)) != out:
        raise ValueError(f"{what} {text!r} must be increasing integers >= 1, e.g. {example}")
    return out


def ints_text(values: Sequence[int]) -> str:
    """A list of integers as `increasing_ints` reads it back ("8,256,1024")."""
    return ",".join(str(int(v)) for v in values)


def option_name(field: str) -> str:
    return "--" + field.replace("_", "-")


def _field_types(params_cls: type) -> dict[str, Any]:
    return typing.get_type_hints(params_cls)


def _unwrap(kind: Any) -> tuple[Any, bool]:
    """(the type without None, whether None is allowed)."""
    if get_origin(kind) in (typing.Union, types.UnionType):
        args = [a for a in get_args(kind) if a is not type(None)]
        if len(args) == 1:
            return args[0], len(args) < len(get_args(kind))
    return kind, False


def flag(field: dataclasses.Field) -> str:
    """The option as a user types it (its first spelling)."""
    own = field.metadata.get("flags")
    return own.split("/")[0] if own else option_name(field.name)


def _check_value(field: dataclasses.Field, kind: Any, value: Any) -> Any:
    opt = flag(field)
    kind, optional = _unwrap(kind)
    if value is None and optional:
        return None
    if kind is Any:
        return value
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
    meta = field.metadata
    if kind is int or kind is float:
        try:
            value = check_number(value, integer=kind is int, lo=meta.get("min"), hi=meta.get("max"))
        except ValueError as e:
            raise ParamError(f"{opt}: {e}") from None
    elif kind is str:
        value = str(value)
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
    clean = {k: _check_value(fields[k], kinds[k], v) for k, v in values.items()}
    return params_cls(**clean)


def to_dict(params: Any) -> dict[str, Any]:
    return dataclasses.asdict(params)


def argv(params: Any) -> list[str]:
    """The command-line words that give `params` again (None: not given, left out; a list: the
    option repeated; a tri-state or flag bool: its spelling)."""
    out: list[str] = []
    for field in dataclasses.fields(params):
        value = getattr(params, field.name)
        if value is None:
            continue
        own = field.metadata.get("flags")
        if isinstance(value, bool):
            on, _, off = (
                own or f"{option_name(field.name)}/--no-{field.name.replace('_', '-')}"
            ).partition("/")
            if value:
                out.append(on)
            elif off:
                out.append(off)
            continue
        for v in value if isinstance(value, list | tuple) else [value]:
            out += [flag(field), str(v)]
    return out


def click_options(
    params_cls: type,
    taken: Collection[str] = frozenset(),
    *,
    only: Collection[str] | None = None,
    multiple: Collection[str] = (),
) -> list:
    """One click.Option per field (`only`: these fields, in declaration order; `multiple`: fields
    whose option may be repeated). Field names that clash with `taken` (the names of options
    declared elsewhere on the same command) are refused."""
    import click

    kinds = _field_types(params_cls)
    options = []
    for field in dataclasses.fields(params_cls):
        if only is not None and field.name not in only:
            continue
        if field.name in taken:
            raise ParamError(
                f"{params_cls.__qualname__}.{field.name} clashes with the common run option "
                f"{option_name(field.name)}; rename the field"
            )
        kind, _ = _unwrap(kinds[field.name])
        meta = field.metadata
        help_text = meta.get("help") or ""
        default = field.default
        own = meta.get("flags")
        shown = meta.get("show_default")
        if kind is bool:
            decl = own or f"--{field.name.replace('_', '-')}/--no-{field.name.replace('_', '-')}"
            pair = "/" in decl  # --x/--no-x (click infers the flag); else a plain flag
            options.append(
                click.Option(
                    [decl, field.name],
                    is_flag=None if pair else True,
                    default=default,
                    show_default=pair and default is not None,
                    help=help_text,
                )
            )
            continue
        if get_origin(kind) is Literal:
            click_type: Any = click.Choice([str(c) for c in get_args(kind)])
        elif kind is int or kind is float:
            click_type = number_type(kind is int, meta.get("min"), meta.get("max"))
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

        repeated = field.name in multiple
        spellings = [own or option_name(field.name)]
        if meta.get("alias"):
            spellings.append(meta["alias"])
        options.append(
            click.Option(
                [*spellings, field.name],
                type=click_type,
                metavar=meta.get("metavar"),
                multiple=repeated,
                # None: keep the dataclass default (so build() sees only the given ones)
                default=default if shown else None,
                show_default=shown,
                help=help_text
                if shown or repeated or default is None
                else f"{help_text}  [default: {default}]",
                callback=callback,
            )
        )
    return options


def number_type(integer: bool, lo: float | None = None, hi: float | None = None):
    """A click type for a number that `check_number` validates: the same bounds and message in
    the CLI as from Python (click's FloatRange lets NaN through)."""
    import click

    class Number(click.ParamType):
        name = "integer" if integer else "number"

        def convert(self, value, param, ctx):
            try:
                return check_number(value, integer=integer, lo=lo, hi=hi)
            except ValueError as e:
                self.fail(str(e), param, ctx)

    return Number()
