"""A follow-up's retrievals read it made to stand on its own (``QAPrompts.followup_query``)."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from langchain_adaptive_rag import create_adaptive_rag_graph
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.testing import FakeTraceModel
from tests.helpers.scripted import RecordingRetriever
from tests.helpers.served_chat import ServerLikeChatModel

FIRST, SECOND = "Who directed Blue Harbour?", "When was she born?"
FIRST_REPLY = " Anna Berg directed it. So the answer is Anna Berg.\n"
SECOND_REPLY = " She was born in 1931. So the answer is 1931.\n"
REWRITE = " When was Anna Berg born?\n"
THREAD = {"configurable": {"thread_id": "chat"}}


def _chat(model: Any, prompts: QAPrompts, method: str = "single_round") -> tuple[Any, Any]:
    retriever = RecordingRetriever()
    graph = create_adaptive_rag_graph(
        model, retriever, method, prompts=prompts, checkpointer=InMemorySaver()
    )
    return graph, retriever


def _two_turns(graph: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    graph.invoke({"messages": [("user", FIRST)]}, THREAD)
    events: list[dict[str, Any]] = []
    final: dict[str, Any] = {}
    for mode, chunk in graph.stream(
        {"messages": [("user", SECOND)]}, THREAD, stream_mode=["custom", "values"]
    ):
        if mode == "custom":
            events.append(chunk)
        else:
            final = chunk
    return final, events


def test_the_model_rewrites_a_follow_up_before_its_first_retrieval() -> None:
    model = FakeTraceModel([FIRST_REPLY, REWRITE, SECOND_REPLY])
    graph, retriever = _chat(model, QAPrompts(exemplars=()))
    result, events = _two_turns(graph)
    # the first turn has no history: asked as it is, without a rewrite
    assert retriever.queries == [FIRST, "When was Anna Berg born?"]
    rewrite_prompt = model.prompts[1]
    assert rewrite_prompt.startswith("Rewrite the last question")
    assert f"Question: {FIRST}\nAnswer: Anna Berg directed it." in rewrite_prompt
    assert rewrite_prompt.endswith(f"Last question: {SECOND}\nStandalone question:")
    # generation reads the question as asked, after the history
    assert model.prompts[2].endswith(f"Question: {SECOND}\nAnswer:")
    assert result["standalone_question"] == "When was Anna Berg born?"
    assert result["retrievals"][0]["query"] == "When was Anna Berg born?"
    followup = [e for e in events if e["event"] == "followup"]
    assert followup == [
        {
            "event": "followup",
            "question": SECOND,
            "standalone_question": "When was Anna Berg born?",
            "how": "rewrite",
            "note": "",
        }
    ]
    reply = result["messages"][-1]
    assert reply.additional_kwargs["standalone_question"] == "When was Anna Berg born?"
    assert result["counts"]["llm_calls"] == 2  # the rewrite is one of the run's calls


def test_concatenation_puts_the_last_turn_before_the_question() -> None:
    model = FakeTraceModel([FIRST_REPLY, SECOND_REPLY])
    graph, retriever = _chat(model, QAPrompts(exemplars=(), followup_query="concatenate"))
    result, _ = _two_turns(graph)
    expected = f"{FIRST} Anna Berg directed it. So the answer is Anna Berg. {SECOND}"
    assert retriever.queries[-1] == expected == result["standalone_question"]
    assert result["counts"]["llm_calls"] == 1  # no model call


def test_as_asked_retrieves_the_follow_up_word_for_word() -> None:
    model = FakeTraceModel([FIRST_REPLY, SECOND_REPLY])
    graph, retriever = _chat(model, QAPrompts(exemplars=(), followup_query="as_asked"))
    result, events = _two_turns(graph)
    assert retriever.queries[-1] == SECOND
    assert "standalone_question" not in result["messages"][-1].additional_kwargs
    assert [e["how"] for e in events if e["event"] == "followup"] == ["as_asked"]


def test_a_blank_rewrite_leaves_the_question_as_asked_and_says_so() -> None:
    model = FakeTraceModel([FIRST_REPLY, "\n", SECOND_REPLY])
    graph, retriever = _chat(model, QAPrompts(exemplars=()))
    _, events = _two_turns(graph)
    assert retriever.queries[-1] == SECOND
    (followup,) = [e for e in events if e["event"] == "followup"]
    assert followup["how"] == "as_asked" and "empty" in followup["note"]


def test_a_method_that_never_retrieves_makes_no_rewrite() -> None:
    model = FakeTraceModel([FIRST_REPLY, SECOND_REPLY])  # a rewrite would run out of script
    graph, retriever = _chat(model, QAPrompts(exemplars=()), method="no_retrieval")
    result, events = _two_turns(graph)
    assert retriever.queries == [] and result["answer"] == "1931"
    assert not [e for e in events if e["event"] == "followup"]


def test_the_rewrite_prompt_is_overridable() -> None:
    prompts = QAPrompts(
        exemplars=(), followup_template="{history}Q: {question}\nOn its own:", followup_max_tokens=8
    )
    model = FakeTraceModel([FIRST_REPLY, REWRITE, SECOND_REPLY])
    graph, _ = _chat(model, prompts)
    _two_turns(graph)
    assert model.prompts[1].endswith(f"Q: {SECOND}\nOn its own:")


def test_a_served_chat_model_rewrites_the_follow_up() -> None:
    chat = ServerLikeChatModel(replies=[FIRST_REPLY, REWRITE, SECOND_REPLY])
    graph, retriever = _chat(chat, QAPrompts(exemplars=()))
    result, _ = _two_turns(graph)
    assert retriever.queries[-1] == "When was Anna Berg born?"
    assert result["messages"][-1].usage_metadata["input_tokens"] > 0


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("followup_query", "rephrase", "followup_query must be one of"),
        ("followup_max_tokens", 0, "followup_max_tokens must be an integer from 1"),
        ("followup_max_tokens", 10**9, "followup_max_tokens must be an integer from 1"),
        ("followup_template", "Rewrite it:", "must contain the field {question}"),
    ],
)
def test_bad_follow_up_settings_are_named(field: str, value: object, expected: str) -> None:
    with pytest.raises(AdaptiveRAGError, match=expected.replace("{", r"\{").replace("}", r"\}")):
        QAPrompts(**{field: value})  # type: ignore[arg-type]


def test_the_record_and_the_report_show_what_retrieval_read() -> None:
    pytest.importorskip("matplotlib")
    from langchain_adaptive_rag.visualize import RunRecord, record_run, report_html

    model = FakeTraceModel([FIRST_REPLY, REWRITE, SECOND_REPLY])
    graph, _ = _chat(model, QAPrompts(exemplars=()))
    graph.invoke({"messages": [("user", FIRST)]}, THREAD)
    record = record_run(graph, SECOND, config=THREAD)
    assert record.standalone_question == "When was Anna Berg born?"
    assert RunRecord.from_json(record.to_json()).standalone_question == record.standalone_question
    page = report_html([record], title="chat")
    assert "its retrievals read it as: <q>When was Anna Berg born?</q>" in page


def test_the_rewrite_streams_from_formulate_query_apart_from_the_reply() -> None:
    from langchain_core.messages import AIMessageChunk

    model = FakeTraceModel([FIRST_REPLY, REWRITE, SECOND_REPLY])
    graph, _ = _chat(model, QAPrompts(exemplars=()))
    graph.invoke({"messages": [("user", FIRST)]}, THREAD)
    by_node: dict[str, str] = {}
    for item, metadata in graph.stream(
        {"messages": [("user", SECOND)]}, THREAD, stream_mode="messages"
    ):
        if isinstance(item, AIMessageChunk):
            node = metadata["langgraph_node"]
            by_node[node] = by_node.get(node, "") + str(item.content)
    assert by_node["formulate_query"].strip() == "When was Anna Berg born?"
    reply = by_node["continue_generation"]  # the answer's tokens, without the rewrite's
    assert "born in 1931" in reply and "When was Anna Berg born?" not in reply
