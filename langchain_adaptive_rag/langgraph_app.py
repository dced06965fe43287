"""The graphs ``langgraph.json`` serves: every method over the embedded toy world.

``langgraph dev`` (``pip install "langgraph-cli[inmem]"``) or LangGraph Platform imports
this module and calls a method's factory when it needs its graph: importing it loads
nothing heavy, and the toy model and retriever load once, at the first run, then serve
every graph. An assistant (``client.assistants.create(graph_id="dragin", context={"theta":
0.5})``) carries per-call settings of its own (see ``call_config``).

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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig

    from langchain_adaptive_rag.graphs.compiled import AdaptiveRAGGraph

__all__ = [
    "adaptive_rag",
    "dragin",
    "fix_length",
    "fix_sentence",
    "flare",
    "ircot",
    "no_retrieval",
    "seakr",
    "single_round",
    "ta_are",
    "vanilla",
]


@functools.cache
def _toy_graph(method: str) -> AdaptiveRAGGraph:
    """The method's graph over the toy model and retriever (built once per method)."""
    from langchain_adaptive_rag.graphs import create_adaptive_rag_graph
    from langchain_adaptive_rag.toyworld import TOY_PROMPTS
    from langchain_adaptive_rag.toyworld.comparison import TOY_CONFIGS

    model, retriever = _toy_parts()
    return create_adaptive_rag_graph(
        model,
        retriever,
        method,  # type: ignore[arg-type]
        config=TOY_CONFIGS[method],
        prompts=TOY_PROMPTS,
    )


@functools.cache
def _toy_parts() -> tuple[Any, Any]:
    """The toy model (concurrent runs decode together) and its BM25 retriever, once."""
    from langchain_adaptive_rag.toyworld import load_toy_model, toy_retriever

    return load_toy_model(batch_concurrent_calls=True), toy_retriever()


def no_retrieval(config: RunnableConfig) -> AdaptiveRAGGraph:
    """wo-RAG over the toy world."""
    return _toy_graph("no_retrieval")


def single_round(config: RunnableConfig) -> AdaptiveRAGGraph:
    """SR-RAG over the toy world."""
    return _toy_graph("single_round")


def fix_length(config: RunnableConfig) -> AdaptiveRAGGraph:
    """FL-RAG over the toy world."""
    return _toy_graph("fix_length")


def fix_sentence(config: RunnableConfig) -> AdaptiveRAGGraph:
    """FS-RAG over the toy world."""
    return _toy_graph("fix_sentence")


def ircot(config: RunnableConfig) -> AdaptiveRAGGraph:
    """IRCoT over the toy world."""
    return _toy_graph("ircot")


def adaptive_rag(config: RunnableConfig) -> AdaptiveRAGGraph:
    """Adaptive-RAG over the toy world."""
    return _toy_graph("adaptive_rag")


def flare(config: RunnableConfig) -> AdaptiveRAGGraph:
    """FLARE over the toy world."""
    return _toy_graph("flare")


def dragin(config: RunnableConfig) -> AdaptiveRAGGraph:
    """DRAGIN over the toy world."""
    return _toy_graph("dragin")


def seakr(config: RunnableConfig) -> AdaptiveRAGGraph:
    """SeaKR over the toy world."""
    return _toy_graph("seakr")


def vanilla(config: RunnableConfig) -> AdaptiveRAGGraph:
    """Vanilla prompting over the toy world."""
    return _toy_graph("vanilla")


def ta_are(config: RunnableConfig) -> AdaptiveRAGGraph:
    """TA-ARE over the toy world."""
    return _toy_graph("ta_are")
