"""Graph outputs made comparable across runs: messages without their random ids."""

from __future__ import annotations

from collections.abc import Mapping

from langchain_core.messages import BaseMessage


def comparable(output: Mapping[str, object]) -> dict[str, object]:
    """``output`` with each message as its type, content and extra fields (no id)."""
    messages = output.get("messages")
    if not isinstance(messages, list):
        return dict(output)
    return {
        **output,
        "messages": [
            (type(m).__name__, m.content, m.additional_kwargs)
            for m in messages
            if isinstance(m, BaseMessage)
        ],
    }
