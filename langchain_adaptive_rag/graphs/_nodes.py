"""Node factories: each returns a plain function from state to a partial update."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.ai import UsageMetadata
from langgraph.config import get_stream_writer
from langgraph.types import Overwrite

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs.call_config import call_overrides
from langchain_adaptive_rag.graphs.followup import standalone_question
from langchain_adaptive_rag.graphs.policy import (
    Policy,
    RunContext,
    bump,
    model_call,
    retrieval_decision,
)
from langchain_adaptive_rag.prompts import QAPrompts, recent_turns
from langchain_adaptive_rag.retrieving import QuestionRetriever, RetrieverOptions
from langchain_adaptive_rag.state import (
    AdaptiveRAGState,
    Counts,
    RetrievalEvent,
    RetrievedDoc,
    plain_data,
)

__all__ = [
    "Node",
    "for_this_call",
    "make_continue_generation_node",
    "make_draft_node",
    "make_finalize_node",
    "make_formulate_query_node",
    "make_rerank_node",
    "make_retrieve_node",
    "make_score_need_node",
    "retrieved_docs",
    "run_usage",
    "sources",
    "start_of_run",
    "turn_messages",
]

Node = Callable[[AdaptiveRAGState], dict[str, Any]]
"""A graph node: state in, partial update out."""

_LOG = logging.getLogger(__name__)


def start_of_run(state: AdaptiveRAGState, prompts: QAPrompts) -> dict[str, Any]:
    """This run's question and the earlier turns it shows, checked.

    The question is the last message when that is a human message, else ``question``
    (which a finished run clears, so a thread never answers an old one again). A last
    human message that was rejected (empty, not text) stays in the thread unanswered; a
    later ``question`` input passes over it, so one bad input never breaks a thread. The
    history is ``chat_history`` followed by the thread's earlier messages, cut to the
    last ``prompts.history_turns`` turns.

    Raises:
        AdaptiveRAGError: No question, one that is not text, or a history that is not a
            list of LangChain messages.
    """
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
    messages: list[BaseMessage] = list(state.get("messages") or [])
    given = state.get("question")
    candidates: list[tuple[object, list[BaseMessage]]] = []
    if messages and isinstance(messages[-1], HumanMessage):
        candidates.append((str(messages[-1].text), messages[:-1]))
    if given is not None and given != "":
        # a question given as such: after a finished run (which clears it), or after a
        # rejected message that the thread keeps unanswered (which it then passes over)
        earlier = messages[:-1] if candidates else messages
        candidates.append((given, earlier))
    for question, earlier in candidates:
        if _question_problem(question) is None:
            shown = recent_turns([*(history or []), *earlier], prompts.history_turns)
            return {"question": question, "history": shown}
    first = candidates[0][0] if candidates else given
    raise AdaptiveRAGError(_question_problem(first) or "no question")


def _question_problem(question: object) -> str | None:
    """What is wrong with ``question`` (``None``: a non-empty string of encodable text)."""
    if not isinstance(question, str) or not question.strip():
        return (
            f"The graph received question={question!r}. Expected a non-empty string: "
            'graph.invoke({"question": "..."}) or graph.invoke({"messages": [("user", '
            '"...")]}).'
        )
    try:
        question.encode("utf-8")
    except UnicodeEncodeError as error:
        return (
            f"The graph received a question with a character that is not text: "
            f"{question[error.start : error.end]!r} at position {error.start} (a lone "
            "surrogate, e.g. from text decoded with errors='surrogateescape'). Expected "
            "valid Unicode text. Fix: decode the source as UTF-8, or drop the character."
        )
    return None


def _fresh_run(policy: Policy) -> dict[str, Any]:
    """Values of the per-run channels at a run's start: shared, then the method's own."""
    return {
        "answer": "",
        "text": "",
        "retrievals": Overwrite([]),
        "counts": bump(None),
        "draft": "",
        "draft_tokens": [],
        "draft_logprobs": [],
        "draft_entropies": [],
        "decision": retrieval_decision(0, retrieve=False),
        "query_inputs": {},
        "query": "",
        "docs": [],
        "rerank_order": None,
        "last_accepted": "",
        "answer_tokens": 0,
        "step": 0,
        "finished": False,
        "route": "",
        **policy.fresh_channels(),
    }


def for_this_call(policy: Policy, ctx: RunContext) -> Policy:
    """The policy with this run's per-call settings (``context`` or ``configurable``).

    Raises:
        AdaptiveRAGError: An unknown field or a bad value, named as a bad config is.
    """
    overrides = call_overrides(policy.config, enclosing_fields=ctx.enclosing_fields)
    if not overrides:
        return policy
    chosen = policy.with_config(replace(policy.config, **overrides))  # type: ignore[arg-type]
    if chosen is not policy:
        chosen.check_model(ctx.model)
    return chosen


def make_draft_node(policy: Policy, ctx: RunContext) -> Node:
    """Node ``draft``: the policy's look-ahead generation."""

    def draft(state: AdaptiveRAGState) -> dict[str, Any]:
        method = for_this_call(policy, ctx)
        if "counts" in state and not state.get("finished"):  # a later round of this run
            return method.draft(ctx, state)
        # a new run: its question; on a thread whose run finished, a clean slate too
        start = start_of_run(state, ctx.prompts)
        reset = _fresh_run(method) if state.get("finished") else {}
        start["standalone_question"] = ""  # made at the first retrieval of a follow-up
        fresh: AdaptiveRAGState = {**state, **reset, **start}  # type: ignore[typeddict-item]
        if reset:
            fresh["retrievals"] = []
        return {**reset, **start, **method.draft(ctx, fresh)}

    return draft


def make_score_need_node(policy: Policy, ctx: RunContext) -> Node:
    """Node ``score_need``: accept text and decide whether to retrieve."""

    def score_need(state: AdaptiveRAGState) -> dict[str, Any]:
        method = for_this_call(policy, ctx)
        update = method.score_need(ctx, state)
        decision = update.get("decision")
        if isinstance(decision, dict):
            if decision.get("threshold") is not None:  # what the threshold applies to
                signal, direction = method.threshold_reading()
                decision = {**decision, "signal": signal, "direction": direction}
                update["decision"] = decision
            get_stream_writer()({"event": "decision", **decision})
        return update

    return score_need


def make_formulate_query_node(policy: Policy, ctx: RunContext) -> Node:
    """Node ``formulate_query``: the retrieval query."""

    def formulate_query(state: AdaptiveRAGState) -> dict[str, Any]:
        update = _followup_standalone(ctx, state)
        asked: AdaptiveRAGState = {**state, **update}  # type: ignore[typeddict-item]
        return {**update, "query": for_this_call(policy, ctx).formulate_query(ctx, asked)}

    return formulate_query


def _followup_standalone(ctx: RunContext, state: AdaptiveRAGState) -> dict[str, Any]:
    """At a follow-up's first retrieval: its question made to stand on its own.

    A run without earlier turns, or one that has made it already, changes nothing. The
    rewrite (when ``QAPrompts.followup_query`` asks for one) counts as one of the run's
    model calls, and a ``followup`` custom event says what retrieval reads.
    """
    history = state.get("history") or []
    if not history or state.get("standalone_question"):
        return {}
    question = state["question"]
    standalone = standalone_question(ctx.model, ctx.prompts, question, history)
    update: dict[str, Any] = {"standalone_question": standalone.text}
    if standalone.trace is not None:
        update["counts"] = bump(state.get("counts"), **model_call(standalone.trace))
    get_stream_writer()(
        {
            "event": "followup",
            "question": question,
            "standalone_question": standalone.text,
            "how": standalone.how,
            "note": standalone.note,
        }
    )
    return update


def _doc_id(document: Document, fallback: str) -> str:
    """A document's ``id``, else its ``metadata["id"]``, else ``fallback``."""
    if document.id is not None:
        return str(document.id)
    return str(document.metadata.get("id", fallback))


def retrieved_docs(documents: list[Document], offset: int) -> list[RetrievedDoc]:
    """Retrieved documents as state keeps them; one without an id is ``result-<offset+i>``."""
    return [
        {
            "id": _doc_id(d, f"result-{offset + i}"),
            "text": d.page_content,
            "metadata": plain_data(d.metadata),
        }
        for i, d in enumerate(documents)
    ]


def make_retrieve_node(
    policy: Policy, ctx: RunContext, options: RetrieverOptions | None = None
) -> Node:
    """Node ``retrieve``: call the retriever, retrying transient failures.

    A retrieval that finally fails is recorded in the event's note and counted in
    ``counts["retrieval_errors"]``; the run goes on without documents, and once
    ``max_failed_retrievals`` of its retrievals have failed, its later ones are not
    attempted (see [`RetrieverOptions`][]).
    """
    retriever = QuestionRetriever(ctx.retriever, options or RetrieverOptions())

    def retrieve(state: AdaptiveRAGState) -> dict[str, Any]:
        top_k = for_this_call(policy, ctx).config.retrieve_topk
        query = state.get("query", "")
        failed_before = int(state.get("counts", {}).get("retrieval_errors", 0))
        found = retriever.retrieve(query, top_k, failed_before)
        note, errors = found.note, int(found.failed)
        if errors:
            _LOG.warning(
                "%s: retrieval %d failed for query %r: %s (the run goes on without its "
                "documents; RetrieverOptions(on_failure='raise') fails the run instead)",
                policy.name,
                int(state.get("counts", {}).get("retrievals", 0)) + 1,
                query,
                note,
            )
        offset = state.get("counts", {}).get("retrievals", 0) * top_k
        docs = retrieved_docs(found.documents, offset)
        get_stream_writer()(
            {
                "event": "retrieval",
                "query": query,
                "doc_ids": [d["id"] for d in docs],
                "doc_texts": [d["text"] for d in docs],
                "doc_metadata": [dict(d["metadata"]) for d in docs],
                "note": note,
            }
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
        update = for_this_call(policy, ctx).rerank(ctx, state)
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
            "doc_metadata": [dict(d.get("metadata", {})) for d in retrieved],
            "rerank_order": order,
            "note": decision["note"],
        }
        return {**update, "retrievals": [event]}

    return rerank


def make_continue_generation_node(policy: Policy, ctx: RunContext) -> Node:
    """Node ``continue_generation``: generate with the documents."""

    def continue_generation(state: AdaptiveRAGState) -> dict[str, Any]:
        return for_this_call(policy, ctx).continue_generation(ctx, state)

    return continue_generation


def sources(state: AdaptiveRAGState) -> list[dict[str, Any]]:
    """The documents this run's answer read, once each, in the order they came.

    Every retrieval's documents, or the ones its re-ranker kept; each as ``id``,
    ``text`` and ``metadata`` (``title``, ``source``, ``url``...), for citations.
    """
    found: dict[str, dict[str, Any]] = {}
    for event in state.get("retrievals") or []:
        order = event.get("rerank_order")
        metadata = event.get("doc_metadata") or [{} for _ in event["doc_ids"]]
        ranks = range(len(event["doc_ids"])) if order is None else order
        for rank in ranks:
            doc_id = event["doc_ids"][rank]
            found.setdefault(
                doc_id,
                {"id": doc_id, "text": event["doc_texts"][rank], "metadata": metadata[rank]},
            )
    return list(found.values())


_FAILURE_NOTES = ("retriever raised", "retriever not called")
"""How the notes of failed retrievals begin (``call_retriever``'s errors)."""


def run_usage(counts: Counts) -> UsageMetadata:
    """A run's token usage, summed over its model calls, as LangChain reports a call's.

    Args:
        counts: The run's counts (``prompt_tokens`` and ``generated_tokens``).

    Returns:
        ``input_tokens`` (every call's prompt; ``0`` for a served model that reports
        none), ``output_tokens`` (every generated token, all samples) and their total.
    """
    read = int(counts.get("prompt_tokens", 0))
    written = int(counts.get("generated_tokens", 0))
    return UsageMetadata(input_tokens=read, output_tokens=written, total_tokens=read + written)


def turn_messages(state: AdaptiveRAGState) -> list[BaseMessage]:
    """This run's turn for ``messages``.

    The answer as an ``AIMessage``, after the question as a ``HumanMessage`` when it was
    not asked as the last message.
    """
    question = state.get("question", "")
    failures = [
        str(event.get("note", ""))
        for event in state.get("retrievals") or []
        if str(event.get("note", "")).startswith(_FAILURE_NOTES)
    ]
    counts = state.get("counts") or bump(None)
    extra: dict[str, Any] = {
        "answer": str(state.get("answer", "")),
        "sources": sources(state),
        "retrieval_errors": int(counts.get("retrieval_errors", 0)),
        "retrieval_failures": failures,
    }
    standalone = state.get("standalone_question", "")
    if standalone and standalone != question:
        extra["standalone_question"] = standalone
    reply = AIMessage(
        content=str(state.get("text", "")).strip(),
        additional_kwargs=extra,
        usage_metadata=run_usage(counts),
    )
    messages = state.get("messages") or []
    asked = bool(messages) and isinstance(messages[-1], HumanMessage)
    if asked and messages[-1].text == question:
        return [reply]
    return [HumanMessage(question), reply]


def make_finalize_node(policy: Policy, ctx: RunContext) -> Node:
    """Node ``finalize``: the short answer, appended to ``messages`` as an ``AIMessage``."""

    def finalize(state: AdaptiveRAGState) -> dict[str, Any]:
        update = for_this_call(policy, ctx).finalize(ctx, state)
        final: AdaptiveRAGState = {**state, **update}  # type: ignore[typeddict-item]
        reply = turn_messages(final)
        return {**update, "messages": reply, "finished": True, "question": ""}  # answered

    return finalize
