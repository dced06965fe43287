"""Node factories: each returns a plain function from state to a partial update."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langgraph.config import get_stream_writer
from langgraph.types import Overwrite

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.policy import Policy, RunContext, bump, retrieval_decision
from langchain_adaptive_rag.retrievers import BM25Retriever
from langchain_adaptive_rag.retrieving import AbandonedCalls, RetrieverOptions, call_retriever
from langchain_adaptive_rag.state import AdaptiveRAGState, RetrievalEvent, RetrievedDoc

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


def _check_input(state: AdaptiveRAGState) -> None:
    """The graph's input: a non-empty question of encodable text, a list of messages."""
    question = state.get("question")
    if not isinstance(question, str) or not question.strip():
        msg = (
            f"The graph received question={question!r}. Expected a non-empty string: "
            'graph.invoke({"question": "..."}).'
        )
        raise AdaptiveRAGError(msg)
    try:
        question.encode("utf-8")
    except UnicodeEncodeError as error:
        msg = (
            f"The graph received a question with a character that is not text: "
            f"{question[error.start : error.end]!r} at position {error.start} (a lone "
            "surrogate, e.g. from text decoded with errors='surrogateescape'). Expected "
            "valid Unicode text. Fix: decode the source as UTF-8, or drop the character."
        )
        raise AdaptiveRAGError(msg) from None
    history = state.get("chat_history")
    if history is not None and (
        not isinstance(history, list) or not all(isinstance(m, BaseMessage) for m in history)
    ):
        kinds = (
            sorted({type(m).__name__ for m in history})
            if isinstance(history, list)
            else type(history).__name__
        )
        msg = (
            f"The graph received chat_history of {kinds}. Expected a list of LangChain "
            "messages (HumanMessage, AIMessage, ...): "
            'graph.invoke({"question": "...", "chat_history": [HumanMessage("..."), ...]}).'
        )
        raise AdaptiveRAGError(msg)


def _fresh_run() -> dict[str, Any]:
    """Values of the per-run channels at the start of a run."""
    return {
        "answer": "",
        "text": "",
        "retrievals": Overwrite([]),
        "counts": bump(None),
        "draft": "",
        "draft_tokens": [],
        "draft_logprobs": [],
        "draft_entropies": [],
        "draft_words": [],
        "draft_sentences": [],
        "draft_sentence_texts": [],
        "decision": retrieval_decision(0, retrieve=False),
        "query_inputs": {},
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
        _check_input(state)
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
        update = policy.score_need(ctx, state)
        decision = update.get("decision")
        if isinstance(decision, dict):
            get_stream_writer()({"event": "decision", **decision})
        return update

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


def _takes_k(retriever: object) -> bool:
    """Whether the retriever (or the retriever a runnable wraps) takes a per-call ``k``."""
    while retriever is not None:
        if isinstance(retriever, BM25Retriever):
            return True
        retriever = getattr(retriever, "bound", None)
    return False


def make_retrieve_node(
    policy: Policy, ctx: RunContext, options: RetrieverOptions | None = None
) -> Node:
    """Node ``retrieve``: call the retriever, retrying transient failures.

    A retrieval that finally fails is recorded in the event's note and counted in
    ``counts["retrieval_errors"]``; the run goes on without documents, and once
    ``max_failed_retrievals`` of its retrievals have failed, its later ones are not
    attempted (see ``RetrieverOptions``).
    """
    top_k = policy.config.retrieve_topk
    settings = options or RetrieverOptions()
    passes_k = _takes_k(ctx.retriever)
    abandoned = AbandonedCalls(settings.max_abandoned_calls)  # shared by the graph's runs
    give_up_after = settings.max_failed_retrievals

    def retrieve(state: AdaptiveRAGState) -> dict[str, Any]:
        query = state.get("query", "")
        failed_before = int(state.get("counts", {}).get("retrieval_errors", 0))
        errors = 0
        if not query.strip():  # a blank query (reference FLARE, DRAGIN): nothing to find
            found: list[Document] = []
            note = "blank query: nothing retrieved"
        elif give_up_after is not None and failed_before >= give_up_after:
            found, errors = [], 1
            note = (
                f"retriever not called: {give_up_after} retrievals of this question failed "
                f"already (RetrieverOptions.max_failed_retrievals={give_up_after})"
            )
        else:
            outcome = call_retriever(
                ctx.retriever, query, top_k, settings, passes_k=passes_k, abandoned=abandoned
            )
            found, note = outcome.documents, outcome.error
            errors = 1 if outcome.error else 0
        if not found and not note:
            note = "retriever returned no documents"
        docs = _to_docs(found, state.get("counts", {}).get("retrievals", 0) * top_k)
        get_stream_writer()(
            {"event": "retrieval", "query": query, "doc_ids": [d["id"] for d in docs], "note": note}
        )
        decision = dict(state.get("decision") or retrieval_decision(0, retrieve=True))
        decision["note"] = "; ".join(n for n in (str(decision.get("note", "")), note) if n)
        return {
            "docs": docs,
            "decision": decision,
            "counts": bump(state.get("counts"), retrievals=1, retrieval_errors=errors),
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
        decision = state.get("decision") or retrieval_decision(0, retrieve=True)
        event: RetrievalEvent = {
            "step": state.get("step", 0),
            "trigger_position": decision["trigger_position"],
            "trigger_word": decision["trigger_word"],
            "score": decision["score"],
            "threshold": decision["threshold"],
            "query": state.get("query", ""),
            "doc_ids": [d["id"] for d in retrieved],
            "doc_texts": [d["text"] for d in retrieved],
            "rerank_order": order,
            "note": decision["note"],
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
