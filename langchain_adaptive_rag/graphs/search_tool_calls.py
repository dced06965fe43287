"""A searcher's protocol as a tool-call format: a trained searcher behind ``create_agent``.

A searcher trained on a search protocol (Search-R1, R1-Searcher, the toy model) calls one
tool, a search, by writing its query between the protocol's tags. [`SearchToolCalls`][]
lets [`ChatTransformers`][langchain_adaptive_rag.ChatTransformers] offer that as
LangChain's tool calling, so the searcher runs in ``create_agent`` (the tool agent) with
the text it was trained on:

- the prompt is the protocol's prompt for the question (the last user message; the
  system prompt and earlier turns are not shown, as the searcher was trained on
  neither), followed
  by the turn so far: each model reply as it was written (its text ends with the query's
  closing tag) and each search result in the protocol's result block (the tool's
  documents, from its artifact, as the protocol formats them);
- a reply that stopped at the query's closing tag after an opening one is a call of the
  bound tool with the query (cleaned as the protocol cleans it) as its one argument; an
  empty query is an invalid call, which ends the agent's run; the reply's content is its
  whole text, tags included;
- ``tool_choice="none"`` (the agent's forced answer) writes the answer's opening tag after
  the turn, as the search agent's ``force_answer`` does; ``"required"`` the query's.

Given the same prompt, the model writes the same turns as in the search agent
([`create_search_agent_graph`][langchain_adaptive_rag.graphs.create_search_agent_graph]).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from transformers import PreTrainedTokenizerBase

from langchain_adaptive_rag.chat_messages import message_text
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs.search_protocol import (
    SearchProtocol,
    format_documents,
    read_turn,
)
from langchain_adaptive_rag.state import RetrievedDoc
from langchain_adaptive_rag.tool_calling import (
    BoundTools,
    ToolPrompt,
    ToolReply,
    new_call_id,
)

__all__ = ["SearchToolCalls"]


@dataclass(frozen=True)
class SearchToolCalls:
    """A search protocol's query tags as calls of the one bound tool (see the module)."""

    protocol: SearchProtocol
    """The searcher's protocol (a preset of ``search_presets``, or the toy model's)."""

    @property
    def name(self) -> str:
        """``search:<protocol name>``."""
        return f"search:{self.protocol.name}"

    @property
    def held_from(self) -> str | None:
        """None: the tags are part of the reply's content."""
        return None

    def stop_strings(self, bound: BoundTools) -> tuple[str, ...]:
        """The protocol's stop strings (the query's closing tag; the answer's)."""
        if bound.choice == "none":
            return (self.protocol.answer_closer,)
        return self.protocol.stop

    def argument(self, bound: BoundTools) -> str:
        """The one string argument of the one bound tool.

        Raises:
            AdaptiveRAGError: Not one tool, or a tool that does not take one string.
        """
        if len(bound.tools) != 1:
            names = [tool["function"]["name"] for tool in bound.tools]
            msg = (
                f"Tool format {self.name!r} calls one search tool; received {len(names)} "
                f"tools {names}. Fix: bind the search tool alone, or a tool-calling model "
                "with the hermes format for several tools."
            )
            raise AdaptiveRAGError(msg)
        function = bound.tools[0]["function"]
        properties = function.get("parameters", {}).get("properties", {})
        if len(properties) != 1 or next(iter(properties.values())).get("type") != "string":
            msg = (
                f"Tool format {self.name!r} writes a query, one string; tool "
                f"{function['name']!r} takes {sorted(properties)}. Fix: a search tool with "
                "one string argument (def search(query: str))."
            )
            raise AdaptiveRAGError(msg)
        return str(next(iter(properties)))

    def render(
        self,
        messages: Sequence[BaseMessage],
        bound: BoundTools,
        tokenizer: PreTrainedTokenizerBase,
    ) -> ToolPrompt:
        """The protocol's prompt for the question, then the turn so far (see the module).

        Raises:
            AdaptiveRAGError: No user message holds a question.
        """
        self.argument(bound)
        start = _question_at(messages)
        if start is None:
            msg = (
                f"Tool format {self.name!r} received no user message; expected the "
                "question as one. Fix: invoke with a HumanMessage."
            )
            raise AdaptiveRAGError(msg)
        protocol = self.protocol
        text = protocol.render_prompt(message_text(messages[start]), protocol.max_searches)
        for message in messages[start + 1 :]:
            if isinstance(message, AIMessage):
                text += self._written(message)
            elif isinstance(message, ToolMessage):
                text += protocol.result_template.format(documents=self._documents(message))
        prefill = ""
        if bound.choice == "none":
            prefill = protocol.answer_opener
        elif bound.choice != "auto":
            prefill = protocol.query_tags[0]
        return ToolPrompt(text + prefill, add_special_tokens=True, prefill=prefill)

    def _written(self, message: AIMessage) -> str:
        """A reply as the model wrote it (a call from elsewhere: its query in the tags)."""
        text = message_text(message)
        opening, closing = self.protocol.query_tags
        for call in message.tool_calls:
            if not text.rstrip().endswith(closing):
                query = " ".join(str(value) for value in call["args"].values())
                text += f"{opening}{query}{closing}"
        return text

    def _documents(self, message: ToolMessage) -> str:
        """The documents of a search result, as the protocol formats them."""
        artifact = message.artifact
        if isinstance(artifact, list) and all(
            isinstance(doc, dict) and isinstance(doc.get("text"), str) for doc in artifact
        ):
            docs = [cast("RetrievedDoc", {"metadata": {}, **doc}) for doc in artifact]
            return format_documents(self.protocol, docs)
        return message_text(message)

    def parse(self, text: str, stop_string: str | None, bound: BoundTools) -> ToolReply:
        """A search when the reply stopped at the query's closing tag after an opening one."""
        content = text + (stop_string or "")
        if bound.choice == "none":
            return ToolReply(content, [], [])
        action = read_turn(self.protocol, text, stop_string)
        if action.kind != "search" or action.query is None:
            return ToolReply(content, [], [])
        query = self.protocol.clean_query(action.query)
        call_id = new_call_id()
        if not query:
            error = "The query between the tags is empty."
            invalid: dict[str, Any] = {
                "type": "invalid_tool_call",
                "name": bound.tools[0]["function"]["name"],
                "args": action.query,
                "id": call_id,
                "error": error,
            }
            return ToolReply(content, [], [cast("Any", invalid)])
        call: dict[str, Any] = {
            "type": "tool_call",
            "name": bound.tools[0]["function"]["name"],
            "args": {self.argument(bound): query},
            "id": call_id,
        }
        return ToolReply(content, [cast("Any", call)], [])


def _question_at(messages: Sequence[BaseMessage]) -> int | None:
    """The index of the last user message (the question of the agent's turn)."""
    humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    return humans[-1] if humans else None
