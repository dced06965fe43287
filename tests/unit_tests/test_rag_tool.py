"""The graph as an agent's tool: its schema, what it returns, and an agent that calls it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests
from langgraph.errors import GraphRecursionError
from langgraph.prebuilt import create_react_agent

from langchain_adaptive_rag.graphs.fixed import (
    FixLengthConfig,
    create_fix_length_graph,
    create_single_round_graph,
)
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.testing import FakeTraceModel
from tests.helpers.catalogue import ANSWER, CatalogueRetriever
from tests.helpers.scripted import QUESTION


def _graph(replies: int = 2) -> Any:
    return create_single_round_graph(
        FakeTraceModel([ANSWER] * replies), CatalogueRetriever(), prompts=QAPrompts(exemplars=())
    )


class ToolCallingModel(BaseChatModel):
    """Calls the tool with the user's question, then answers with what it returned."""

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-caller"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ToolCallingModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            reply = AIMessage(f"From the sources: {str(last.content).splitlines()[0]}")
        else:
            call = {"name": "wiki_qa", "args": {"question": last.text}, "id": "call-1"}
            reply = AIMessage("", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


def test_the_tool_takes_the_question_and_names_its_sources() -> None:
    tool = _graph().as_tool(name="wiki_qa", description="Answers from Wikipedia.")
    assert tool.name == "wiki_qa" and tool.description == "Answers from Wikipedia."
    schema = tool.tool_call_schema.model_json_schema()
    assert schema["required"] == ["question"] and list(schema["properties"]) == ["question"]
    message = tool.invoke(
        {"type": "tool_call", "name": "wiki_qa", "id": "c1", "args": {"question": QUESTION}}
    )
    assert message.content.splitlines() == [
        "Answer: 1931",
        "",
        "Sources:",
        "[1] Anna Berg (https://en.wikipedia.org/wiki/Anna_Berg): Anna Berg (born 1931) is a "
        "Swedish film director.",
        "[2] wiki-3: Blue Harbour is a 1962 film.",
    ]
    assert message.artifact["answer"] == "1931"
    assert message.artifact["counts"]["retrievals"] == 1
    assert message.artifact["sources"][0]["metadata"]["title"] == "Anna Berg"


def test_a_langchain_v1_agent_calls_the_tool_and_answers_from_it() -> None:
    agent = create_agent(ToolCallingModel(), [_graph().as_tool(name="wiki_qa")])
    result = agent.invoke({"messages": [("user", QUESTION)]})
    tool_message = result["messages"][2]
    assert isinstance(tool_message, ToolMessage) and tool_message.name == "wiki_qa"
    assert tool_message.artifact["answer"] == "1931"
    assert result["messages"][-1].content == "From the sources: Answer: 1931"


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
def test_langgraphs_older_prebuilt_agent_calls_it_too() -> None:
    agent = create_react_agent(ToolCallingModel(), [_graph().as_tool(name="wiki_qa")])
    result = agent.invoke({"messages": [("user", QUESTION)]})
    assert result["messages"][-1].content == "From the sources: Answer: 1931"


class _RagToolParams:
    """The graph's tool as LangChain's standard tool suites build it."""

    @property
    def tool_constructor(self) -> BaseTool:
        return cast(BaseTool, _graph().as_tool(name="wiki_qa"))

    @property
    def tool_constructor_params(self) -> dict[str, Any]:
        return {}

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"question": QUESTION}


class TestRagToolStandard(_RagToolParams, ToolsUnitTests):
    """LangChain's tool unit suite."""


class TestRagToolStandardIntegration(_RagToolParams, ToolsIntegrationTests):
    """LangChain's tool integration suite (invoked as an agent's tool call)."""


def test_a_long_run_in_a_batch_or_a_tool_is_not_cut_at_25_steps() -> None:
    # fix_length with 1-token chunks: about 40 steps, over LangChain's batch default of 25
    words = [f" w{i}" for i in range(8)] + [" So", " the", " answer", " is", " 1931."]

    def graph() -> Any:
        return create_fix_length_graph(
            FakeTraceModel(words),
            CatalogueRetriever(),
            config=FixLengthConfig(fix_length=1, generate_max_length=64),
            prompts=QAPrompts(exemplars=()),
        )

    (result,) = graph().batch([{"question": QUESTION}])
    assert result["counts"]["rounds"] >= 8 and result["answer"] == "1931"
    assert graph().as_tool().invoke({"question": QUESTION}).startswith("Answer: 1931")
    # a limit the caller sets still holds
    with pytest.raises(GraphRecursionError):
        graph().batch([{"question": QUESTION}], {"recursion_limit": 10})


def test_tools_of_a_schema_of_your_own_stay_langchains() -> None:
    from pydantic import BaseModel

    class Ask(BaseModel):
        question: str

    tool = _graph().as_tool(Ask, name="raw")
    assert tool.name == "raw" and isinstance(tool.invoke({"question": QUESTION}), dict)
