"""A cancelled async caller stops its model call: it leaves the batch at the next step.

Each forward pass of the tiny model is slowed by 5 ms, so a 300-token call that went on
after its caller was cancelled would run about 300 passes; a stopped one runs a few more
than it had when the cancellation came.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from langchain_adaptive_rag import ChatTransformers, create_bm25_retriever
from langchain_adaptive_rag.cancellation import (
    check_not_cancelled,
    current_stop,
    run_in_thread,
)
from langchain_adaptive_rag.engine.scheduler import Scheduler
from langchain_adaptive_rag.errors import CallCancelledError
from langchain_adaptive_rag.graphs.fixed import FixLengthConfig, create_fix_length_graph
from langchain_adaptive_rag.options import DecodingOptions
from langchain_adaptive_rag.prompts import QAPrompts
from tests.helpers.passes import Passes, counted

LONG = DecodingOptions(max_new_tokens=300, min_new_tokens=300)
PROMPT = "Anna Berg was born in"
AFTER_CANCEL = 25
"""Passes a cancelled call may still run (the cancellation reaches the thread, then the
loop, within a step or two)."""


async def until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.002)


async def cancel_once_decoding(call: Awaitable[Any], passes: Passes) -> int:
    """Start ``call``, cancel it after 10 decoding passes; the passes counted then."""
    task = asyncio.ensure_future(call)
    await until(lambda: passes.decoding >= 10, "the call did not start decoding")
    at_cancel = passes.decoding
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return at_cancel


def wait_idle(engine: Scheduler) -> None:
    deadline = time.monotonic() + 30
    while engine._looping or engine._pending:
        assert time.monotonic() < deadline, "the engine is still busy"
        time.sleep(0.005)


@pytest.fixture
def chat(llama_dir: Path) -> ChatTransformers:
    return ChatTransformers(
        model=str(llama_dir), batch_concurrent_calls=True, max_new_tokens=8, min_new_tokens=8
    )


def test_a_cancelled_call_leaves_the_batch_and_the_others_go_on(chat: ChatTransformers) -> None:
    short_alone = chat.invoke(PROMPT).content
    engine = chat.scheduler
    assert engine is not None

    async def main(passes: Passes) -> tuple[str, int]:
        short = asyncio.ensure_future(chat.ainvoke(PROMPT))
        at_cancel = await cancel_once_decoding(chat.agenerate_trace(PROMPT, decoding=LONG), passes)
        return str((await short).content), at_cancel

    with counted(chat) as passes:
        short, at_cancel = asyncio.run(main(passes))
        wait_idle(engine)
    assert short == short_alone
    assert passes.decoding <= at_cancel + AFTER_CANCEL < LONG.max_new_tokens
    # The engine goes on serving: the same long call, uncancelled, runs to its end.
    trace = asyncio.run(
        chat.agenerate_trace(PROMPT, decoding=DecodingOptions(max_new_tokens=40, min_new_tokens=40))
    )
    assert len(trace[0].token_ids) == 40


def test_a_call_cancelled_while_queued_is_never_decoded(chat: ChatTransformers) -> None:
    chat.invoke(PROMPT)
    engine = chat.scheduler
    assert engine is not None

    async def main() -> None:
        call = asyncio.ensure_future(chat.agenerate_trace(PROMPT, decoding=LONG))
        await until(lambda: len(engine._pending) == 1, "the call did not queue")
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    with counted(chat) as passes:
        with ThreadPoolExecutor(1) as app, engine.lock:  # the model is busy meanwhile
            app.submit(asyncio.run, main()).result()
        wait_idle(engine)
    assert (passes.prefills, passes.decoding, engine.dropped) == (0, 0, 1)


def test_a_cancelled_call_alone_on_the_model_stops(llama_dir: Path) -> None:
    chat = ChatTransformers(model=str(llama_dir))  # no batching: the call holds the lock
    assert not chat.batching

    with counted(chat) as passes:
        call = chat.agenerate_trace(PROMPT, decoding=LONG)
        at_cancel = asyncio.run(cancel_once_decoding(call, passes))
        with chat.local_model.lock:  # the call's thread has let go of the model
            pass
    assert passes.decoding <= at_cancel + AFTER_CANCEL


def test_a_call_cancelled_while_waiting_for_the_lock_is_never_run(llama_dir: Path) -> None:
    chat = ChatTransformers(model=str(llama_dir))  # no batching: calls take the lock

    cancelled = threading.Event()

    async def main() -> None:
        call = asyncio.ensure_future(chat.agenerate_trace(PROMPT, decoding=LONG))
        await asyncio.sleep(0.2)  # its thread waits for the lock
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        cancelled.set()  # asyncio.run then waits for the call's thread to end

    with counted(chat) as passes, ThreadPoolExecutor(1) as app:
        with chat.local_model.lock:  # the model is busy until the call is cancelled
            done = app.submit(asyncio.run, main())
            assert cancelled.wait(30)
        done.result(timeout=30)
    assert (passes.prefills, passes.decoding) == (0, 0)


def test_an_async_stream_closed_early_stops_its_call(chat: ChatTransformers) -> None:
    engine = chat.scheduler or chat.local_model.scheduler(chat)

    async def main() -> str:
        stream = chat.astream(PROMPT, max_new_tokens=300, min_new_tokens=300)
        async with contextlib.aclosing(stream):
            async for chunk in stream:
                return str(chunk.content)
        return ""

    with counted(chat) as passes:
        first = asyncio.run(main())
        wait_idle(engine)
    assert first and passes.decoding <= AFTER_CANCEL


def test_a_cancelled_graph_run_makes_no_further_model_call(llama_dir: Path) -> None:
    """FL-RAG retrieves and generates 200 tokens, round after round: cancelled in its
    first round's call, the run's node stops that call, and the run makes no other."""
    chat = ChatTransformers(model=str(llama_dir), batch_concurrent_calls=True, min_new_tokens=300)
    retriever = create_bm25_retriever(["Anna Berg was born in Oslo."])
    graph = create_fix_length_graph(
        chat,
        retriever,
        config=FixLengthConfig(generate_max_length=600, fix_length=200),
        prompts=QAPrompts(exemplars=()),
    )
    engine = chat.local_model.scheduler(chat)

    with counted(chat) as passes:
        run = graph.ainvoke({"question": "Where was Anna Berg born?"})
        at_cancel = asyncio.run(cancel_once_decoding(run, passes))
        wait_idle(engine)
        time.sleep(0.3)  # a node thread that went on would have queued its next call
        wait_idle(engine)
    assert passes.prefills == 1
    assert passes.decoding <= at_cancel + AFTER_CANCEL


def test_run_in_thread_sets_the_stop_event_when_its_wait_is_cancelled() -> None:
    seen: list[threading.Event | None] = []
    released = threading.Event()

    def call() -> str:
        stop = current_stop()
        seen.append(stop)
        assert stop is not None
        stop.wait(10)
        released.set()
        check_not_cancelled(stop)
        return "finished"

    async def main() -> None:
        with ThreadPoolExecutor(1) as threads:
            waiting = asyncio.ensure_future(run_in_thread(threads, call))
            await until(lambda: bool(seen), "the call did not start")
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert await asyncio.get_running_loop().run_in_executor(None, released.wait, 10)
            assert await run_in_thread(threads, lambda: current_stop() is not seen[0])

    asyncio.run(main())
    assert current_stop() is None  # a sync caller has none
    with pytest.raises(CallCancelledError, match="was cancelled"):
        check_not_cancelled(seen[0])
