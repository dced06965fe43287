"""The tool-calling agent (``create_agent`` with the retriever as its tool) on scripted models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation import Example
from langchain_adaptive_rag.evaluation.runner import evaluate_method
from langchain_adaptive_rag.graphs import create_adaptive_rag_graph
from langchain_adaptive_rag.graphs.tool_agent import ANSWER_NOW, ToolAgent, ToolAgentConfig
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.retrievers import create_bm25_retriever
from langchain_adaptive_rag.served import ServedModel
from langchain_adaptive_rag.testing import FakeTraceModel
from langchain_adaptive_rag.visualize import record_run
from tests.helpers.agent_model import OpenAIStyleAgentModel, ScriptedAgentModel, call, reply
from tests.helpers.scripted import RecordingRetriever

QUESTION = "When was the director of Blue Harbour born?"
PASSAGES = [
    "Blue Harbour is a 1962 film directed by Anna Berg.",
    "Anna Berg (born 1931) is a Swedish film director.",
    "Carl Lind was born in Oslo in 1902.",
]


def stream(graph: Any, **options: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    result: dict[str, Any] = {}
    for mode, chunk in graph.stream(
        {"question": QUESTION}, stream_mode=["custom", "values"], **options
    ):
        if mode == "custom":
            events.append(chunk)
        else:
            result = chunk
    return result, events


def test_the_agent_searches_then_answers_and_is_counted() -> None:
    model = ScriptedAgentModel(
        replies=[call("Blue Harbour director"), call("Anna Berg born", 2), reply("1931", 4)]
    )
    graph = create_adaptive_rag_graph(model, create_bm25_retriever(PASSAGES), "tool_agent")
    result, events = stream(graph)
    assert result["answer"] == "1931" and result["text"] == "1931"
    assert [e["query"] for e in result["retrievals"]] == ["Blue Harbour director", "Anna Berg born"]
    assert result["retrievals"][0]["doc_ids"][0] == "doc-0"
    counts = result["counts"]
    assert (counts["retrievals"], counts["llm_calls"], counts["generated_tokens"]) == (2, 3, 4)
    assert [(e["event"], e.get("trigger_word")) for e in events if e["event"] == "decision"] == [
        ("decision", "Blue Harbour director"),
        ("decision", "Anna Berg born"),
        ("decision", None),
    ]
    first = next(e for e in events if e["event"] == "decision")
    assert first["note"] == "I look up Blue Harbour director."  # the text that led to it
    assert model.tools == ["search"]
    system, asked = model.seen[0][:2]
    assert isinstance(system, SystemMessage) and isinstance(asked, HumanMessage)
    assert asked.text == QUESTION
    tool_reply = model.seen[1][-1]
    assert isinstance(tool_reply, ToolMessage)
    assert tool_reply.text.startswith("[1] Blue Harbour is a 1962 film directed by Anna Berg.")
    reply_message = result["messages"][-1]
    assert reply_message.additional_kwargs["answer"] == "1931"
    assert [s["id"] for s in reply_message.additional_kwargs["sources"]][:1] == ["doc-0"]


def test_the_search_limit_refuses_a_further_call_and_the_model_goes_on() -> None:
    model = ScriptedAgentModel(
        replies=[call("Anna Berg"), call("Anna Berg born", 2), reply("1931")]
    )
    config = ToolAgentConfig(max_searches=1)
    graph = create_adaptive_rag_graph(
        model, create_bm25_retriever(PASSAGES), "tool_agent", config=config
    )
    result = graph.invoke({"question": QUESTION})
    assert result["counts"]["retrievals"] == 1 and result["answer"] == "1931"
    refused = model.seen[2][-1]
    assert isinstance(refused, ToolMessage) and "Tool call limit exceeded" in refused.text


def test_the_model_call_limit_ends_with_a_forced_answer() -> None:
    model = ScriptedAgentModel(
        replies=[call("Blue Harbour"), call("Anna Berg", 2), reply("So the answer is 1931.")]
    )
    config = ToolAgentConfig(max_rounds=2)
    graph = create_adaptive_rag_graph(
        model, create_bm25_retriever(PASSAGES), "tool_agent", config=config
    )
    result = graph.invoke({"question": QUESTION})
    assert result["counts"]["llm_calls"] == 3 and result["counts"]["retrievals"] == 2
    forced = model.seen[2]
    assert isinstance(forced[0], SystemMessage) and forced[-1].text == ANSWER_NOW
    assert isinstance(forced[-2], ToolMessage)  # the limit's notice is not shown
    assert result["answer"] == "1931"


def test_a_searchers_reply_without_its_answer_is_asked_for_one_in_its_protocols_form() -> None:
    model = ScriptedAgentModel(
        replies=[
            call("Blue Harbour"),
            reply("Anna Berg directed it."),
            reply("<answer> 1931 </answer>"),
        ]
    )
    config = ToolAgentConfig(tool_format="search_r1")
    graph = create_adaptive_rag_graph(
        model, create_bm25_retriever(PASSAGES), "tool_agent", config=config
    )
    result = graph.invoke({"question": QUESTION})
    assert result["counts"]["llm_calls"] == 3 and result["answer"] == "1931"
    forced = model.seen[2]  # no "answer now" message: the format writes the answer's tag
    assert forced[-1].text == "Anna Berg directed it." and forced[-1].type == "ai"


def test_openai_style_models_get_the_token_budget_and_greedy_decoding() -> None:
    model = OpenAIStyleAgentModel(replies=[reply("1931")])
    config = ToolAgentConfig(generate_max_length=33)
    graph = create_adaptive_rag_graph(
        model, create_bm25_retriever(PASSAGES), "tool_agent", config=config
    )
    assert graph.invoke({"question": QUESTION})["answer"] == "1931"
    assert model.settings[0]["max_tokens"] == 33
    assert model.settings[0]["temperature"] == 0.0  # a server's default samples


def test_a_run_takes_its_own_settings_from_the_context() -> None:
    model = ScriptedAgentModel(replies=[call("Anna Berg"), reply("1931")])
    graph = create_adaptive_rag_graph(model, create_bm25_retriever(PASSAGES), "tool_agent")
    result = graph.invoke({"question": QUESTION}, context={"retrieve_topk": 1})
    assert len(result["retrievals"][0]["doc_ids"]) == 1


@pytest.mark.parametrize(
    "model", [FakeTraceModel([]), ServedModel(GenericFakeChatModel(messages=iter([])))]
)
def test_a_model_that_calls_no_tools_is_refused(model: Any) -> None:
    with pytest.raises(AdaptiveRAGError, match=r"needs a .*chat model that calls tools"):
        create_adaptive_rag_graph(model, create_bm25_retriever(PASSAGES), "tool_agent")


def test_the_answer_is_read_after_the_marker_or_as_yes_no() -> None:
    assert ToolAgent.answer(QAPrompts(), "She was born then. So the answer is 1931.") == "1931"
    assert ToolAgent.answer(QAPrompts(), " 1931 ") == "1931"
    assert ToolAgent.answer(QAPrompts(answer_kind="yes_no"), "Yes, it is.") == "yes"


def test_bad_settings_are_named() -> None:
    with pytest.raises(AdaptiveRAGError, match="tool_name must be a tool name"):
        ToolAgentConfig(tool_name="my tool")
    with pytest.raises(AdaptiveRAGError, match="max_searches must be >= 0"):
        ToolAgentConfig(max_searches=-1)


def test_the_harness_runs_it_and_writes_as_it_goes(tmp_path: Path) -> None:
    examples = [
        Example(id="q1", question=QUESTION, answers=("1931",), dataset="hotpotqa"),
        Example(
            id="q2", question="Where was Carl Lind born?", answers=("Oslo",), dataset="hotpotqa"
        ),
    ]
    model = ScriptedAgentModel(replies=[call("Anna Berg"), reply("1931"), reply("Bergen")])
    report = evaluate_method(
        model,  # type: ignore[arg-type]
        create_bm25_retriever(PASSAGES),
        "tool_agent",
        examples,
        tmp_path / "run",
        progress=False,
    )
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").open()]
    assert report.new == 2 and [row["metrics"]["em"] for row in rows] == [1.0, 0.0]
    assert rows[0]["counts"]["retrievals"] == 1 and rows[0]["counts"]["llm_calls"] == 2


def test_a_run_is_recorded_and_reported_search_by_search() -> None:
    model = ScriptedAgentModel(replies=[call("Blue Harbour director"), reply("1931")])
    graph = create_adaptive_rag_graph(model, create_bm25_retriever(PASSAGES), "tool_agent")
    record = record_run(graph, QUESTION)
    searched, answered = record.rounds
    assert searched.retrieval is not None and searched.retrieval.query == "Blue Harbour director"
    assert searched.decision is not None and searched.decision.route == "formulate_query"
    assert answered.accepted == "1931" and record.answer == "1931"
    pytest.importorskip("matplotlib")
    from langchain_adaptive_rag.visualize import report_html

    page = report_html([record], title="tool agent", graphs={"tool_agent": graph})
    assert "Blue Harbour director" in page and "Tool agent" in page


def test_a_dead_retriever_is_recorded_and_given_up_on_as_every_method_does() -> None:
    model = ScriptedAgentModel(
        replies=[call("a"), call("b", 2), call("c", 3), reply("I could not find it.")]
    )
    graph = create_adaptive_rag_graph(model, RecordingRetriever(fail=True), "tool_agent")
    result = graph.invoke({"question": QUESTION})
    notes = [event["note"] for event in result["retrievals"]]
    assert result["counts"]["retrieval_errors"] == 3 and len(notes) == 3
    assert notes[0].startswith("retriever raised") and notes[2].startswith("retriever not called")
    assert result["messages"][-1].additional_kwargs["retrieval_errors"] == 3
