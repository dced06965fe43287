"""LangGraph's chat conventions: ``messages`` in, an ``AIMessage`` out, a thread's memory."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs import create_adaptive_rag_graph
from langchain_adaptive_rag.graphs.adaptive_rag import AdaptiveRAGConfig
from langchain_adaptive_rag.graphs.fixed import create_no_retrieval_graph
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.testing import FakeTraceModel
from tests.helpers.scripted import RecordingRetriever

NO_SHOTS = QAPrompts(exemplars=(), followup_query="as_asked")  # scripts hold no rewrite
FIRST, SECOND, THIRD = "Who directed Blue Harbour?", "When was she born?", "Where?"
REPLIES = [
    " Anna Berg. So the answer is Anna Berg.",
    " So the answer is 1931.",
    " So the answer is Oslo.",
]


def _graph(model: FakeTraceModel, prompts: QAPrompts = NO_SHOTS, memory: bool = True):  # type: ignore[no-untyped-def]
    return create_no_retrieval_graph(
        model,
        RecordingRetriever(),
        prompts=prompts,
        checkpointer=InMemorySaver() if memory else None,
    )


def test_messages_in_an_ai_message_out() -> None:
    graph = _graph(FakeTraceModel(REPLIES[:1]), memory=False)
    result = graph.invoke({"messages": [("user", FIRST)]})
    question, reply = result["messages"]
    assert isinstance(question, HumanMessage) and question.content == FIRST
    assert isinstance(reply, AIMessage)
    assert reply.content == "Anna Berg. So the answer is Anna Berg."
    assert reply.additional_kwargs == {
        "answer": "Anna Berg",
        "sources": [],
        "retrieval_errors": 0,
        "retrieval_failures": [],
    }
    assert result["answer"] == "Anna Berg"  # the answer, text, retrievals, counts stay


def test_a_question_gets_its_turn_in_messages_too() -> None:
    result = _graph(FakeTraceModel(REPLIES[:1]), memory=False).invoke({"question": FIRST})
    assert [type(m).__name__ for m in result["messages"]] == ["HumanMessage", "AIMessage"]
    assert result["messages"][0].content == FIRST


@pytest.mark.parametrize("asked_as", ["messages", "question"])
def test_a_thread_remembers_its_turns(asked_as: str) -> None:
    model = FakeTraceModel(REPLIES[:2])
    graph = _graph(model)
    thread = {"configurable": {"thread_id": "chat"}}
    for question in (FIRST, SECOND):
        turn = (
            {"messages": [("user", question)]} if asked_as == "messages" else {"question": question}
        )
        result = graph.invoke(turn, thread)  # type: ignore[arg-type]
    assert model.prompts[0] == f"Question: {FIRST}\nAnswer:"
    assert model.prompts[1] == (
        f"Question: {FIRST}\nAnswer: Anna Berg. So the answer is Anna Berg.\n"
        f"Question: {SECOND}\nAnswer:"
    )
    assert result["answer"] == "1931" and len(result["messages"]) == 4
    assert result["retrievals"] == [] and result["counts"]["llm_calls"] == 1  # this run's


def test_the_memory_shows_the_last_history_turns() -> None:
    model = FakeTraceModel(REPLIES)
    graph = _graph(model, QAPrompts(exemplars=(), history_turns=1))
    thread = {"configurable": {"thread_id": "chat"}}
    for question in (FIRST, SECOND, THIRD):
        graph.invoke({"messages": [("user", question)]}, thread)  # type: ignore[arg-type]
    assert model.prompts[2] == (
        f"Question: {SECOND}\nAnswer: So the answer is 1931.\nQuestion: {THIRD}\nAnswer:"
    )
    with pytest.raises(AdaptiveRAGError, match="history_turns must be an integer >= 0"):
        QAPrompts(history_turns=-1)


def test_explicit_chat_history_comes_before_the_threads_turns() -> None:
    model = FakeTraceModel(REPLIES[:1])
    history = [HumanMessage("Q0?"), AIMessage("A0.")]
    _graph(model, memory=False).invoke({"messages": [("user", FIRST)], "chat_history": history})
    assert model.prompts[0] == f"Question: Q0?\nAnswer: A0.\nQuestion: {FIRST}\nAnswer:"


def test_the_graph_is_a_node_of_a_messages_state_app() -> None:
    app = StateGraph(MessagesState)
    app.add_node("rag", _graph(FakeTraceModel(REPLIES[:1]), memory=False))
    app.add_edge(START, "rag")
    result = app.compile().invoke({"messages": [HumanMessage(FIRST)]})
    assert [type(m).__name__ for m in result["messages"]] == ["HumanMessage", "AIMessage"]
    assert result["messages"][-1].additional_kwargs["answer"] == "Anna Berg"


def test_no_question_anywhere_is_explained() -> None:
    graph = _graph(FakeTraceModel([]), memory=False)
    with pytest.raises(AdaptiveRAGError, match=r'received question=None.*"messages": \[\("user"'):
        graph.invoke({"messages": [AIMessage("hello")]})


def _checkpointers(tmp_path: Path) -> list[object]:
    connection = sqlite3.connect(tmp_path / "threads.sqlite", check_same_thread=False)
    return [InMemorySaver(), SqliteSaver(connection)]


@pytest.mark.parametrize("saver", ["memory", "sqlite"])
@pytest.mark.parametrize("method", ["no_retrieval", "adaptive_rag"])
@pytest.mark.parametrize(
    ("bad", "then"),
    [
        ({"messages": [("user", "")]}, {"question": FIRST}),
        ({"messages": [("user", "  ")]}, {"messages": [("user", FIRST)]}),
        ({"question": ""}, {"messages": [("user", FIRST)]}),
        ({"question": 7}, {"question": FIRST}),
    ],
    ids=[
        "empty-message-then-question",
        "blank-message-then-message",
        "empty-q-then-message",
        "number-then-question",
    ],
)
def test_a_rejected_input_never_poisons_its_thread(
    saver: str, method: str, bad: dict[str, object], then: dict[str, object], tmp_path: Path
) -> None:
    memory, sqlite = _checkpointers(tmp_path)
    model = FakeTraceModel([REPLIES[0], REPLIES[1]])
    graph = create_adaptive_rag_graph(
        model,
        RecordingRetriever(),
        method,
        prompts=NO_SHOTS,
        config=AdaptiveRAGConfig(classifier="rule") if method == "adaptive_rag" else None,
        checkpointer=memory if saver == "memory" else sqlite,  # type: ignore[arg-type]
    )
    thread = {"configurable": {"thread_id": "chat"}}
    with pytest.raises(AdaptiveRAGError, match="received question="):
        graph.invoke(bad, thread)  # type: ignore[arg-type]
    first = graph.invoke(then, thread)  # type: ignore[arg-type]
    assert first["messages"][-1].content.endswith("So the answer is Anna Berg.")
    assert FIRST in model.prompts[-1]
    second = graph.invoke({"messages": [("user", SECOND)]}, thread)  # type: ignore[arg-type]
    assert second["answer"] == "1931"
    # a finished run's question is not answered again for an empty message
    with pytest.raises(AdaptiveRAGError, match="received question=''"):
        graph.invoke({"messages": [("user", "")]}, thread)  # type: ignore[arg-type]
