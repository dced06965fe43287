"""Per-call method settings: a graph's config fields, changed for one run.

A graph is built with its method's config (``DRAGINConfig(theta=1.2)``); that is every
run's default. One run can change any field through LangGraph's run context, or through
``configurable`` for clients that only send a ``RunnableConfig``::

    graph.invoke({"question": q}, context={"theta": 1.5})
    graph.invoke({"question": q}, {"configurable": {"theta": 1.5}})
    graph.with_config(configurable={"theta": 1.5})

The graph declares the fields as its context schema (``graph.get_context_jsonschema()``:
every field optional, typed), so LangGraph Platform assistants and Studio show and carry
them. A value is checked as the config class checks it; an unknown field in ``context``
is an error that lists the valid ones (``configurable`` also carries LangGraph's own keys,
such as ``thread_id``, so only the config's fields are read from it).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any

from langgraph.config import get_config
from langgraph.runtime import get_runtime
from typing_extensions import TypedDict

from langchain_adaptive_rag.errors import AdaptiveRAGError

__all__ = ["call_overrides", "context_schema"]

_CONFIGURABLE = "configurable"


def context_schema(config_class: type[Any]) -> type[Any]:
    """A TypedDict of ``config_class``'s fields, each optional: a graph's context schema.

    Args:
        config_class: The method's config dataclass ([`DRAGINConfig`][]).

    Returns:
        ``<Config>Context``, with the same names and types and ``total=False``.
    """
    hints = typing.get_type_hints(config_class)
    annotations = {item.name: hints[item.name] for item in dataclasses.fields(config_class)}
    schema: type[Any] = TypedDict(  # type: ignore[misc]
        f"{config_class.__name__}Context", annotations, total=False
    )
    schema.__doc__ = (
        f"Per-call values of {config_class.__name__}'s fields (each optional; the graph's "
        "build-time config gives the rest)."
    )
    return schema


def call_overrides(
    config: Any, *, enclosing_fields: frozenset[str] = frozenset()
) -> dict[str, object]:
    """The fields of ``config`` this run changes, from its context and ``configurable``.

    Args:
        config: The graph's build-time config (a dataclass instance).
        enclosing_fields: Context fields of the graph this one runs in as a subgraph
            (Adaptive-RAG's routes): the run's context may set them, and this graph
            takes the ones its own config has.

    Returns:
        Field name to value; empty outside a graph run or when nothing is changed.

    Raises:
        AdaptiveRAGError: The context names a field the config does not have, or is not
            a mapping.
    """
    try:
        found = get_config().get(_CONFIGURABLE)
        context = getattr(get_runtime(), "context", None)
    except RuntimeError:  # called outside a run (a node called directly)
        return {}
    names = {item.name for item in dataclasses.fields(config)}
    configurable = found if isinstance(found, Mapping) else {}
    overrides = {key: value for key, value in configurable.items() if key in names}
    if context is None:
        return overrides
    if isinstance(context, type(config)):
        return {name: getattr(context, name) for name in names}
    if not isinstance(context, Mapping):
        msg = (
            f"The run's context is a {type(context).__name__}; expected a dict of "
            f"{type(config).__name__} fields, e.g. context={{'{sorted(names)[0]}': ...}}."
        )
        raise AdaptiveRAGError(msg)
    unknown = sorted(set(context) - names - enclosing_fields)
    if unknown:
        msg = (
            f"The run's context sets {', '.join(map(repr, unknown))}, which "
            f"{type(config).__name__} does not have. Expected some of: "
            f"{', '.join(sorted(names))}."
        )
        raise AdaptiveRAGError(msg)
    return {**overrides, **{key: value for key, value in context.items() if key in names}}
