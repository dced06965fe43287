"""Tool calls written as text: how a local model is shown tools and how its calls are read.

A served chat model calls tools because its server renders the tools into the prompt and
reads the calls back out of the reply with a parser for the model's family (vLLM's
``--tool-call-parser hermes``, llama.cpp's ``--jinja``). [`ChatTransformers`][] does both
itself, with a [`ToolCallFormat`][]:

- [`HermesToolCalls`][] (the default): the tools go into the model's chat template
  (transformers' ``apply_chat_template(..., tools=...)``), and the model writes each call
  as ``{"name": ..., "arguments": {...}}`` between ``<tool_call>`` and ``</tool_call>``:
  Qwen2.5 and Qwen3, Hermes 2 and 3, and the other families whose templates show tools
  this way;
- [`SearchToolCalls`][langchain_adaptive_rag.graphs.search_tool_calls.SearchToolCalls]: a
  searcher trained on a search protocol (Search-R1's ``<search>`` tags, the toy model)
  calls the one search tool by writing a query between the protocol's tags.

``llm.bind_tools(tools, tool_choice=..., tool_format=...)`` binds them; ``create_agent``
calls ``bind_tools`` itself, and passes ``tool_format`` from its ``model_settings``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.messages import BaseMessage, InvalidToolCall, ToolCall
from transformers import PreTrainedTokenizerBase

from langchain_adaptive_rag.chat_messages import chat_dict
from langchain_adaptive_rag.errors import AdaptiveRAGError

__all__ = [
    "HERMES",
    "BoundTools",
    "HermesToolCalls",
    "ToolCallFormat",
    "ToolPrompt",
    "ToolReply",
    "new_call_id",
    "tool_names",
]


@dataclass(frozen=True)
class ToolPrompt:
    """The prompt of a call with tools bound."""

    text: str
    """The prompt's text."""
    add_special_tokens: bool
    """Tokenize with the tokenizer's special tokens (a plain prompt: BOS) or not (a
    rendered chat template, which writes its own)."""
    prefill: str = ""
    """The start of the model's reply, written at the end of the prompt (a forced tool
    call's opening tag, a forced answer's): the reply is read as ``prefill`` followed by
    the generated text."""


@dataclass(frozen=True)
class ToolReply:
    """A reply read for tool calls."""

    content: str
    """The message's text."""
    tool_calls: list[ToolCall]
    """The calls read from the reply."""
    invalid_tool_calls: list[InvalidToolCall]
    """Calls written in a form that could not be read (their raw text and the reason)."""


@dataclass(frozen=True)
class BoundTools:
    """What ``bind_tools`` bound for a call: the tools, the choice and the format."""

    tools: tuple[dict[str, Any], ...]
    """The tools in OpenAI's form (``{"type": "function", "function": {...}}``)."""
    choice: str
    """``auto`` (the model decides), ``none`` (no call: the model answers), ``required``
    (some call), or a tool's name (that call)."""
    format: ToolCallFormat
    """How the tools are shown and the calls read."""


class ToolCallFormat(Protocol):
    """How a model is shown tools and writes its calls, as text."""

    @property
    def name(self) -> str:
        """The format's name."""

    @property
    def held_from(self) -> str | None:
        """Where streamed content stops: text from this string on is a call.

        ``None``: every piece is streamed as content.
        """

    def stop_strings(self, bound: BoundTools) -> tuple[str, ...]:
        """Stop strings added to a call's own while the tools are bound."""

    def render(
        self,
        messages: Sequence[BaseMessage],
        bound: BoundTools,
        tokenizer: PreTrainedTokenizerBase,
    ) -> ToolPrompt:
        """The prompt of the conversation with the tools shown."""

    def parse(self, text: str, stop_string: str | None, bound: BoundTools) -> ToolReply:
        """The reply's content and tool calls.

        Args:
            text: The reply: the prompt's prefill, then the generated text.
            stop_string: The stop string generation ended at (``None``: none).
            bound: The bound tools.
        """


def tool_names(bound: BoundTools) -> list[str]:
    """The bound tools' names."""
    return [str(tool["function"]["name"]) for tool in bound.tools]


def new_call_id() -> str:
    """A tool call's id, in the ``call_...`` form of OpenAI's API."""
    return f"call_{uuid.uuid4().hex[:24]}"


@dataclass(frozen=True)
class HermesToolCalls:
    """Tools shown by the chat template, calls written as JSON between tags.

    The chat template receives the tools (``tools=``), earlier calls (an assistant
    message's ``tool_calls``) and results (``tool`` messages), as transformers passes them
    to every template; a reply's calls are the JSON objects between ``opening`` and
    ``closing`` (``{"name": ..., "arguments": {...}}``; ``parameters`` is read as
    ``arguments``, and arguments written as a JSON string are decoded), and its content
    is the text before the first call. ``tool_choice="required"`` writes the opening tag
    after the prompt, a tool's name also the start of its object, so the model goes on
    with the call.
    """

    name: str = "hermes"
    opening: str = "<tool_call>"
    """The tag a call starts with."""
    closing: str = "</tool_call>"
    """The tag a call ends with."""

    @property
    def held_from(self) -> str | None:
        """A call starts at the opening tag."""
        return self.opening

    def stop_strings(self, bound: BoundTools) -> tuple[str, ...]:
        """None: the model ends its turn after its calls."""
        return ()

    def render(
        self,
        messages: Sequence[BaseMessage],
        bound: BoundTools,
        tokenizer: PreTrainedTokenizerBase,
    ) -> ToolPrompt:
        """The chat template over the messages and the tools.

        Raises:
            AdaptiveRAGError: The tokenizer has no chat template.
        """
        if not getattr(tokenizer, "chat_template", None):
            msg = (
                f"Received a tokenizer without a chat template for tool format {self.name!r}; "
                "expected a template that shows tools (Qwen2.5, Qwen3, Hermes). Fix: load "
                "the model's own tokenizer, or bind_tools(..., tool_format=SearchToolCalls("
                "protocol)) for a searcher trained on a search protocol."
            )
            raise AdaptiveRAGError(msg)
        rendered = tokenizer.apply_chat_template(
            [chat_dict(m) for m in messages],
            tools=list(bound.tools),
            tokenize=False,
            add_generation_prompt=True,
        )
        prefill = ""
        if bound.choice == "required":
            prefill = f"{self.opening}\n"
        elif bound.choice not in {"auto", "none"}:
            prefill = f'{self.opening}\n{{"name": {json.dumps(bound.choice)}, "arguments": '
        return ToolPrompt(str(rendered) + prefill, add_special_tokens=False, prefill=prefill)

    def parse(self, text: str, stop_string: str | None, bound: BoundTools) -> ToolReply:
        """The JSON calls between the tags; ``tool_choice="none"`` reads none.

        The last call may lack its closing tag (the reply ran out of tokens).
        """
        at = text.find(self.opening)
        if bound.choice == "none" or at < 0:
            return ToolReply(text, [], [])
        calls: list[ToolCall] = []
        invalid: list[InvalidToolCall] = []
        for block in text[at:].split(self.opening)[1:]:
            raw = block.split(self.closing)[0].strip()
            call_id = new_call_id()
            read = _read_call(raw)
            if isinstance(read, str):
                invalid.append(
                    InvalidToolCall(
                        type="invalid_tool_call", name=None, args=raw, id=call_id, error=read
                    )
                )
            else:
                name, args = read
                calls.append(ToolCall(type="tool_call", name=name, args=args, id=call_id))
        return ToolReply(text[:at], calls, invalid)


HERMES = HermesToolCalls()
"""The default tool-call format (Qwen2.5, Qwen3, Hermes)."""

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


def _read_call(raw: str) -> tuple[str, dict[str, Any]] | str:
    """A call's name and arguments from its JSON, or why it cannot be read."""
    try:
        value = json.loads(_FENCE.sub("", raw))
    except json.JSONDecodeError as error:
        return f"The tool call is not JSON ({error.msg} at character {error.pos})."
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return 'The tool call is not an object with a "name".'
    args = value.get("arguments", value.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            return "The tool call's arguments are a string that is not JSON."
    if not isinstance(args, dict):
        return f"The tool call's arguments are {type(args).__name__}, not an object."
    return value["name"], args
