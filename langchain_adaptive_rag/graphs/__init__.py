"""One compiled LangGraph graph per adaptive-RAG method, all from one builder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

from langchain_core.retrievers import BaseRetriever
from langgraph.types import Checkpointer

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs._builder import AdaptiveRAGGraph, build_adaptive_rag_graph
from langchain_adaptive_rag.graphs.dragin import DRAGINConfig, DRAGINPolicy, create_dragin_graph
from langchain_adaptive_rag.graphs.fixed import (
    FixLengthConfig,
    FixLengthPolicy,
    FixSentenceConfig,
    FixSentencePolicy,
    NoRetrievalPolicy,
    SingleRoundPolicy,
    create_fix_length_graph,
    create_fix_sentence_graph,
    create_no_retrieval_graph,
    create_single_round_graph,
)
from langchain_adaptive_rag.graphs.flare import FLAREConfig, FLAREPolicy, create_flare_graph
from langchain_adaptive_rag.graphs.seakr import SeaKRConfig, SeaKRPolicy, create_seakr_graph
from langchain_adaptive_rag.graphs.ta_are import (
    TAAREConfig,
    TAAREPolicy,
    VanillaPolicy,
    create_ta_are_graph,
    create_vanilla_graph,
)
from langchain_adaptive_rag.policy import GenerationConfig, Policy, TraceModel
from langchain_adaptive_rag.prompts import QAPrompts

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
    "create_no_retrieval_graph",
    "create_seakr_graph",
    "create_single_round_graph",
    "create_ta_are_graph",
    "create_vanilla_graph",
]

Method = Literal[
    "no_retrieval",
    "single_round",
    "fix_length",
    "fix_sentence",
    "flare",
    "dragin",
    "seakr",
    "vanilla",
    "ta_are",
]
"""Every method name of the product (see DESIGN: wo-RAG, SR-RAG, FL-RAG, FS-RAG, FLARE,
DRAGIN, SeaKR, Vanilla and TA-ARE prompting)."""

_POLICIES: dict[str, tuple[Callable[[GenerationConfig], Policy], type[GenerationConfig]]] = {
    "no_retrieval": (NoRetrievalPolicy, GenerationConfig),
    "single_round": (SingleRoundPolicy, GenerationConfig),
    "fix_length": (FixLengthPolicy, FixLengthConfig),
    "fix_sentence": (FixSentencePolicy, FixSentenceConfig),
    "flare": (FLAREPolicy, FLAREConfig),
    "dragin": (DRAGINPolicy, DRAGINConfig),
    "seakr": (SeaKRPolicy, SeaKRConfig),
    "vanilla": (VanillaPolicy, TAAREConfig),
    "ta_are": (TAAREPolicy, TAAREConfig),
}

AVAILABLE_METHODS: tuple[str, ...] = tuple(_POLICIES)
"""Methods this version builds (all of :data:`Method`)."""


def config_class(method: str) -> type[GenerationConfig]:
    """The config class a method takes (``FLAREConfig`` for ``"flare"``, ...).

    Args:
        method: One of :data:`AVAILABLE_METHODS`.

    Returns:
        The frozen config dataclass.

    Raises:
        AdaptiveRAGError: The method is unknown.
    """
    if method not in _POLICIES:
        msg = f"Received method={method!r}; expected one of {list(AVAILABLE_METHODS)}."
        raise AdaptiveRAGError(msg)
    return _POLICIES[method][1]


def create_adaptive_rag_graph(
    model: TraceModel,
    retriever: BaseRetriever,
    method: Method,
    *,
    config: GenerationConfig | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    name: str | None = None,
) -> AdaptiveRAGGraph:
    """Build the graph of any method by name.

    Args:
        model: ``ChatTransformers`` or any object with its ``generate_trace``.
        retriever: Any LangChain retriever (default choice: ``create_bm25_retriever``).
        method: One of :data:`AVAILABLE_METHODS`.
        config: The method's config class (``FLAREConfig`` for ``"flare"``, ...).
        prompts: Prompt templates.
        checkpointer: Passed to ``compile``.
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
    policy_class, config_class = _POLICIES[method]
    chosen = config if config is not None else config_class()
    if not isinstance(chosen, config_class):
        msg = (
            f"method={method!r} takes a {config_class.__name__}, got {type(chosen).__name__}. "
            f"Fix: config={config_class.__name__}(...)."
        )
        raise AdaptiveRAGError(msg)
    return build_adaptive_rag_graph(
        policy_class(chosen),
        model,
        retriever,
        prompts=prompts,
        checkpointer=checkpointer,
        name=name,
    )
