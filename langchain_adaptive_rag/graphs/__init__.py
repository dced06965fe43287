"""One compiled LangGraph graph per adaptive-RAG method, all from one builder."""

from __future__ import annotations

import importlib
from typing import TypeAlias

from langgraph.types import Checkpointer

from langchain_adaptive_rag.catalogue import METHODS, method_id
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs._builder import AdaptiveRAGGraph, build_adaptive_rag_graph
from langchain_adaptive_rag.graphs.adaptive_rag import create_adaptive_rag_router_graph
from langchain_adaptive_rag.graphs.dragin import create_dragin_graph
from langchain_adaptive_rag.graphs.etc import create_etc_graph
from langchain_adaptive_rag.graphs.fixed import (
    create_fix_length_graph,
    create_fix_sentence_graph,
    create_no_retrieval_graph,
    create_single_round_graph,
)
from langchain_adaptive_rag.graphs.flare import create_flare_graph
from langchain_adaptive_rag.graphs.ircot import create_ircot_graph
from langchain_adaptive_rag.graphs.policy import MethodConfig, MethodFacts, Policy
from langchain_adaptive_rag.graphs.seakr import create_seakr_graph
from langchain_adaptive_rag.graphs.search_agent import create_search_agent_graph
from langchain_adaptive_rag.graphs.self_rag import create_self_rag_graph
from langchain_adaptive_rag.graphs.ta_are import (
    create_ta_are_graph,
    create_vanilla_graph,
)
from langchain_adaptive_rag.graphs.tool_agent import create_tool_agent_graph
from langchain_adaptive_rag.graphs.uncertainty_gate import create_uncertainty_gate_graph
from langchain_adaptive_rag.options import GraphModel
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.retrieving import Retriever, RetrieverOptions

__all__ = [
    "AVAILABLE_METHODS",
    "AdaptiveRAGGraph",
    "Method",
    "build_adaptive_rag_graph",
    "config_class",
    "create_adaptive_rag_graph",
    "create_adaptive_rag_router_graph",
    "create_dragin_graph",
    "create_etc_graph",
    "create_fix_length_graph",
    "create_fix_sentence_graph",
    "create_flare_graph",
    "create_ircot_graph",
    "create_no_retrieval_graph",
    "create_seakr_graph",
    "create_search_agent_graph",
    "create_self_rag_graph",
    "create_single_round_graph",
    "create_ta_are_graph",
    "create_tool_agent_graph",
    "create_uncertainty_gate_graph",
    "create_vanilla_graph",
    "display_name",
    "policy_class",
]

Method: TypeAlias = str
"""A method's id: one of [`AVAILABLE_METHODS`][] (``"dragin"``, ``"flare"``, ...)."""


def _load_facts(method: str, where: str) -> type[MethodFacts]:
    """The class ``module:Class`` names, checked to carry ``method``'s facts."""
    module, _, name = where.partition(":")
    facts = getattr(importlib.import_module(module), name)
    if not (isinstance(facts, type) and issubclass(facts, MethodFacts)) or facts.name != method:
        msg = f"catalogue.METHODS[{method!r}] = {where!r} is not that method's policy class."
        raise AdaptiveRAGError(msg)
    return facts


_METHODS: dict[str, type[MethodFacts]] = {
    method: _load_facts(method, where) for method, where in METHODS.items()
}
AVAILABLE_METHODS: tuple[str, ...] = tuple(_METHODS)
"""Methods this version builds (all of [`Method`][])."""


def policy_class(method: str) -> type[MethodFacts]:
    """The class carrying a method's facts: its policy class (Adaptive-RAG: its router).

    The facts: [`display_name`][], ``config_class``, ``threshold_field``,
    ``threshold_symbol`` and ``colour``.

    Args:
        method: One of [`AVAILABLE_METHODS`][], or a papers' name in any case
            (``"DRAGIN"``, ``"Adaptive-RAG"``, ``"SR-RAG"``).

    Returns:
        The policy (or router) class.

    Raises:
        AdaptiveRAGError: The method is unknown (the message offers the nearest name).
    """
    return _METHODS[method_id(method)]


def config_class(method: str) -> type[MethodConfig]:
    """The config class a method takes ([`FLAREConfig`][] for ``"flare"``, ...).

    Args:
        method: One of [`AVAILABLE_METHODS`][], or a papers' name in any case.

    Returns:
        The frozen config dataclass.

    Raises:
        AdaptiveRAGError: The method is unknown.
    """
    return policy_class(method).config_class


def display_name(method: str) -> str:
    """The papers' name of a method (``"SR-RAG"`` for ``"single_round"``).

    An unknown id is returned as it is (results files of other tools).
    """
    try:
        return policy_class(method).display_name
    except AdaptiveRAGError:
        return method


def create_adaptive_rag_graph(
    model: GraphModel,
    retriever: Retriever,
    method: Method,
    *,
    config: MethodConfig | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    retriever_options: RetrieverOptions | None = None,
    name: str | None = None,
) -> AdaptiveRAGGraph:
    """Build the graph of any method by name.

    Args:
        model: [`ChatTransformers`][] or any object with its ``generate_trace``.
        retriever: Any LangChain retriever (default choice: [`create_bm25_retriever`][]).
        method: One of [`AVAILABLE_METHODS`][], or a papers' name in any case.
        config: The method's config class ([`FLAREConfig`][] for ``"flare"``, ...).
        prompts: Prompt templates.
        checkpointer: Passed to ``compile``.
        retriever_options: Retries, time limit and failure handling of the retriever
            calls (default: [`RetrieverOptions`][]).
        name: Graph name.

    Returns:
        The compiled graph.

    Raises:
        AdaptiveRAGError: For an unknown or not yet available method, or a config of the
            wrong class.
    """
    facts = policy_class(method)
    expected = facts.config_class
    chosen = config if config is not None else expected()
    if not isinstance(chosen, expected):
        msg = (
            f"method={method!r} takes a {expected.__name__}, got {type(chosen).__name__}. "
            f"Fix: config={expected.__name__}(...)."
        )
        raise AdaptiveRAGError(msg)
    if not issubclass(facts, Policy):  # a graph of its own (a router, an agent)
        return facts.create_graph(
            model,
            retriever,
            config=chosen,
            prompts=prompts,
            checkpointer=checkpointer,
            retriever_options=retriever_options,
            name=name,
        )
    return build_adaptive_rag_graph(
        facts(chosen),
        model,
        retriever,
        prompts=prompts,
        checkpointer=checkpointer,
        retriever_options=retriever_options,
        name=name,
    )
