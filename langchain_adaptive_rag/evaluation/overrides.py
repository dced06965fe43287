"""Typed ``key=value`` overrides of a method's frozen config (the CLI's ``--config``).

Each value is parsed by the type of the config field it names:

- ``int`` / ``float``: a number (``theta=1.2``, ``query_top_n=35``);
- ``bool``: ``true``/``false``, ``yes``/``no``, ``1``/``0`` (any case);
- ``str``: the text as written;
- ``Literal[...]``: one of the listed values (``attention_mode=inline``);
- ``X | None``: ``none`` or ``null`` for ``None``, otherwise an ``X``;
- ``tuple[X, ...]``: a JSON list (``yes_pool=["q1", "q2"]``) or comma-separated items
  (``yes_pool=q1,q2``); nested tuples need JSON (``demonstrations=[["q", "[Yes]"]]``).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Literal, TypeVar, Union, get_args, get_origin

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs import config_class
from langchain_adaptive_rag.graphs.policy import MethodConfig

__all__ = ["config_class_for", "config_to_dict", "parse_config_overrides"]

ConfigT = TypeVar("ConfigT", bound=MethodConfig)

_TRUE = frozenset({"true", "yes", "1", "on"})
_FALSE = frozenset({"false", "no", "0", "off"})
_NONE = frozenset({"none", "null"})


def config_class_for(method: str) -> type[MethodConfig]:
    """The config class a method's graph takes.

    Args:
        method: One of [`AVAILABLE_METHODS`][].

    Returns:
        [`DRAGINConfig`][] for ``"dragin"``, [`MethodConfig`][] for ``"no_retrieval"``, ...

    Raises:
        AdaptiveRAGError: The method is unknown.
    """
    return config_class(method)


def config_to_dict(config: MethodConfig) -> dict[str, object]:
    """A config's field values as JSON-ready data (tuples become lists).

    Args:
        config: Any method config.

    Returns:
        The values by field name, in field order.
    """
    result: dict[str, object] = json.loads(json.dumps(dataclasses.asdict(config)))
    return result


def _type_name(kind: object) -> str:
    """Words for a field type, e.g. ``an integer`` or ``one of 'inline', 'reference'``."""
    if kind is int:
        return "an integer"
    if kind is float:
        return "a number"
    if kind is bool:
        return "a boolean (true/false)"
    if kind is str:
        return "a string"
    origin = get_origin(kind)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(kind))
    if origin in (Union, types.UnionType):
        return " or ".join(
            "'none'" if arg is type(None) else _type_name(arg) for arg in get_args(kind)
        )
    if origin is tuple:
        args = get_args(kind)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_type_name(args[0]).removeprefix('a ').removeprefix('an ')}s"
        return f"a list of {len(args)} items"
    return getattr(kind, "__name__", repr(kind))


class _BadValueError(ValueError):
    """A value that does not fit the field type (the caller words the error)."""


def _convert(value: object, kind: object) -> object:
    """Convert ``value`` (text or parsed JSON) to ``kind``.

    Raises:
        _BadValueError: The value does not fit.
    """
    origin = get_origin(kind)
    if origin in (Union, types.UnionType):
        options = get_args(kind)
        if type(None) in options and (
            value is None or (isinstance(value, str) and value.strip().lower() in _NONE)
        ):
            return None
        for option in options:
            if option is type(None):
                continue
            try:
                return _convert(value, option)
            except _BadValueError:
                continue
        raise _BadValueError
    if origin is Literal:
        choices = get_args(kind)
        for choice in choices:
            if value == choice or (isinstance(value, str) and value.strip() == str(choice)):
                return choice
        raise _BadValueError
    if origin is tuple:
        return _convert_tuple(value, get_args(kind))
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise _BadValueError
    if kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                raise _BadValueError from None
        raise _BadValueError
    if kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                raise _BadValueError from None
        raise _BadValueError
    if kind is str:
        if isinstance(value, str):
            return value
        raise _BadValueError
    raise _BadValueError


def _convert_tuple(value: object, args: tuple[object, ...]) -> tuple[object, ...]:
    """Convert a JSON list or comma-separated text to a typed tuple."""
    items: list[object]
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError:
                raise _BadValueError from None
            if not isinstance(parsed, list):
                raise _BadValueError
            items = list(parsed)
        else:
            items = [part.strip() for part in text.split(",")] if text else []
    elif isinstance(value, list):
        items = list(value)
    else:
        raise _BadValueError
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_convert(item, args[0]) for item in items)
    if len(items) != len(args):
        raise _BadValueError
    return tuple(_convert(item, kind) for item, kind in zip(items, args, strict=True))


def parse_config_overrides(
    overrides: Sequence[str] | Mapping[str, str],
    config_class: type[ConfigT],
    *,
    base: ConfigT | None = None,
) -> ConfigT:
    """Build a config from ``key=value`` strings, parsed by the fields' types.

    Args:
        overrides: ``["theta=1.2", "query_top_n=35", "attention_mode=inline"]`` or the
            same as a mapping ``{"theta": "1.2", ...}``.
        config_class: The method's config dataclass (see [`config_class_for`][]).
        base: The config to start from (default: ``config_class()``).

    Returns:
        A new frozen config; the class's own checks (ranges) run as usual.

    Raises:
        AdaptiveRAGError: An item without ``=``, a key given twice, an unknown key (the
            error lists the valid ones) or a value that does not fit its field's type
            (the error gives the expected type).
    """
    if not (isinstance(config_class, type) and dataclasses.is_dataclass(config_class)):
        msg = f"Received config_class={config_class!r}; expected a config dataclass type."
        raise AdaptiveRAGError(msg)
    hints = typing.get_type_hints(config_class)
    fields = [f.name for f in dataclasses.fields(config_class) if f.init]
    pairs: list[tuple[str, str]] = []
    if isinstance(overrides, Mapping):
        pairs = [(str(key), str(value)) for key, value in overrides.items()]
    else:
        if isinstance(overrides, str):
            msg = (
                f"Received overrides={overrides!r} as one string; expected a list of "
                'key=value strings, e.g. ["theta=1.2"].'
            )
            raise AdaptiveRAGError(msg)
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                msg = (
                    f"Received config override {item!r}; expected key=value, e.g. "
                    f"{fields[0]}=64. Valid keys for {config_class.__name__}: "
                    f"{', '.join(sorted(fields))}."
                )
                raise AdaptiveRAGError(msg)
            pairs.append((key.strip(), value))
    values: dict[str, object] = {}
    for key, raw in pairs:
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            msg = (
                f"Unknown config key {key!r} for {config_class.__name__}.{hint} Valid keys: "
                f"{', '.join(sorted(fields))}."
            )
            raise AdaptiveRAGError(msg)
        if key in values:
            msg = f"Config key {key!r} was given twice; give each key once."
            raise AdaptiveRAGError(msg)
        try:
            values[key] = _convert(raw, hints[key])
        except _BadValueError:
            msg = (
                f"Config value {key}={raw!r} does not fit {config_class.__name__}.{key}: "
                f"expected {_type_name(hints[key])}."
            )
            raise AdaptiveRAGError(msg) from None
    start = base if base is not None else config_class()
    if not isinstance(start, config_class):
        msg = f"Received base of type {type(start).__name__}; expected a {config_class.__name__}."
        raise AdaptiveRAGError(msg)
    # The values were converted to each field's type above.
    return dataclasses.replace(start, **values)  # type: ignore[arg-type]
