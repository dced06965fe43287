"""The compiled graph every factory returns: LangGraph's, with a tool and a batch that fit.

[`AdaptiveRAGGraph`][] is a ``CompiledStateGraph`` in every respect but two:

- ``as_tool()`` without an ``args_schema`` gives the agent tool of [`create_rag_tool`][]
  (``question`` in; the answer and its numbered sources out), where LangChain's generic
  conversion would demand every input field and return the whole state as text;
- ``batch``/``abatch`` without a ``recursion_limit`` give each run LangGraph's own
  default (10,007 steps, as ``invoke`` has), where LangChain's batch would fill in 25,
  which a run of four retrieval rounds exceeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel

from langchain_adaptive_rag.graphs.tool import create_rag_tool
from langchain_adaptive_rag.state import AdaptiveRAGInput, AdaptiveRAGOutput, AdaptiveRAGState

__all__ = ["RUN_RECURSION_LIMIT", "AdaptiveRAGGraph"]

RUN_RECURSION_LIMIT = 10_007
"""Steps a run may take when the caller sets no ``recursion_limit`` (LangGraph's default
for ``invoke``)."""


def _with_limit(
    config: RunnableConfig | Sequence[RunnableConfig] | None, count: int
) -> list[RunnableConfig]:
    """One config per input, each with a recursion limit (the caller's, else ours)."""
    configs: list[RunnableConfig] = (
        [dict(c) for c in config]  # type: ignore[misc]
        if isinstance(config, Sequence)
        else [dict(config or {}) for _ in range(count)]  # type: ignore[misc]
    )
    for item in configs:
        item.setdefault("recursion_limit", RUN_RECURSION_LIMIT)
    return configs


class AdaptiveRAGGraph(
    CompiledStateGraph[AdaptiveRAGState, Any, AdaptiveRAGInput, AdaptiveRAGOutput]
):
    """A compiled adaptive-RAG graph.

    Input ``{"question"}`` or ``{"messages"}``; output ``{"messages", "answer", "text",
    "retrievals", "counts"}``.
    """

    def as_tool(
        self,
        args_schema: type[BaseModel] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        arg_types: dict[str, type] | None = None,
    ) -> BaseTool:
        """This graph as an agent's tool (see [`create_rag_tool`][]).

        Args:
            args_schema: A schema of your own: LangChain's generic conversion then.
            name: The tool's name (default: the graph's).
            description: What it does, for the agent's model.
            arg_types: Argument types of your own: LangChain's generic conversion then.

        Returns:
            The tool.
        """
        if args_schema is not None or arg_types is not None:
            return super().as_tool(
                args_schema, name=name, description=description, arg_types=arg_types
            )
        return create_rag_tool(self, name=name, description=description)

    def batch(  # the signature of Runnable.batch, whose extra options it passes on
        self,
        inputs: list[Any],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any | None,
    ) -> list[Any]:
        """Runnable.batch, each run with LangGraph's recursion limit unless one is given."""
        return super().batch(
            inputs,
            _with_limit(config, len(inputs)),
            return_exceptions=return_exceptions,
            **kwargs,
        )

    async def abatch(  # the signature of Runnable.abatch
        self,
        inputs: list[Any],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any | None,
    ) -> list[Any]:
        """Runnable.abatch, each run with LangGraph's recursion limit unless one is given."""
        return await super().abatch(
            inputs,
            _with_limit(config, len(inputs)),
            return_exceptions=return_exceptions,
            **kwargs,
        )
