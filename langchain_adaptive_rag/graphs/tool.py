"""An adaptive-RAG graph as a tool for agents: a question in, the answer and its sources out.

``graph.as_tool()`` (or ``create_rag_tool(graph)``) gives a ``StructuredTool`` whose one
argument is the question. Its content is what an agent reads: the short answer, then the
sources the answer read, numbered, each with its title and URL (or source) and the start
of its text. Its artifact is the run's output (``answer``, ``text``, ``retrievals``,
``counts``, ``sources``), for the application, not the model.

With LangChain 1.x's ``create_agent`` (``langchain.agents``; LangGraph's older
``create_react_agent`` takes the tool too)::

    tool = graph.as_tool(name="wiki_qa", description="Answers questions from Wikipedia.")
    agent = create_agent(chat_model, [tool])
    agent.invoke({"messages": [("user", "When was the director of Blue Harbour born?")]})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from langchain_adaptive_rag.graphs._nodes import sources

__all__ = ["DEFAULT_TOOL_DESCRIPTION", "RAGToolInput", "create_rag_tool", "tool_content"]

DEFAULT_TOOL_DESCRIPTION = (
    "Answers a factual question from the document collection, retrieving only when the "
    "model is unsure. Returns a short answer and the numbered sources it read."
)
"""The tool's description when none is given."""
_SNIPPET = 200
_RUN_STEPS = 10_007
"""LangGraph's default step limit of a run (``invoke``'s)."""


class RAGToolInput(BaseModel):
    """The tool's arguments."""

    question: str = Field(description="The question to answer, as a complete sentence.")


def tool_content(output: Mapping[str, Any]) -> str:
    """What an agent reads of a run: the answer, then its sources, numbered.

    Args:
        output: A graph run's output (``answer``, ``retrievals``, ...).

    Returns:
        The answer and its sources as text, one line per source
        (``Answer: ...``, a blank line, ``Sources:`` and ``[1] Title (url): text...``
        lines); or the answer and ``(no documents were retrieved)``.
    """
    lines = [f"Answer: {str(output.get('answer', '')).strip()}"]
    found = sources(output)  # type: ignore[arg-type]
    if not found:
        lines.append("(no documents were retrieved)")
        return "\n".join(lines)
    lines += ["", "Sources:"]
    for number, source in enumerate(found, 1):
        metadata = source.get("metadata") or {}
        label = str(metadata.get("title") or source["id"])
        where = metadata.get("url") or metadata.get("source")
        heading = f"[{number}] {label}" + (f" ({where})" if where else "")
        text = " ".join(str(source["text"]).split())
        snippet = text if len(text) <= _SNIPPET else text[: _SNIPPET - 3].rstrip() + "..."
        lines.append(f"{heading}: {snippet}")
    return "\n".join(lines)


def _artifact(output: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("answer", "text", "retrievals", "counts")
    return {**{key: output.get(key) for key in keys}, "sources": sources(output)}  # type: ignore[arg-type]


def _own_limit(config: RunnableConfig) -> RunnableConfig:
    """The agent's config (callbacks, tracing), with the graph's own step limit.

    An agent's 25 steps bound the agent, not the steps of one retrieval run.
    """
    return {**config, "recursion_limit": _RUN_STEPS}


def create_rag_tool(
    graph: Runnable[Any, Any],
    *,
    name: str | None = None,
    description: str | None = None,
) -> StructuredTool:
    """A tool that answers one question with ``graph``.

    Args:
        graph: A compiled adaptive-RAG graph.
        name: The tool's name (default: the graph's name, e.g. ``"dragin"``).
        description: What the tool does, for the agent's model (default:
            [`DEFAULT_TOOL_DESCRIPTION`][]).

    Returns:
        A ``StructuredTool`` taking ``question`` (required), returning
        [`tool_content`][] as its content and the run's output as its artifact.
    """

    def answer(question: str, config: RunnableConfig) -> tuple[str, dict[str, Any]]:
        output = graph.invoke({"question": question}, _own_limit(config))
        return tool_content(output), _artifact(output)

    async def aanswer(question: str, config: RunnableConfig) -> tuple[str, dict[str, Any]]:
        output = await graph.ainvoke({"question": question}, _own_limit(config))
        return tool_content(output), _artifact(output)

    return StructuredTool.from_function(
        func=answer,
        coroutine=aanswer,
        name=name or graph.get_name(),
        description=description or DEFAULT_TOOL_DESCRIPTION,
        args_schema=RAGToolInput,
        response_format="content_and_artifact",
    )
