"""Named routers of the adaptive-RAG graph."""

from __future__ import annotations

from typing import Literal

from langchain_adaptive_rag.state import AdaptiveRAGState

__all__ = ["route_after_continue", "route_after_score_need"]


def route_after_score_need(
    state: AdaptiveRAGState,
) -> Literal["formulate_query", "continue_generation", "draft", "finalize"]:
    """Follow the policy's decision: retrieve, continue without retrieval, draft, finalize."""
    route = state.get("route", "finalize")
    if route == "retrieve":
        return "formulate_query"
    if route == "continue":
        return "continue_generation"
    if route == "draft":
        return "draft"
    return "finalize"


def route_after_continue(state: AdaptiveRAGState) -> Literal["draft", "finalize"]:
    """Draft again until generation is over."""
    return "finalize" if state.get("finished", False) else "draft"
