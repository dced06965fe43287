"""One compiled LangGraph graph per adaptive-RAG method, all from one builder."""

from __future__ import annotations

from typing import Literal, get_args

from langgraph.types import Checkpointer

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs._builder import AdaptiveRAGGraph, build_adaptive_rag_graph
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
from langchain_adaptive_rag.graphs.ta_are import (
    TAAREPolicy,
    VanillaPolicy,
    create_ta_are_graph,
    create_vanilla_graph,
)
from langchain_adaptive_rag.policy import GenerationConfig, GraphModel, Policy
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.retrieving import Retriever, RetrieverOptions

__all__ = [
    "AVAILABLE_METHODS",
    "AdaptiveRAGGraph",
    "Method",
    "build_adaptive_rag_graph",
    "config_class",
    "create_adaptive_rag_graph",
    "create_dragin_graph",
    "create_fix_length_graph",
    "create_fix_sentence_graph",
    "create_flare_graph",
    "create_ircot_graph",
    "create_no_retrieval_graph",
    "create_seakr_graph",
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
    "flare",
    "dragin",
    "seakr",
    "vanilla",
    "ta_are",
]
"""Every method's id: wo-RAG, SR-RAG, FL-RAG, FS-RAG, IRCoT, FLARE, DRAGIN, SeaKR, and
Vanilla and TA-ARE prompting, in the order tables show them."""

_POLICY_CLASSES: tuple[type[Policy], ...] = (
    NoRetrievalPolicy,
    SingleRoundPolicy,
    FixLengthPolicy,
    FixSentencePolicy,
    IRCoTPolicy,
    FLAREPolicy,
    DRAGINPolicy,
    SeaKRPolicy,
    VanillaPolicy,
    TAAREPolicy,
)
_POLICIES: dict[str, type[Policy]] = {policy.name: policy for policy in _POLICY_CLASSES}

AVAILABLE_METHODS: tuple[str, ...] = tuple(_POLICIES)
"""Methods this version builds (all of [`Method`][])."""


def policy_class(method: str) -> type[Policy]:
    """The policy class of a method.

    It carries the method's facts: [`display_name`][], ``config_class``,
    ``threshold_field``, ``threshold_symbol`` and ``colour``.

    Args:
        method: One of [`AVAILABLE_METHODS`][].

    Returns:
        The policy class.

    Raises:
        AdaptiveRAGError: The method is unknown.
    """
    if method not in _POLICIES:
        msg = f"Received method={method!r}; expected one of {list(AVAILABLE_METHODS)}."
        raise AdaptiveRAGError(msg)
    return _POLICIES[method]


def config_class(method: str) -> type[GenerationConfig]:
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
    policy = _POLICIES.get(method)
    return policy.display_name if policy is not None else method


def create_adaptive_rag_graph(
    model: GraphModel,
    retriever: Retriever,
    method: Method,
    *,
    config: GenerationConfig | None = None,
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
    if method not in _POLICIES:
        known = "known" if method in get_args(Method) else "unknown"
        msg = (
            f"method={method!r} is {known} but not available in this version. Expected one "
            f"of {list(AVAILABLE_METHODS)}."
        )
        raise AdaptiveRAGError(msg)
    policy = _POLICIES[method]
    expected = policy.config_class
    chosen = config if config is not None else expected()
    if not isinstance(chosen, expected):
        msg = (
            f"method={method!r} takes a {expected.__name__}, got {type(chosen).__name__}. "
            f"Fix: config={expected.__name__}(...)."
        )
        raise AdaptiveRAGError(msg)
    return build_adaptive_rag_graph(
        policy(chosen),
        model,
        retriever,
        prompts=prompts,
        checkpointer=checkpointer,
        retriever_options=retriever_options,
        name=name,
    )
