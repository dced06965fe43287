"""Test helper: a tool-calling chat model that replies with scripted messages in order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import Field

__all__ = ["OpenAIStyleAgentModel", "ScriptedAgentModel", "call", "reply"]


def call(query: str, index: int = 1, name: str = "search") -> AIMessage:
    """A reply that calls the tool ``name`` with ``query``."""
    called = {"name": name, "args": {"query": query}, "id": f"c{index}"}
    return AIMessage(f"I look up {query}.", tool_calls=[called])


def reply(text: str, tokens: int = 3) -> AIMessage:
    """A final reply reporting ``tokens`` output tokens."""
    usage = {"input_tokens": 10, "output_tokens": tokens, "total_tokens": 10 + tokens}
    return AIMessage(text, usage_metadata=usage)  # type: ignore[arg-type]


class ScriptedAgentModel(BaseChatModel):
    """Returns ``replies`` one per call; records every call's messages and bound tools."""

    replies: list[AIMessage]
    seen: list[list[BaseMessage]] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    settings: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-agent"

    def bind_tools(  # type: ignore[override]
        self,
        tools: Sequence[BaseTool],
        *,
        tool_choice: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        self.tools[:] = [tool.name for tool in tools]
        options = {"max_tokens": max_tokens, "temperature": temperature}
        chosen = {name: value for name, value in options.items() if value is not None}
        return self.bind(**chosen) if chosen else self  # type: ignore[return-value]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,  # LangChain's interface: call options, recorded
    ) -> ChatResult:
        self.seen.append(list(messages))
        self.settings.append(dict(kwargs))
        if not self.replies:
            raise AssertionError(f"ScriptedAgentModel: no reply left for {messages[-1]!r}")
        return ChatResult(generations=[ChatGeneration(message=self.replies.pop(0))])


class OpenAIStyleAgentModel(ScriptedAgentModel):
    """The scripted model, spelled as ``ChatOpenAI`` (takes ``max_tokens``, ``temperature``)."""

    @property
    def _llm_type(self) -> str:
        return "openai-chat"
