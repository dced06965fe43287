"""Test helper: calls that one batched decoding loop is sure to take together."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from langchain_adaptive_rag import ChatTransformers

T = TypeVar("T")


def decoded_together(chat: ChatTransformers, calls: Sequence[Callable[[], T]]) -> list[T]:
    """Run each call from its own thread while the model is busy, then free it.

    The calls queue up behind the held model lock, so the engine's next loop takes all of
    them at once (threads started together may otherwise reach it one by one on a loaded
    machine). Returns their results in order.
    """
    engine = chat.local_model.scheduler(chat)
    deadline = time.monotonic() + 60
    with ThreadPoolExecutor(len(calls)) as pool:
        with engine.lock:  # the model is busy
            futures = [pool.submit(call) for call in calls]
            while len(engine._pending) < len(calls):  # a call that ended early never queues
                assert not any(f.done() for f in futures), "a call ended before it queued"
                assert time.monotonic() < deadline, "the calls did not all queue in 60 s"
                threading.Event().wait(0.001)
        return [future.result() for future in futures]
