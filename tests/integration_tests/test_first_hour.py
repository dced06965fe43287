"""An app builder's first hour on the toy world: a chat with a follow-up, an agent calling
the graph as a tool, a failing retriever that the reply reports, and the pictures of one
DRAGIN run naming the trigger and score its decision names."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langgraph.checkpoint.memory import InMemorySaver

from langchain_adaptive_rag import ChatTransformers, create_adaptive_rag_graph
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.toyworld import TOY_PROMPTS, load_toy_model, toy_config, toy_retriever

FIRST = "Who directed the film Silent Island?"
DIRECTOR_PASSAGE = "person-0035"  # Stig Lund, born in 1927 in Uppsala


@pytest.fixture(scope="module")
def llm() -> ChatTransformers:
    return load_toy_model()


@pytest.fixture(scope="module")
def retriever() -> BaseRetriever:
    return toy_retriever()


class PromptsSeen(BaseCallbackHandler):
    """Records the prompt of every generation the graph announces."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.prompts.extend(str(batch[-1].content) for batch in messages)


def _chat(llm: ChatTransformers, retriever: BaseRetriever, prompts: QAPrompts) -> Any:
    return create_adaptive_rag_graph(
        llm,
        retriever,
        "single_round",
        config=toy_config("single_round"),
        prompts=prompts,
        checkpointer=InMemorySaver(),
    )


@pytest.mark.parametrize(
    ("follow_up", "passage"),
    [("When was he born?", DIRECTOR_PASSAGE), ("When was that film released?", "film-0035")],
)
def test_a_follow_up_retrieves_the_entity_of_the_turn_before(
    llm: ChatTransformers, retriever: BaseRetriever, follow_up: str, passage: str
) -> None:
    graph = _chat(llm, retriever, TOY_PROMPTS)
    thread: dict[str, Any] = {"configurable": {"thread_id": "first-hour"}}
    first = graph.invoke({"messages": [("user", FIRST)]}, thread)
    assert first["answer"] == "Stig Lund"
    seen = PromptsSeen()
    reply = graph.invoke({"messages": [("user", follow_up)]}, {**thread, "callbacks": [seen]})
    (retrieval,) = reply["retrievals"]
    assert passage in retrieval["doc_ids"]
    assert retrieval["query"] == reply["standalone_question"]
    assert FIRST in reply["standalone_question"] and follow_up in reply["standalone_question"]
    # the reply's usage sums the run's calls, each prompt as the tokenizer counts it
    read = sum(len(llm.hf_tokenizer(p)["input_ids"]) for p in seen.prompts)
    usage = reply["messages"][-1].usage_metadata
    assert seen.prompts and usage["input_tokens"] == read == reply["counts"]["prompt_tokens"]
    assert usage["output_tokens"] == reply["counts"]["generated_tokens"] > 0


def test_without_the_history_the_follow_up_retrieves_someone_else(
    llm: ChatTransformers, retriever: BaseRetriever
) -> None:
    as_asked = QAPrompts(exemplars=(), forced_answer=" So the answer is", followup_query="as_asked")
    graph = _chat(llm, retriever, as_asked)
    thread: dict[str, Any] = {"configurable": {"thread_id": "word-for-word"}}
    graph.invoke({"messages": [("user", FIRST)]}, thread)
    reply = graph.invoke({"messages": [("user", "When was he born?")]}, thread)
    assert reply["retrievals"][0]["query"] == "When was he born?"
    assert DIRECTOR_PASSAGE not in reply["retrievals"][0]["doc_ids"]


def test_an_agent_calls_the_graph_as_its_tool(
    llm: ChatTransformers, retriever: BaseRetriever
) -> None:
    from langchain.agents import create_agent

    from langchain_adaptive_rag.testing import ScriptedToolCaller

    graph = create_adaptive_rag_graph(
        llm, retriever, "dragin", config=toy_config("dragin"), prompts=TOY_PROMPTS
    )
    agent = create_agent(ScriptedToolCaller(), [graph.as_tool(name="wiki_qa")])
    result = agent.invoke(
        {"messages": [("user", "When was the director of the film Lost Summit born?")]}
    )
    tool_message = result["messages"][2]
    assert tool_message.type == "tool" and tool_message.content.startswith("Answer: 1956")
    assert tool_message.artifact["counts"]["retrievals"] >= 1
    assert result["messages"][-1].content == "Answer: 1956"


class BrokenRetriever(BaseRetriever):
    """A retriever with a bug in its own code."""

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        raise AttributeError("'NoneType' object has no attribute 'search'")


def test_a_failing_retriever_is_reported_by_the_reply(
    llm: ChatTransformers, caplog: pytest.LogCaptureFixture
) -> None:
    graph = create_adaptive_rag_graph(
        llm,
        BrokenRetriever(),
        "single_round",
        config=toy_config("single_round"),
        prompts=TOY_PROMPTS,
    )
    with caplog.at_level(logging.WARNING, logger="langchain_adaptive_rag"):
        reply = graph.invoke({"messages": [("user", FIRST)]})
    extra = reply["messages"][-1].additional_kwargs
    assert extra["retrieval_errors"] == 1 == reply["counts"]["retrieval_errors"]
    (failure,) = extra["retrieval_failures"]
    assert "AttributeError" in failure
    assert any("AttributeError" in r.getMessage() for r in caplog.records)


def test_the_pictures_of_a_dragin_run_name_its_decision(
    llm: ChatTransformers, retriever: BaseRetriever
) -> None:
    from langchain_adaptive_rag.visualize import record_run, report_html, tokens_figure, tokens_html
    from langchain_adaptive_rag.visualize._style import trigger_tokens

    graph = create_adaptive_rag_graph(
        llm, retriever, "dragin", config=toy_config("dragin"), prompts=TOY_PROMPTS
    )
    record = record_run(graph, "When was the director of the film Silent Island born?")
    fired = [e for e in record.events if e["event"] == "decision" and e["retrieve"]]
    assert fired, "the toy DRAGIN run retrieves"
    event = fired[0]
    round_ = next(r for r in record.rounds if r.decision is not None and r.decision.retrieves)
    decision = round_.decision
    assert decision is not None
    assert (event["trigger_word"], event["score"]) == (decision.trigger_word, decision.score)
    assert decision.trigger_word and decision.trigger_word == decision.trigger_word.strip(".,;:")
    theta = decision.threshold
    assert theta is not None and decision.score is not None and decision.score > theta
    # the trigger's own RIND; the heat-map outlines the triggering sentence's words over theta
    assert round_.tokens[decision.trigger_position].rind == pytest.approx(decision.score)
    outlined = trigger_tokens(round_)
    assert decision.trigger_position in outlined
    assert all(
        round_.tokens[i].rind is not None and round_.tokens[i].rind > theta for i in outlined
    )
    said = f"<code>{decision.trigger_word}</code>; RIND s(w) = {decision.score:.3f} &gt;"
    assert said in tokens_html(record, "rind") and said in report_html([record], title="t")
    figure = tokens_figure(record, "rind")
    texts = " ".join(t.get_text() for t in figure.texts)
    assert "Rule: DRAGIN" in texts
