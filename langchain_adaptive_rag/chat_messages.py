"""LangChain messages as the text and dictionaries a tokenizer's chat template reads."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_adaptive_rag.errors import AdaptiveRAGError

__all__ = ["chat_dict", "message_text"]


def message_text(message: BaseMessage) -> str:
    """The text of a message's content (a string, or text blocks joined).

    Raises:
        AdaptiveRAGError: The content holds a block that is not text (an image, a file).
    """
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict) and block.get("type") in {"tool_call", "tool_use"}:
            continue  # a provider's tool-call block; the calls are in message.tool_calls
        else:
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            msg = (
                f"ChatTransformers received a {kind!r} content block in a "
                f"{type(message).__name__}. Expected text only (str or "
                "{'type': 'text', 'text': ...} blocks)."
            )
            raise AdaptiveRAGError(msg)
    return "".join(parts)


def chat_dict(message: BaseMessage) -> dict[str, Any]:
    """A message as transformers' chat templates read it.

    An AI message's tool calls go in ``tool_calls`` (``{"type": "function", "function":
    {"name", "arguments"}}``, the arguments as a dictionary) and a tool message carries
    its ``tool_call_id`` and ``name``, the fields the templates of tool-calling models read.

    Raises:
        AdaptiveRAGError: The message is of a kind no chat template has a role for.
    """
    if isinstance(message, HumanMessage):
        return {"role": "user", "content": message_text(message)}
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message_text(message)}
    if isinstance(message, AIMessage):
        entry: dict[str, Any] = {"role": "assistant", "content": message_text(message)}
        if message.tool_calls:
            entry["tool_calls"] = [
                {
                    "id": call.get("id"),
                    "type": "function",
                    "function": {"name": call["name"], "arguments": call["args"]},
                }
                for call in message.tool_calls
            ]
        return entry
    if isinstance(message, ToolMessage):
        return {
            "role": "tool",
            "content": message_text(message),
            "tool_call_id": message.tool_call_id,
            "name": message.name,
        }
    if isinstance(message, ChatMessage):
        return {"role": message.role, "content": message_text(message)}
    msg = (
        f"ChatTransformers cannot format a {type(message).__name__}. Expected human, "
        "AI, system, tool or chat messages."
    )
    raise AdaptiveRAGError(msg)
