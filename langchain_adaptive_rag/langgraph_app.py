"""The graphs ``langgraph.json`` serves: every method over the embedded toy world.

``langgraph dev`` (``pip install "langgraph-cli[inmem]"``) or LangGraph Platform imports
this module and calls a method's factory when it needs its graph: every method id of
the registry ([`catalogue.METHODS`][langchain_adaptive_rag.catalogue.METHODS]) names a
factory here. Importing it loads nothing heavy, and the toy model and retriever load
once, at the first run, then serve every graph. An assistant
(``client.assistants.create(graph_id="dragin", context={"theta": 0.5})``) carries per-call
settings of its own (see ``graphs.call_config``).

To serve your own model and index, write a module of the same shape (a factory per
graph) and point ``langgraph.json`` at it::

    @functools.cache
    def _parts():
        return ChatTransformers(model="path/to/model"), load_bm25_retriever("indexes/wiki")

    def dragin(config):
        model, retriever = _parts()
        return create_dragin_graph(model, retriever, prompts=dataset_prompts("hotpotqa"))
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langchain_adaptive_rag.catalogue import METHOD_NAMES

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from langchain_adaptive_rag.graphs.compiled import AdaptiveRAGGraph

__all__ = list(METHOD_NAMES)  # each a factory, made below from the registry

GraphFactory = Callable[["RunnableConfig"], "AdaptiveRAGGraph"]
"""What ``langgraph.json`` names: a function from the run's config to a compiled graph."""


@functools.cache
def _toy_graph(method: str) -> AdaptiveRAGGraph:
    from langchain_adaptive_rag.graphs import create_adaptive_rag_graph
    from langchain_adaptive_rag.toyworld import TOY_PROMPTS
    from langchain_adaptive_rag.toyworld.comparison import toy_config

    model, retriever = _toy_parts()
    return create_adaptive_rag_graph(
        model, retriever, method, config=toy_config(method), prompts=TOY_PROMPTS
    )


@functools.cache
def _toy_parts() -> tuple[Any, Any]:
    from langchain_adaptive_rag.toyworld import load_toy_model, toy_retriever

    return load_toy_model(batch_concurrent_calls=True), toy_retriever()


def _factory(method: str) -> GraphFactory:
    """The factory ``langgraph.json`` names for ``method``: its graph over the toy world."""

    def factory(config: RunnableConfig) -> AdaptiveRAGGraph:
        return _toy_graph(method)

    factory.__name__ = factory.__qualname__ = method
    factory.__doc__ = f"The {method} graph over the toy world."
    return factory


# one module attribute per registered method (LangGraph's server reads the module's dict)
globals().update({method: _factory(method) for method in METHOD_NAMES})
