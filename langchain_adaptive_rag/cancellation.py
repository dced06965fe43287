"""Async callers that stop waiting stop their model calls.

An async call (``ainvoke``, ``agenerate_trace``, an async graph run's node) waits for its
tokens in a thread. When the awaiting task is cancelled (a client that disconnects, an
``asyncio.wait_for`` that times out), that thread would go on decoding to the end of its
budget, holding rows of the batched loop and device time that other callers need.
[`run_in_thread`][] gives the thread a stop event that the cancellation sets; the
model's calls in that thread read it ([`current_stop`][]): a call decoding leaves the
batch at the next step, and a call made after it raises [`CallCancelledError`][]
at once.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TypeVar

from langchain_adaptive_rag.errors import CallCancelledError

__all__ = ["check_not_cancelled", "current_stop", "run_in_thread", "stoppable_context"]

T = TypeVar("T")

_STOP: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "adaptive_rag_stop", default=None
)
"""The stop event of the async call this thread works for (``None``: a sync caller)."""


async def run_in_thread(executor: Executor | None, call: Callable[[], T]) -> T:
    """Run ``call`` in ``executor`` with this context; cancelling the wait stops it.

    Args:
        executor: The threads to wait in (``None``: the event loop's default executor).
        call: What to run; it sees the caller's context (run config, callbacks, stream
            writer) and, through [`current_stop`][], the stop event of this wait.

    Returns:
        What ``call`` returned.
    """
    stop = threading.Event()
    context = stoppable_context(stop)
    waiting = asyncio.get_running_loop().run_in_executor(executor, context.run, call)
    try:
        return await waiting
    except asyncio.CancelledError:
        stop.set()  # the thread's model calls stop at their next step
        raise


def stoppable_context(stop: threading.Event) -> contextvars.Context:
    """A copy of this context in which the model's calls stop once ``stop`` is set."""
    context = contextvars.copy_context()
    context.run(_STOP.set, stop)
    return context


def current_stop() -> threading.Event | None:
    """The stop event of the async call this thread runs for (``None``: none)."""
    return _STOP.get()


def check_not_cancelled(stop: threading.Event | None) -> None:
    """Raise if the async call that ``stop`` belongs to was cancelled.

    Raises:
        CallCancelledError: ``stop`` is set.
    """
    if stop is not None and stop.is_set():
        raise CallCancelledError
