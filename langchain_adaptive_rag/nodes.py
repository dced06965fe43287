"""Node factories: each returns a plain function from state to a partial update."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.documents import Document
from langgraph.config import get_stream_writer

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.policy import Policy, RunContext, bump
from langchain_adaptive_rag.retrievers import BM25Retriever
from langchain_adaptive_rag.state import (
    AdaptiveRAGState,
    ResetRetrievals,
    RetrievalEvent,
    RetrievedDoc,
)

__all__ = [
    "Node",
    "make_continue_generation_node",
    "make_draft_node",
    "make_finalize_node",
    "make_formulate_query_node",
    "make_rerank_node",
    "make_retrieve_node",
    "make_score_need_node",
]

Node = Callable[[AdaptiveRAGState], dict[str, Any]]
"""A graph node: state in, partial update out."""


def _check_question(state: AdaptiveRAGState) -> None:
    question = state.get("question")
    if not isinstance(question, str) or not question.strip():
        msg = (
            f"The graph received question={question!r}. Expected a non-empty string: "
            'graph.invoke({"question": "..."}).'
        )
        raise AdaptiveRAGError(msg)


def _fresh_run() -> dict[str, Any]:
    """Values of the per-run channels at the start of a run."""
    return {
        "answer": "",
        "text": "",
        "retrievals": ResetRetrievals(),
        "counts": bump(None),
        "draft": "",
        "draft_tokens": [],
        "draft_logprobs": [],
        "draft_entropies": [],
        "draft_words": [],
        "draft_sentences": [],
        "pending": {},
        "query": "",
        "docs": [],
        "kept_docs": [],
        "rerank_order": None,
        "last_accepted": "",
        "answer_tokens": 0,
        "step": 0,
        "finished": False,
        "route": "",
    }


def make_draft_node(policy: Policy, ctx: RunContext) -> Node:
    """Node ``draft``: the policy's look-ahead generation."""

    def draft(state: AdaptiveRAGState) -> dict[str, Any]:
        _check_question(state)
        if not state.get("finished"):
            return policy.draft(ctx, state)
        # a finished run on this thread: a new question starts from a clean slate
        reset = _fresh_run()
        fresh: AdaptiveRAGState = {**state, **reset, "retrievals": []}  # type: ignore[typeddict-item]
        return {**reset, **policy.draft(ctx, fresh)}

    return draft


def make_score_need_node(policy: Policy, ctx: RunContext) -> Node:
    """Node ``score_need``: accept text and decide whether to retrieve."""

    def score_need(state: AdaptiveRAGState) -> dict[str, Any]:
        return policy.score_need(ctx, state)

    return score_need


def make_formulate_query_node(policy: Policy, ctx: RunContext) -> Node:
    """Node ``formulate_query``: the retrieval query."""

    def formulate_query(state: AdaptiveRAGState) -> dict[str, Any]:
        return {"query": policy.formulate_query(ctx, state)}

    return formulate_query


def _doc_id(document: Document, fallback: str) -> str:
    """A document's ``id``, else its ``metadata["id"]``, else ``fallback``."""
    if document.id is not None:
        return str(document.id)
    return str(document.metadata.get("id", fallback))


def _to_docs(documents: list[Document], offset: int) -> list[RetrievedDoc]:
    return [
        {"id": _doc_id(d, f"result-{offset + i}"), "text": d.page_content}
        for i, d in enumerate(documents)
    ]


def make_retrieve_node(policy: Policy, ctx: RunContext) -> Node:
    """Node ``retrieve``: call the retriever; a failure is recorded, not raised."""
    top_k = policy.config.retrieve_topk

    def retrieve(state: AdaptiveRAGState) -> dict[str, Any]:
        query = state.get("query", "")
        note = ""
        try:
            if not query.strip():  # a blank query (reference FLARE, DRAGIN): nothing to find
                found, note = [], "blank query: nothing retrieved"
            elif isinstance(ctx.retriever, BM25Retriever):
                found = ctx.retriever.invoke(query, k=top_k)
            else:
                found = ctx.retriever.invoke(query)[:top_k]
        except Exception as error:  # any retriever failure: continue without documents
            found = []
            note = f"retriever raised {type(error).__name__}: {error}"
        if not found and not note:
            note = "retriever returned no documents"
        docs = _to_docs(found, state.get("counts", {}).get("retrievals", 0) * top_k)
        get_stream_writer()(
            {"event": "retrieval", "query": query, "doc_ids": [d["id"] for d in docs], "note": note}
        )
        pending = dict(state.get("pending", {}))
        pending["note"] = "; ".join(n for n in (str(pending.get("note", "")), note) if n)
        return {
            "docs": docs,
            "pending": pending,
            "counts": bump(state.get("counts"), retrievals=1),
        }

    return retrieve


def make_rerank_node(policy: Policy, ctx: RunContext) -> Node:
    """Node ``rerank``: the policy's re-ranking; records the retrieval event.

    The event lists the retrieved documents in retriever order; ``rerank_order`` gives the
    ranks the policy kept (``None``: all, unchanged).
    """

    def rerank(state: AdaptiveRAGState) -> dict[str, Any]:
        retrieved = list(state.get("docs", []))
        update = policy.rerank(ctx, state)
        order: list[int] | None = update.get("rerank_order")  # type: ignore[assignment]
        pending = state.get("pending", {})
        event: RetrievalEvent = {
            "step": state.get("step", 0),
            "trigger_position": pending.get("trigger_position"),  # type: ignore[typeddict-item]
            "trigger_word": pending.get("trigger_word"),  # type: ignore[typeddict-item]
            "score": pending.get("score"),  # type: ignore[typeddict-item]
            "threshold": pending.get("threshold"),  # type: ignore[typeddict-item]
            "query": state.get("query", ""),
            "doc_ids": [d["id"] for d in retrieved],
            "doc_texts": [d["text"] for d in retrieved],
            "rerank_order": order,
            "note": str(pending.get("note", "")),
        }
        return {**update, "retrievals": [event]}

    return rerank


def make_continue_generation_node(policy: Policy, ctx: RunContext) -> Node:
    """Node ``continue_generation``: generate with the documents."""

    def continue_generation(state: AdaptiveRAGState) -> dict[str, Any]:
        return policy.continue_generation(ctx, state)

    return continue_generation


def make_finalize_node(policy: Policy, ctx: RunContext) -> Node:
    """Node ``finalize``: the short answer."""

    def finalize(state: AdaptiveRAGState) -> dict[str, Any]:
        return {**policy.finalize(ctx, state), "finished": True}

    return finalize
