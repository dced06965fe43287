"""The one graph builder every method shares."""

from __future__ import annotations

import functools
from collections.abc import Collection
from concurrent.futures import Executor
from typing import Any, Literal

from langchain_core.runnables import Runnable
from langgraph.graph import END, START, StateGraph
from langgraph.types import Checkpointer

from langchain_adaptive_rag.cancellation import run_in_thread
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs._nodes import (
    Node,
    make_continue_generation_node,
    make_draft_node,
    make_finalize_node,
    make_formulate_query_node,
    make_rerank_node,
    make_retrieve_node,
    make_score_need_node,
)
from langchain_adaptive_rag.graphs.call_config import context_schema
from langchain_adaptive_rag.graphs.compiled import AdaptiveRAGGraph
from langchain_adaptive_rag.graphs.policy import NEED_ROUTES, NeedRoute, Policy, RunContext
from langchain_adaptive_rag.options import GraphModel
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.retrieving import Retriever, RetrieverOptions
from langchain_adaptive_rag.served.model import as_trace_model
from langchain_adaptive_rag.state import AdaptiveRAGInput, AdaptiveRAGOutput, AdaptiveRAGState

__all__ = [
    "AdaptiveRAGGraph",
    "build_adaptive_rag_graph",
    "graph_node",
    "route_after_continue",
    "route_after_score_need",
]

try:  # how LangGraph builds a node from a function (an internal module of LangGraph 1.x)
    from langgraph._internal._runnable import RunnableCallable as _NodeRunnable
except ImportError:  # a LangGraph release that moved it: nodes are plain functions
    _NodeRunnable = None  # type: ignore[assignment,misc]


def build_adaptive_rag_graph(
    policy: Policy,
    model: GraphModel,
    retriever: Retriever,
    *,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    retriever_options: RetrieverOptions | None = None,
    name: str | None = None,
    enclosing_fields: Collection[str] = (),
) -> AdaptiveRAGGraph:
    """Wire the seven nodes around ``policy`` and compile.

    ``draft -> score_need -> (formulate_query -> retrieve -> rerank ->)
    continue_generation -> draft ... -> finalize``.

    Args:
        policy: The method.
        model: [`ChatTransformers`][] (or any object with its ``generate_trace``), or any
            LangChain chat model or LLM, which runs as a
            [`ServedModel`][].
        retriever: Any LangChain retriever.
        prompts: Prompt templates (default: [`QAPrompts`][]).
        checkpointer: Passed to ``compile``.
        retriever_options: Retries, time limit and failure handling of the retriever
            calls (default: [`RetrieverOptions`][]).
        name: Graph name (default: the method's name).
        enclosing_fields: For a graph run as another graph's subgraph (Adaptive-RAG's
            routes): that graph's config fields, which a run's ``context`` may set
            besides this method's own.

    Returns:
        The compiled graph, with input ``{"question"}`` and output ``{"answer", "text",
        "retrievals", "counts"}``.

    Raises:
        AttentionUnavailableError: The method needs attention and the model has none.
        AdaptiveRAGError: The model or retriever cannot serve the method (a served
            model for DRAGIN or SeaKR's Gram estimator: no server returns attention or
            hidden states).
    """
    trace_model = as_trace_model(model)
    policy.check_model(trace_model)
    if not isinstance(retriever, Runnable):
        msg = (
            f"retriever must be a LangChain retriever (a BaseRetriever, or a runnable that "
            f"takes the query, such as retriever.with_retry()), got "
            f"{type(retriever).__name__}. Fix: create_bm25_retriever(texts) or any "
            "retriever (vector_store.as_retriever())."
        )
        raise AdaptiveRAGError(msg)
    ctx = RunContext(
        model=trace_model,
        retriever=retriever,
        prompts=prompts or QAPrompts(),
        enclosing_fields=frozenset(enclosing_fields),
    )
    graph = StateGraph(
        _state_schema(policy),
        context_schema=context_schema(type(policy.config)),
        input_schema=AdaptiveRAGInput,
        output_schema=AdaptiveRAGOutput,
    )
    nodes: dict[str, Node] = {
        "draft": make_draft_node(policy, ctx),
        "score_need": make_score_need_node(policy, ctx),
        "formulate_query": make_formulate_query_node(policy, ctx),
        "retrieve": make_retrieve_node(policy, ctx, retriever_options),
        "rerank": make_rerank_node(policy, ctx),
        "continue_generation": make_continue_generation_node(policy, ctx),
        "finalize": make_finalize_node(policy, ctx),
    }
    executor: Executor | None = getattr(trace_model, "async_executor", None)
    for node_name, action in nodes.items():
        graph.add_node(node_name, graph_node(node_name, action, executor))  # type: ignore[arg-type]
    graph.add_edge(START, "draft")
    graph.add_edge("draft", "score_need")
    graph.add_conditional_edges("score_need", route_after_score_need, list(NEED_ROUTES))
    graph.add_edge("formulate_query", "retrieve")
    graph.add_edge("retrieve", "rerank")
    graph.add_edge("rerank", "continue_generation")
    graph.add_conditional_edges("continue_generation", route_after_continue, ["draft", "finalize"])
    graph.add_edge("finalize", END)
    compiled = graph.compile(checkpointer=checkpointer, name=name or policy.name)
    compiled.__class__ = AdaptiveRAGGraph  # LangGraph's compiled graph, with its tool
    return compiled  # type: ignore[return-value]


def _state_schema(policy: Policy) -> type[AdaptiveRAGState]:
    """The policy's state schema, checked to hold every shared channel."""
    schema = policy.state_schema
    shared = AdaptiveRAGState.__required_keys__ | AdaptiveRAGState.__optional_keys__
    own = getattr(schema, "__required_keys__", frozenset()) | getattr(
        schema, "__optional_keys__", frozenset()
    )
    if not shared <= own:
        msg = (
            f"{type(policy).__name__}.state_schema is {schema!r}, which lacks the shared "
            f"channels {sorted(shared - own)}. Expected a TypedDict subclass of "
            "AdaptiveRAGState: class MyState(AdaptiveRAGState): ..."
        )
        raise AdaptiveRAGError(msg)
    return schema


def route_after_score_need(state: AdaptiveRAGState) -> NeedRoute:
    """The node the policy's decision names (``route``): retrieve, continue, draft, finalize."""
    route = state.get("route") or "finalize"
    if route not in NEED_ROUTES:
        msg = f"score_need set route={route!r}; expected one of {list(NEED_ROUTES)}."
        raise AdaptiveRAGError(msg)
    return route  # type: ignore[return-value]


def route_after_continue(state: AdaptiveRAGState) -> Literal["draft", "finalize"]:
    """Draft again until generation is over."""
    return "finalize" if state.get("finished", False) else "draft"


def graph_node(name: str, action: Node, executor: Executor | None) -> Runnable[Any, Any] | Node:
    """``action`` as a graph node whose async runs wait in ``executor``.

    LangGraph runs a sync node of an async run (``ainvoke``, ``abatch``, ``astream``) in
    the event loop's default executor (``None``), whose ``cpu_count + 4`` threads would
    bound how many runs decode together; the model's own threads
    (``ChatTransformers.async_executor``) hold as many as a batch takes. The node is
    built as LangGraph builds one from a function: untraced, the same sync path. Under a
    LangGraph release without that builder where this package looks for it, the graph
    takes ``action`` itself: the same results, with async runs in the default executor.
    """
    if _NodeRunnable is None:
        return action

    async def in_threads(state: AdaptiveRAGState) -> dict[str, Any]:
        # The run's config, callbacks and stream writer go along; a cancelled run stops
        # the node's model call at its next step (see cancellation.run_in_thread).
        return await run_in_thread(executor, functools.partial(action, state))

    return _NodeRunnable(action, in_threads, name=name, trace=False)
