"""Tokens generated inside graph nodes, streamed as chat-model runs.

LangGraph's ``stream_mode="messages"`` listens to chat-model callbacks. The graphs call
``generate_trace`` rather than ``invoke``, so each generation is announced here as a
chat-model run of the current node: its tokens arrive as ``AIMessageChunk`` objects,
tagged with the node's metadata, exactly as an ``invoke`` inside the node would send them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from langchain_core.callbacks import CallbackManager
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, LLMResult

from langchain_adaptive_rag.options import TokenEvent

__all__ = ["TokenSink", "token_stream"]

TokenSink = Callable[[TokenEvent], None]
"""Receives each generated token."""


@contextmanager
def token_stream(prompt: str, name: str) -> Iterator[TokenSink | None]:
    """Announce one generation as a chat-model run of the current LangGraph node.

    Args:
        prompt: The prompt (shown as the run's input).
        name: The run's name (the model's name).

    Yields:
        A sink to pass as ``on_token``, or ``None`` outside a graph run or when no
        callback handler listens (a concurrent decoding loop then hands the caller no
        per-token events).
    """
    from langgraph.config import get_config

    try:
        config = get_config()
    except RuntimeError:  # not inside a runnable: nothing listens
        yield None
        return
    manager = CallbackManager.configure(
        inheritable_callbacks=config.get("callbacks"),
        inheritable_tags=config.get("tags"),
        inheritable_metadata=config.get("metadata"),
    )
    if not manager.handlers:  # nobody listens (plain invoke): decode without token events
        yield None
        return
    run = manager.on_chat_model_start({"name": name}, [[HumanMessage(content=prompt)]], name=name)[
        0
    ]
    message_id = f"lc_run--{run.run_id}" if run.run_id else str(uuid.uuid4())
    pieces: list[str] = []

    def sink(event: TokenEvent) -> None:
        pieces.append(event.piece)
        chunk = ChatGenerationChunk(message=AIMessageChunk(content=event.piece, id=message_id))
        run.on_llm_new_token(event.piece, chunk=chunk)

    try:
        yield sink
    except BaseException as error:
        run.on_llm_error(error)
        raise
    message = AIMessage(content="".join(pieces), id=message_id)
    run.on_llm_end(LLMResult(generations=[[ChatGeneration(message=message)]]))
