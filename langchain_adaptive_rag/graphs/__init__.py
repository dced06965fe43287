"""One compiled LangGraph graph per adaptive-RAG method, all from one builder."""

from __future__ import annotations

from typing import Literal, get_args

from langgraph.types import Checkpointer

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs._builder import AdaptiveRAGGraph, build_adaptive_rag_graph
from langchain_adaptive_rag.graphs.adaptive_rag import (
    AdaptiveRAGRouter,
    create_adaptive_rag_router_graph,
)
from langchain_adaptive_rag.graphs.dragin import DRAGINPolicy, create_dragin_graph
from langchain_adaptive_rag.graphs.fixed import (
    FixLengthPolicy,
    FixSentencePolicy,
    NoRetrievalPolicy,
    SingleRoundPolicy,
    create_fix_length_graph,
    create_fix_sentence_graph,
    create_no_retrieval_graph,
    create_single_round_graph,
)
from langchain_adaptive_rag.graphs.flare import FLAREPolicy, create_flare_graph
from langchain_adaptive_rag.graphs.ircot import IRCoTPolicy, create_ircot_graph
from langchain_adaptive_rag.graphs.seakr import SeaKRPolicy, create_seakr_graph
from langchain_adaptive_rag.graphs.self_rag import SelfRAGPolicy, create_self_rag_graph
from langchain_adaptive_rag.graphs.ta_are import (
    TAAREPolicy,
    VanillaPolicy,
    create_ta_are_graph,
    create_vanilla_graph,
)
from langchain_adaptive_rag.policy import GraphModel, MethodConfig, MethodFacts, Policy
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
    "create_fix_length_graph",
    "create_fix_sentence_graph",
    "create_flare_graph",
    "create_ircot_graph",
    "create_no_retrieval_graph",
    "create_seakr_graph",
    "create_self_rag_graph",
    "create_single_round_graph",
    "create_ta_are_graph",
    "create_vanilla_graph",
    "display_name",
    "policy_class",
]

Method = Literal[
    "no_retrieval",
    "single_round",
    "fix_length",
    "fix_sentence",
    "ircot",
    "adaptive_rag",
    "flare",
    "dragin",
    "seakr",
    "self_rag",
    "vanilla",
    "ta_are",
]
"""Every method's id: wo-RAG, SR-RAG, FL-RAG, FS-RAG, IRCoT, Adaptive-RAG, FLARE, DRAGIN,
SeaKR, Self-RAG, and Vanilla and TA-ARE prompting, in the order tables show them."""

_METHOD_CLASSES: tuple[type[MethodFacts], ...] = (
    NoRetrievalPolicy,
    SingleRoundPolicy,
    FixLengthPolicy,
    FixSentencePolicy,
    IRCoTPolicy,
    AdaptiveRAGRouter,
    FLAREPolicy,
    DRAGINPolicy,
    SeaKRPolicy,
    SelfRAGPolicy,
    VanillaPolicy,
    TAAREPolicy,
)
_METHODS: dict[str, type[MethodFacts]] = {method.name: method for method in _METHOD_CLASSES}

AVAILABLE_METHODS: tuple[str, ...] = tuple(_METHODS)
"""Methods this version builds (all of [`Method`][])."""


def policy_class(method: str) -> type[MethodFacts]:
    """The class carrying a method's facts: its policy class (Adaptive-RAG: its router).

    The facts: [`display_name`][], ``config_class``, ``threshold_field``,
    ``threshold_symbol`` and ``colour``.

    Args:
        method: One of [`AVAILABLE_METHODS`][].

    Returns:
        The policy (or router) class.

    Raises:
        AdaptiveRAGError: The method is unknown.
    """
    if method not in _METHODS:
        msg = f"Received method={method!r}; expected one of {list(AVAILABLE_METHODS)}."
        raise AdaptiveRAGError(msg)
    return _METHODS[method]


def config_class(method: str) -> type[MethodConfig]:
    """The config class a method takes ([`FLAREConfig`][] for ``"flare"``, ...).

    Args:
        method: One of [`AVAILABLE_METHODS`][].

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
    policy = _METHODS.get(method)
    return policy.display_name if policy is not None else method


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
        method: One of [`AVAILABLE_METHODS`][].
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
    if method not in _METHODS:
        known = "known" if method in get_args(Method) else "unknown"
        msg = (
            f"method={method!r} is {known} but not available in this version. Expected one "
            f"of {list(AVAILABLE_METHODS)}."
        )
        raise AdaptiveRAGError(msg)
    facts = _METHODS[method]
    expected = facts.config_class
    chosen = config if config is not None else expected()
    if not isinstance(chosen, expected):
        msg = (
            f"method={method!r} takes a {expected.__name__}, got {type(chosen).__name__}. "
            f"Fix: config={expected.__name__}(...)."
        )
        raise AdaptiveRAGError(msg)
    if facts is AdaptiveRAGRouter:  # a router over three graphs, not one policy
        return create_adaptive_rag_router_graph(
            model,
            retriever,
            config=chosen,  # type: ignore[arg-type]
            prompts=prompts,
            checkpointer=checkpointer,
            retriever_options=retriever_options,
            name=name,
        )
    assert issubclass(facts, Policy)
    return build_adaptive_rag_graph(
        facts(chosen),
        model,
        retriever,
        prompts=prompts,
        checkpointer=checkpointer,
        retriever_options=retriever_options,
        name=name,
    )
