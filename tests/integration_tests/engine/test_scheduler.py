"""Concurrent calls join one batched decoding loop and get what a call alone gets."""

from __future__ import annotations

import asyncio
import gc
import math
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar

import numpy as np
import pytest
import torch
from langchain_core.messages import HumanMessage

from langchain_adaptive_rag import (
    ChatTransformers,
    GenerationTrace,
    create_bm25_retriever,
)
from langchain_adaptive_rag.engine import runner, sampler, scheduler
from langchain_adaptive_rag.engine.capabilities import ModelCapabilities
from langchain_adaptive_rag.engine.request import DecodeRequest
from langchain_adaptive_rag.engine.runner import decode_alone, decode_together
from langchain_adaptive_rag.engine.scheduler import Scheduler
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs.fixed import FixLengthConfig, create_fix_length_graph
from langchain_adaptive_rag.options import (
    CaptureOptions,
    DecodingOptions,
    TokenEvent,
    capture_covers,
    capture_union,
)
from langchain_adaptive_rag.prompts import QAPrompts
from tests.helpers.engine_calls import PROMPTS, assert_same, run_together
from tests.helpers.families import WINDOWED_FAMILIES
from tests.helpers.host_reads import count_tensors_from_lists
from tests.helpers.outputs import comparable
from tests.helpers.passes import Passes, counted

T = TypeVar("T")
CALLS: list[dict[str, Any]] = [
    {
        "decoding": DecodingOptions(max_new_tokens=12, min_new_tokens=4),
        "capture": CaptureOptions(attention=True, hidden=True),
    },
    {
        "decoding": DecodingOptions(max_new_tokens=9, stop=("\n", " the")),
        "capture": CaptureOptions(attention=True),
    },
    {
        "decoding": DecodingOptions(max_new_tokens=6, do_sample=True, seed=11),
        "capture": CaptureOptions(hidden=True),
        "n": 3,
    },
    {"decoding": DecodingOptions(max_new_tokens=15, min_new_tokens=15, top_logprobs=2)},
    {
        "decoding": DecodingOptions(max_new_tokens=8, do_sample=True, seed=3),
        "n": 2,
        "include_greedy": True,
    },
    {
        "decoding": DecodingOptions(max_new_tokens=10),
        "capture": CaptureOptions(hidden=True, hidden_at="eos", attention=True),
    },
]
"""The ``generate_trace`` arguments of six calls, one for each prompt of ``PROMPTS``."""


@pytest.mark.parametrize("arch", ["llama", "gpt2", "mistral"])
def test_concurrent_calls_equal_calls_made_alone(
    tiny_model_dirs: dict[str, Path], arch: str
) -> None:
    chat = ChatTransformers(
        model=str(tiny_model_dirs[arch]), batch_concurrent_calls=True, attn_implementation="sdpa"
    )
    alone = [chat.generate_trace(p, **c) for p, c in zip(PROMPTS, CALLS, strict=True)]
    calls = [
        (lambda p=p, c=c: chat.generate_trace(p, **c)) for p, c in zip(PROMPTS, CALLS, strict=True)
    ]
    for _ in range(2):
        together = run_together(chat, calls)
        for got, want in zip(together, alone, strict=True):
            assert_same(got, want)
    assert chat.scheduler is not None
    with pytest.warns(DeprecationWarning, match="ChatTransformers.scheduler"):
        assert chat.engine is chat.scheduler  # the old name, for one release


def test_calls_waiting_for_a_busy_model_decode_together(llama_dir: Path) -> None:
    chat = ChatTransformers(
        model=str(llama_dir), batch_concurrent_calls=True, max_new_tokens=6, min_new_tokens=6
    )
    expected = [chat.invoke(p).content for p in PROMPTS[:4]]
    engine = chat.scheduler
    assert engine is not None and engine.batch_sizes == {1: 4} and engine.joined == 0
    with ThreadPoolExecutor(4) as pool, engine.lock:  # the model is busy
        futures = [pool.submit(lambda p=p: chat.invoke(p).content) for p in PROMPTS[:4]]
        while len(engine._pending) < 4:
            threading.Event().wait(0.001)
    assert [f.result() for f in futures] == expected
    assert engine.batch_sizes == {1: 4, 4: 1}  # the four waiting calls shared one loop


def test_streams_and_callbacks_stay_with_their_caller(llama_dir: Path) -> None:
    chat = ChatTransformers(
        model=str(llama_dir), batch_concurrent_calls=True, max_new_tokens=10, min_new_tokens=6
    )
    expected = [chat.invoke(p).content for p in PROMPTS[:3]]
    expected += [chat.generate_trace(p)[0].text for p in PROMPTS[3:]]
    seen: dict[int, list[str]] = {i: [] for i in range(len(PROMPTS))}

    def stream(i: int) -> str:
        return "".join(str(chunk.content) for chunk in chat.stream(PROMPTS[i]))

    def traced(i: int) -> str:
        (trace,) = chat.generate_trace(PROMPTS[i], on_token=lambda e: seen[i].append(e.piece))
        return trace.text

    texts = run_together(chat, [lambda i=i: stream(i) for i in range(3)])
    texts += run_together(chat, [lambda i=i: traced(i) for i in range(3, 6)])
    assert texts == expected
    for i in range(3, 6):
        assert "".join(seen[i]) == expected[i]


def test_a_failing_request_fails_only_its_caller(llama_dir: Path) -> None:
    chat = ChatTransformers(model=str(llama_dir), batch_concurrent_calls=True)
    model, tokenizer = chat.hf_model, chat.hf_tokenizer
    options = DecodingOptions(max_new_tokens=8, min_new_tokens=8)

    def decoder(prompt: str) -> DecodeRequest:
        return DecodeRequest(model, tokenizer, chat.encode(prompt), decoding=options)

    alone = [decode_alone(decoder(p)) for p in PROMPTS[:3]]
    broken = decoder(PROMPTS[3])
    calls = {"n": 0}
    original = broken.choose_tokens

    def fail_at_third_step(*args: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("this request's own failure")
        return original(*args)

    broken.choose_tokens = fail_at_third_step  # type: ignore[method-assign]
    decoders = [decoder(p) for p in PROMPTS[:3]]
    done = [r for r, event in decode_together(model, [*decoders, broken]) if event is None]
    assert sorted(done) == [0, 1, 2, 3]
    assert isinstance(broken.error, RuntimeError)
    for d, want in zip(decoders, alone, strict=True):
        assert d.error is None
        assert_same(d.traces, want)


def test_sampling_requests_share_one_distribution_pass(
    llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = ChatTransformers(model=str(llama_dir))
    model, tokenizer = chat.hf_model, chat.hf_tokenizer
    sampling = DecodingOptions(max_new_tokens=6, do_sample=True, temperature=0.8, top_p=0.9)

    def decoder(prompt: str, seed: int, min_new: int = 0) -> DecodeRequest:
        options = replace(sampling, seed=seed, min_new_tokens=min_new)
        return DecodeRequest(model, tokenizer, chat.encode(prompt), n=3, decoding=options)

    # the last request is still short of its min_new_tokens: it masks EOS on its own
    made = [(PROMPTS[0], 5, 0), (PROMPTS[1], 6, 0), (PROMPTS[2], 7, 0), (PROMPTS[4], 8, 4)]
    alone = [decode_alone(decoder(*m)) for m in made]
    passes: list[int] = []
    of = sampler.Distribution.of.__func__  # type: ignore[attr-defined]

    def counted(cls: type, logits: torch.Tensor, *rest: Any) -> Any:
        passes.append(logits.shape[0])
        return of(cls, logits, *rest)

    monkeypatch.setattr(sampler.Distribution, "of", classmethod(counted))
    decoders = [decoder(*m) for m in made]
    list(decode_together(model, decoders))
    for d, want in zip(decoders, alone, strict=True):
        assert_same(d.traces, want)
    assert passes[:2] == [9, 3]  # first step: three requests' 9 rows at once, then the 4th


def _sampling_decoders(chat: ChatTransformers) -> list[DecodeRequest]:
    """Three requests of three samples sharing one kind of distribution, and a fourth."""
    sampling = DecodingOptions(max_new_tokens=6, do_sample=True, temperature=0.8, top_p=0.9)
    made = [(PROMPTS[0], 5, 0), (PROMPTS[1], 6, 0), (PROMPTS[2], 7, 0), (PROMPTS[4], 8, 4)]
    return [
        DecodeRequest(
            chat.hf_model,
            chat.hf_tokenizer,
            chat.encode(prompt),
            n=3,
            decoding=replace(sampling, seed=seed, min_new_tokens=min_new),
        )
        for prompt, seed, min_new in made
    ]


def test_requests_sharing_a_distribution_draw_in_one_call(
    llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = ChatTransformers(model=str(llama_dir))
    alone = [decode_alone(d) for d in _sampling_decoders(chat)]
    draws: list[int] = []
    draw = sampler.draw_rows

    def counted(probs: torch.Tensor, generators: Any, logp: Any = None) -> Any:
        draws.append(probs.shape[0])
        return draw(probs, generators, logp)

    monkeypatch.setattr(sampler, "draw_rows", counted)
    decoders = _sampling_decoders(chat)
    list(decode_together(chat.hf_model, decoders))
    for d, want in zip(decoders, alone, strict=True):
        assert_same(d.traces, want)  # each row drew with its own generator, as alone
    assert draws[:2] == [9, 3]  # first step: three requests' 9 samples at once, then the 4th


def test_a_row_that_cannot_draw_fails_only_its_request(
    llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = ChatTransformers(model=str(llama_dir))
    alone = [decode_alone(d) for d in _sampling_decoders(chat)]
    calls = {"n": 0}
    draw = sampler.draw_rows

    def second_step_breaks_row_4(probs: torch.Tensor, generators: Any, logp: Any = None) -> Any:
        tokens, ok, logprobs = draw(probs, generators, logp)
        calls["n"] += 1
        if calls["n"] == 3:  # the shared draw of the second step (the 4th draws alone)
            ok[4] = False  # the second request's second sample
        return tokens, ok, logprobs

    monkeypatch.setattr(sampler, "draw_rows", second_step_breaks_row_4)
    decoders = _sampling_decoders(chat)
    list(decode_together(chat.hf_model, decoders))
    assert isinstance(decoders[1].error, AdaptiveRAGError)
    assert "Cannot sample rows [1]" in str(decoders[1].error)
    for i in (0, 2, 3):
        assert decoders[i].error is None
        assert_same(decoders[i].traces, alone[i])


def test_engine_hands_the_failure_to_that_caller_alone(llama_dir: Path) -> None:
    chat = ChatTransformers(
        model=str(llama_dir), batch_concurrent_calls=True, max_new_tokens=8, min_new_tokens=8
    )
    expected = [chat.invoke(p).content for p in PROMPTS[:3]]
    original = DecodeRequest.choose_tokens

    def failing(self: DecodeRequest, *args: Any) -> Any:
        if self.decoding.max_new_tokens == 7:  # the one call made with this budget
            raise RuntimeError("bad request")
        return original(self, *args)

    DecodeRequest.choose_tokens = failing  # type: ignore[method-assign]
    try:

        def ask(prompt: str) -> object:
            try:
                budget = 7 if prompt == "boom" else 8
                return chat.invoke(prompt, max_new_tokens=budget).content
            except RuntimeError as error:
                return error

        results = run_together(chat, [lambda p=p: ask(p) for p in [*PROMPTS[:3], "boom"]])
    finally:
        DecodeRequest.choose_tokens = original  # type: ignore[method-assign]
    assert results[:3] == expected
    assert isinstance(results[3], RuntimeError)


def test_a_caller_that_stops_reading_leaves_the_batch(llama_dir: Path) -> None:
    chat = ChatTransformers(
        model=str(llama_dir), batch_concurrent_calls=True, max_new_tokens=40, min_new_tokens=40
    )
    expected = chat.invoke(PROMPTS[1]).content

    def stop_early() -> str:
        stream = chat.stream(PROMPTS[0])
        first = next(stream)
        stream.close()
        return str(first.content)

    first, full = run_together(chat, [stop_early, lambda: chat.invoke(PROMPTS[1]).content])
    assert full == expected and first
    assert chat.invoke(PROMPTS[2]).content  # the engine still serves


def test_reference_forward_pass_runs_between_decoding_steps(llama_dir: Path) -> None:
    chat = ChatTransformers(
        model=str(llama_dir), batch_concurrent_calls=True, attn_implementation="sdpa"
    )
    alone = chat.forward_attention(PROMPTS[1])
    long_call = DecodingOptions(max_new_tokens=60, min_new_tokens=60)
    rows = CaptureOptions(attention=True)
    started = threading.Event()

    def generate() -> list[GenerationTrace]:
        return chat.generate_trace(
            PROMPTS[0], decoding=long_call, capture=rows, on_token=lambda e: started.set()
        )

    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(generate)
        started.wait(timeout=30)
        during = chat.forward_attention(PROMPTS[1])  # a loop is running
        traces = future.result()
    np.testing.assert_allclose(during.weights, alone.weights, atol=1e-6)
    assert_same(traces, chat.generate_trace(PROMPTS[0], decoding=long_call, capture=rows))


@pytest.mark.parametrize(
    ("arch", "kernel"),
    [("llama", "eager"), ("llama", "sdpa"), ("gpt2", "eager"), ("qwen2", "sdpa")],
)
def test_concurrent_reference_passes_share_one_batch(
    tiny_model_dirs: dict[str, Path], arch: str, kernel: str
) -> None:
    """forward_attention calls queued together run as one left-padded pass, equal alone."""
    directory = tiny_model_dirs[arch]
    chat = ChatTransformers(
        model=str(directory), batch_concurrent_calls=True, attn_implementation=kernel
    )
    alone = [chat.forward_attention(prompt, layer=0) for prompt in PROMPTS]
    long_call = DecodingOptions(max_new_tokens=60, min_new_tokens=60)
    started = threading.Event()
    with ThreadPoolExecutor(1) as pool:  # a running loop holds the side jobs until a step ends
        future = pool.submit(
            lambda: chat.generate_trace(
                PROMPTS[0], decoding=long_call, on_token=lambda e: started.set()
            )
        )
        started.wait(timeout=30)
        together = run_together(
            chat, [lambda p=prompt: chat.forward_attention(p, layer=0) for prompt in PROMPTS]
        )
        future.result()
    for got, want in zip(together, alone, strict=True):
        assert got.tokens == want.tokens and got.weights.shape == want.weights.shape
        np.testing.assert_allclose(got.weights, want.weights, atol=1e-5)
    engine = chat.scheduler
    assert engine is not None and sum(n * c for n, c in engine.side_batches.items()) >= 2


def test_capture_union_and_cover() -> None:
    attention = CaptureOptions(attention=True, attention_layer=1)
    hidden = CaptureOptions(hidden=True, hidden_layer=0, hidden_at="eos")
    union = capture_union(attention, hidden)
    assert union is not None and union.attention and union.hidden
    assert capture_covers(union, attention) and capture_covers(union, hidden)
    assert capture_covers(union, CaptureOptions())
    assert capture_union(attention, CaptureOptions(attention=True, attention_layer=0)) is None
    assert not capture_covers(attention, CaptureOptions(attention=True, attention_head_max=True))


def test_batching_can_be_turned_off(llama_dir: Path) -> None:
    chat = ChatTransformers(model=str(llama_dir), batch_concurrent_calls=False)
    texts = run_together(chat, [lambda p=p: chat.invoke(p).content for p in PROMPTS[:3]])
    assert texts == [chat.invoke(p).content for p in PROMPTS[:3]] and chat.scheduler is None
    on_cpu = ChatTransformers(model=str(llama_dir))  # default: batching on accelerators only
    assert on_cpu.batch_concurrent_calls is None and not on_cpu.batching
    on_cpu.invoke(PROMPTS[0])
    assert on_cpu.scheduler is None


@pytest.mark.parametrize("method", ["dragin", "flare", "seakr"])
def test_graph_batch_equals_invoking_one_by_one(llama_dir: Path, method: str) -> None:
    from langchain_adaptive_rag import (
        DRAGINConfig,
        FLAREConfig,
        SeaKRConfig,
        create_adaptive_rag_graph,
        create_bm25_retriever,
    )

    configs = {
        "dragin": DRAGINConfig(generate_max_length=12, theta=0.5),  # reference attention
        "flare": FLAREConfig(generate_max_length=12),
        "seakr": SeaKRConfig(generate_max_length=12, num_samples=3, hidden_layer=1, delta=-100),
    }
    chat = ChatTransformers(
        model=str(llama_dir),
        batch_concurrent_calls=True,
        min_new_tokens=4,
        attn_implementation="sdpa",
    )
    retriever = create_bm25_retriever(
        ["Blue Harbour is a 1962 film directed by Anna Berg.", "Carl Lind was born in Oslo."]
    )
    graph = create_adaptive_rag_graph(chat, retriever, method, config=configs[method])
    questions = [{"question": q} for q in ("Who directed Blue Harbour?", "Where was Carl born?")]
    questions += [{"question": "When was Anna Berg born?"}, {"question": "Who is Maria Holm?"}]
    one_by_one = [graph.invoke(q) for q in questions]
    engine = chat.scheduler
    assert engine is not None and set(engine.batch_sizes) == {1} and engine.joined == 0
    for run in (graph.batch, lambda qs: asyncio.run(graph.abatch(qs))):
        engine.batch_sizes.clear()
        engine.joined = 0
        together = run(questions)
        for got, want in zip(together, one_by_one, strict=True):
            assert got["answer"] == want["answer"]
            assert [e["doc_ids"] for e in got["retrievals"]] == [
                e["doc_ids"] for e in want["retrievals"]
            ]
            assert got["counts"] == want["counts"]
        shared = sum(n for size, n in engine.batch_sizes.items() if size > 1)
        assert shared + engine.joined > 0, engine.batch_sizes  # the runs decoded together


def test_a_request_joins_a_running_loop_after_some_steps(llama_dir: Path) -> None:
    chat = ChatTransformers(model=str(llama_dir), batch_concurrent_calls=True)
    model, tokenizer = chat.hf_model, chat.hf_tokenizer

    def decoder(prompt: str, budget: int) -> DecodeRequest:
        options = DecodingOptions(max_new_tokens=budget, min_new_tokens=budget)
        capture = CaptureOptions(attention=True, hidden=True)
        return DecodeRequest(
            model, tokenizer, chat.encode(prompt), decoding=options, capture=capture
        )

    alone = [
        decode_alone(decoder(PROMPTS[1], 20)),
        decode_alone(decoder(PROMPTS[2], 6)),
        decode_alone(decoder(PROMPTS[3], 9)),
    ]
    running = decoder(PROMPTS[1], 20)  # one request: the loop starts unpadded
    late = [decoder(PROMPTS[2], 6), decoder(PROMPTS[3], 9)]  # shorter and longer prompts
    steps = {"n": 0}

    def admit(rows: int, longest: int | None) -> list[DecodeRequest]:
        steps["n"] += 1
        return late if steps["n"] == 5 else []  # join at the fifth step boundary

    list(decode_together(model, [running], admit=admit))
    for got, want in zip([running, *late], alone, strict=True):
        assert_same(got.traces, want)


def test_close_ends_the_idle_worker_at_once(llama_dir: Path) -> None:
    chat = ChatTransformers(model=str(llama_dir), batch_concurrent_calls=True)
    three = DecodingOptions(max_new_tokens=3)
    chat.generate_trace(PROMPTS[0], decoding=three)
    engine = chat.scheduler
    assert engine is not None
    engine.linger_seconds = 60.0  # left alone, an idle worker would wait a minute
    chat.generate_trace(PROMPTS[0], decoding=three)
    worker = engine._worker
    assert worker is not None and worker.is_alive()
    start = time.monotonic()
    engine.close(timeout=30.0)
    assert not worker.is_alive() and time.monotonic() - start < 30.0  # woken, not timed out
    again = chat.generate_trace(PROMPTS[0], decoding=three)  # a new worker serves
    assert again[0].num_tokens == 3
    engine.close()


def test_close_during_a_batch_ends_the_worker_once_the_batch_is_done(llama_dir: Path) -> None:
    chat = ChatTransformers(model=str(llama_dir), batch_concurrent_calls=True)
    chat.generate_trace(PROMPTS[0], decoding=DecodingOptions(max_new_tokens=3))
    engine = chat.scheduler
    assert engine is not None
    engine.linger_seconds = 60.0  # a worker that missed the wake-up would wait a minute
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(
            chat.generate_trace, PROMPTS[1], decoding=DecodingOptions(max_new_tokens=40)
        )
        deadline = time.monotonic() + 30.0
        while not engine._looping and time.monotonic() < deadline:
            time.sleep(0.001)
        assert engine._looping  # close() comes while the worker is busy, not waiting
        worker = engine._worker
        assert worker is not None
        start = time.monotonic()
        engine.close(timeout=30.0)
        assert running.result()[0].num_tokens > 0
    assert not worker.is_alive() and time.monotonic() - start < 30.0
    engine.close()


@pytest.mark.parametrize("batching", [True, False])
def test_a_streaming_caller_gets_its_first_samples_events_only(
    llama_dir: Path, batching: bool
) -> None:
    chat = ChatTransformers(model=str(llama_dir), batch_concurrent_calls=batching)
    sampling = DecodingOptions(max_new_tokens=6, do_sample=True, seed=5)
    events: list[TokenEvent] = []
    traces = chat.generate_trace(
        PROMPTS[0], decoding=sampling, n=3, include_greedy=True, on_token=events.append
    )
    assert len(traces) == 4 and events
    assert {e.sample for e in events} == {0}
    assert [e.token_id for e in events] == [int(t) for t in traces[0].token_ids]
    plain = chat.generate_trace(PROMPTS[0], decoding=sampling, n=3, include_greedy=True)
    assert_same(plain, traces)  # streaming or not, the same traces


def _idle_worker(chat: ChatTransformers) -> threading.Thread:
    chat.generate_trace(PROMPTS[0], decoding=DecodingOptions(max_new_tokens=3))
    engine = chat.scheduler
    assert engine is not None and engine._worker is not None
    return engine._worker


def test_a_model_on_an_accelerator_keeps_its_thread(llama_dir: Path) -> None:
    """CUDA keeps per-thread state (cuDNN attention plans): a model there keeps its thread."""
    chat = ChatTransformers(model=str(llama_dir), batch_concurrent_calls=True)
    engine = chat.local_model.scheduler(chat)
    assert engine.linger() == scheduler.CPU_LINGER_SECONDS  # the CPU: a short linger
    engine.model = SimpleNamespace(device=torch.device("cuda", 0))  # type: ignore[assignment]
    assert engine.linger() == math.inf
    engine.linger_seconds = 2.0  # a value given wins, on any device
    assert engine.linger() == 2.0


def test_a_long_linger_keeps_one_thread_between_calls(
    llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scheduler, "IDLE_CHECK_SECONDS", 0.05)
    chat = ChatTransformers(model=str(llama_dir), batch_concurrent_calls=True)
    engine = chat.local_model.scheduler(chat)
    engine.linger_seconds = math.inf
    worker = _idle_worker(chat)
    time.sleep(0.4)  # eight turns of idle waiting
    assert worker.is_alive() and _idle_worker(chat) is worker  # the same thread serves
    engine.linger_seconds = 0.3  # a finite linger longer than one turn still ends
    time.sleep(1.0)
    assert not worker.is_alive() and engine._worker is None


def test_a_dropped_engine_ends_its_lingering_thread(
    llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread holds its engine (and the model) only while it works."""
    monkeypatch.setattr(scheduler, "IDLE_CHECK_SECONDS", 0.05)
    chat = ChatTransformers(model=str(llama_dir), batch_concurrent_calls=True)
    chat.local_model.scheduler(chat).linger_seconds = math.inf
    worker = _idle_worker(chat)
    dropped = weakref.ref(chat.local_model.scheduler(chat))
    del chat
    gc.collect()
    worker.join(timeout=10.0)
    assert dropped() is None and not worker.is_alive()


@pytest.mark.parametrize("seconds", [-1.0, float("nan")])
def test_a_bad_linger_is_refused(llama_dir: Path, seconds: float) -> None:
    chat = ChatTransformers(model=str(llama_dir))
    with pytest.raises(AdaptiveRAGError, match=r"linger_seconds must be >= 0.*got"):
        Scheduler(chat.hf_model, threading.RLock(), linger_seconds=seconds)


def test_a_padded_step_copies_its_tokens_and_positions_to_the_device_at_once(
    llama_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests of different prompt lengths: each step makes one tensor from lists.

    On an accelerator a tensor made from a list is a blocking copy; the step's tokens and
    their positions travel in one.
    """
    chat = ChatTransformers(model=str(llama_dir))
    greedy = DecodingOptions(max_new_tokens=6, min_new_tokens=6)
    prompts = [chat.encode(p) for p in PROMPTS[:3]]
    alone = [DecodeRequest(chat.hf_model, chat.hf_tokenizer, p, decoding=greedy) for p in prompts]
    for d in alone:
        decode_alone(d)
    made = count_tensors_from_lists(monkeypatch)
    steps: list[int] = []
    step = runner.BatchRunner._step

    def counted(self: Any, tokens: list[int]) -> None:
        steps.append(len(tokens))
        assert self.padded  # left padding: the rows' own positions are fed
        step(self, tokens)

    monkeypatch.setattr(runner.BatchRunner, "_step", counted)
    together = [
        DecodeRequest(chat.hf_model, chat.hf_tokenizer, p, decoding=greedy) for p in prompts
    ]
    list(decode_together(chat.hf_model, together))
    monkeypatch.undo()
    assert len(steps) >= 5 and made.count("_step") == len(steps)
    for d, want in zip(together, alone, strict=True):
        assert_same(d.traces, want.traces)


@pytest.mark.parametrize("family", WINDOWED_FAMILIES)
def test_a_sliding_window_loop_takes_joiners_past_its_window(
    windowed_dirs: dict[str, Path], family: str
) -> None:
    """The loop's own cache, its windowed layers masked by each row's positions, gives what
    the model's own windowed cache gives, within the window and past it, with joins: on
    Mistral (every layer windowed, sdpa's boolean masks), Gemma 2 (alternating, eager's
    additive masks), Gemma 3 (five windowed layers to one global, sdpa) and GPT-OSS
    (alternating, attention sinks, eager)."""
    chat = ChatTransformers(model=str(windowed_dirs[family]))
    model, tokenizer = chat.hf_model, chat.hf_tokenizer
    masks = ModelCapabilities.of(model).window_masks
    assert masks is not None and masks.window == 16
    assert masks.additive == (family in ("gemma2", "gpt_oss"))
    capture = CaptureOptions(attention=True, attention_head_max=True, hidden=True)

    def decoder(prompt: str, budget: int) -> DecodeRequest:
        options = DecodingOptions(max_new_tokens=budget, min_new_tokens=budget)
        return DecodeRequest(
            model, tokenizer, chat.encode(prompt), decoding=options, capture=capture
        )

    plan = [("Anna Berg", 9), ("Carl", 5), (PROMPTS[1], 6), ("Maria Holm was", 12)]
    own = replace(ModelCapabilities.of(model), window=0, window_masks=None)
    alone = [decode_alone(decoder(p, n), capabilities=own) for p, n in plan]
    running, late = decoder(*plan[0]), [decoder(*p) for p in plan[1:]]
    assert max(d.longest for d in late) > 16  # the tiny Mistral's window
    told: list[int | None] = []

    def admit(rows: int, longest: int | None) -> list[DecodeRequest]:
        told.append(longest)
        return late if len(told) == 3 else []

    list(decode_together(model, [running], admit=admit))
    assert told[0] is None and len(told) > 3  # any length joins, at the third boundary
    for got, want in zip([running, *late], alone, strict=True):
        assert_same(got.traces, want)  # head maxima too

    limited = replace(ModelCapabilities.of(model), window=16, window_masks=None)
    too_long = decoder(PROMPTS[1], 4)  # a kernel without masks: the window limits joins
    with pytest.raises(AdaptiveRAGError, match=r"may fill \d+ positions; the loop allows 16"):
        list(
            decode_together(
                model,
                [decoder(*plan[1])],
                admit=lambda rows, longest: [too_long],
                capabilities=limited,
            )
        )


@pytest.mark.parametrize("past_window", [False, True])
def test_the_engine_admits_only_requests_that_fit_a_windowed_loop(
    tiny_model_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, past_window: bool
) -> None:
    """Queued calls join while they fit the window; one past it makes the loop drain."""
    chat = ChatTransformers(
        model=str(tiny_model_dirs["mistral"]), batch_concurrent_calls=True, max_new_tokens=4
    )

    def call(text: str) -> list[int]:  # plain text: a few tokens, within the window
        return chat.generate_trace(text)[0].token_ids.tolist()

    queued = ["Carl", PROMPTS[1] if past_window else "Maria"]
    alone = [call(p) for p in ["Anna", *queued]]
    engine = chat.scheduler
    assert engine is not None
    real = scheduler.decode_together
    answers: list[list[int]] = []

    started = threading.Event()  # the first call's loop runs, alone

    def first_loop_waits(model: Any, decoders: Any, *, admit: Any, **options: Any) -> Any:
        if answers:  # later loops run as they are
            return real(model, decoders, admit=admit, **options)
        assert len(decoders) == 1
        started.set()
        deadline = time.monotonic() + 30
        while len(engine._pending) < len(queued):  # the queued calls arrive meanwhile
            assert time.monotonic() < deadline, "the calls never queued"
            time.sleep(0.001)
        joining = admit(1, 16)
        answers.append([d.longest for d in joining])
        once = iter([joining])
        return real(model, decoders, admit=lambda rows, longest: next(once, []), **options)

    monkeypatch.setattr(scheduler, "decode_together", first_loop_waits)
    engine.joined = 0
    with ThreadPoolExecutor(3) as pool:
        first = pool.submit(call, "Anna")
        assert started.wait(timeout=30), "the first call never started a loop"
        later = [pool.submit(call, p) for p in queued]
        got = [first.result()] + [f.result() for f in later]
    assert got == alone
    assert engine.joined == (0 if past_window else 2) and len(answers[0]) == engine.joined


def queued_while_busy(engine: Scheduler, main: Coroutine[Any, Any, T], calls: int) -> T:
    """Run ``main`` in an app's thread while the model is busy, until ``calls`` calls
    queue for it (then they start together); ``main``'s result."""
    with ThreadPoolExecutor(1) as app, engine.lock:
        future = app.submit(asyncio.run, main)
        deadline = time.monotonic() + 30
        while len(engine._pending) < calls:
            assert time.monotonic() < deadline, f"{len(engine._pending)} calls queued, not {calls}"
            time.sleep(0.001)
    return future.result()


def test_async_calls_wait_in_the_models_own_threads(llama_dir: Path) -> None:
    """asyncio's default executor (here 2 threads) does not bound how many async calls
    decode together: ainvoke, astream and agenerate_trace wait in the model's threads."""
    chat = ChatTransformers(
        model=str(llama_dir), batch_concurrent_calls=True, max_new_tokens=6, min_new_tokens=6
    )
    alone = [chat.invoke(p).content for p in PROMPTS]
    engine = chat.scheduler
    assert engine is not None

    async def streamed(prompt: str) -> str:
        return "".join([str(chunk.content) async for chunk in chat.astream(prompt)])

    async def traced(prompt: str) -> str:
        return (await chat.agenerate_trace([HumanMessage(prompt)]))[0].text

    async def everyone() -> list[str]:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(2))
        invoked = [chat.ainvoke(p) for p in PROMPTS[:2]]
        results = await asyncio.gather(
            *invoked, *(streamed(p) for p in PROMPTS[2:4]), *(traced(p) for p in PROMPTS[4:])
        )
        return [r if isinstance(r, str) else str(r.content) for r in results]

    engine.batch_sizes.clear()
    assert queued_while_busy(engine, everyone(), len(PROMPTS)) == alone
    assert engine.batch_sizes == {len(PROMPTS): 1}  # all six in one loop


def test_graph_abatch_runs_its_nodes_in_the_models_threads(
    llama_dir: Path,
) -> None:
    """An async graph run's sync nodes wait in the model's threads, not in the event
    loop's default executor (here 2 threads): eight runs' drafts decode in one loop."""
    from langchain_adaptive_rag import FLAREConfig, create_adaptive_rag_graph
    from langchain_adaptive_rag import create_bm25_retriever as bm25

    chat = ChatTransformers(model=str(llama_dir), batch_concurrent_calls=True)
    retriever = bm25(["Blue Harbour is a 1962 film directed by Anna Berg.", "Carl Lind."])
    config = FLAREConfig(generate_max_length=8)
    graph = create_adaptive_rag_graph(chat, retriever, "flare", config=config)
    questions = [{"question": f"Who directed film number {i}?"} for i in range(8)]
    one_by_one = [graph.invoke(q)["answer"] for q in questions]
    engine = chat.scheduler
    assert engine is not None

    async def together() -> list[dict[str, Any]]:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(2))
        return await graph.abatch(questions)  # type: ignore[arg-type]

    engine.batch_sizes.clear()
    results = queued_while_busy(engine, together(), len(questions))
    assert [r["answer"] for r in results] == one_by_one
    assert max(engine.batch_sizes) == len(questions)  # every run's draft in one loop


def test_async_graph_streams_in_the_models_threads_give_the_sync_streams(
    llama_dir: Path,
) -> None:
    """Nodes in the model's threads keep the run's context: tokens, decisions, updates."""
    from langchain_adaptive_rag import FLAREConfig, create_adaptive_rag_graph
    from langchain_adaptive_rag import create_bm25_retriever as bm25

    chat = ChatTransformers(  # no prefix cache: every run prefills alike, to the bit
        model=str(llama_dir), batch_concurrent_calls=True, min_new_tokens=4, prefix_cache_mib=0
    )
    assert chat.async_executor is not None
    retriever = bm25(["Blue Harbour is a 1962 film directed by Anna Berg.", "Carl Lind."])
    config = FLAREConfig(generate_max_length=12)
    graph = create_adaptive_rag_graph(chat, retriever, "flare", config=config)
    question = {"question": "Who directed Blue Harbour?"}
    modes = ["messages", "custom", "updates"]

    def described(mode: str, item: Any) -> object:
        if mode == "messages":
            return ("messages", type(item[0]).__name__, item[0].content, item[1]["langgraph_node"])
        if mode == "updates":  # the run's turn in ``messages`` carries random ids
            item = {node: comparable(update or {}) for node, update in item.items()}
        return (mode, repr(item))

    sync = [described(m, item) for m, item in graph.stream(question, stream_mode=modes)]

    async def streamed() -> tuple[list[object], int]:
        got = [described(m, item) async for m, item in graph.astream(question, stream_mode=modes)]
        events = graph.astream_events(question, version="v2")
        tokens = sum([e["event"] == "on_chat_model_stream" async for e in events])
        return got, tokens

    got, tokens = asyncio.run(streamed())
    for mode in modes:  # each mode's items in order (the modes interleave as they arrive)
        assert [x for x in got if x[0] == mode] == [x for x in sync if x[0] == mode]  # type: ignore[index]
    generated = [x for x in sync if x[:2] == ("messages", "AIMessageChunk")]  # type: ignore[index]
    assert tokens == len(generated)  # the run's turn comes whole from finalize, not streamed


def test_each_streaming_caller_gets_its_tokens_as_their_steps_end(llama_dir: Path) -> None:
    """Alone or with another caller, a chunk comes within a step or two of the pass that
    chose it, not when the call ends (a lone request's events were held to its end)."""
    chat = ChatTransformers(
        model=str(llama_dir), batch_concurrent_calls=True, max_new_tokens=30, min_new_tokens=30
    )
    expected = [chat.invoke(p).content for p in PROMPTS[:2]]

    def stream(prompt: str, passes: Passes) -> tuple[str, list[int]]:
        text, seen = "", []
        for chunk in chat.stream(prompt):
            text += str(chunk.content)
            seen.append(passes.decoding)
        return text, seen

    for callers in (1, 2):
        with counted(chat) as passes:
            results = run_together(chat, [lambda p=p: stream(p, passes) for p in PROMPTS[:callers]])
        for (text, seen), want in zip(results, expected, strict=False):
            assert text == want and len(seen) == 31  # the 30 tokens, then the last chunk
            late = [passes_then - index for index, passes_then in enumerate(seen[:30])]
            assert max(late) <= 3, late  # chunk i came by decoding pass i + 3


EXIT_SCRIPT = """
import atexit, sys, threading, time

def report():  # registered first, so it runs after the package's own exit handler
    alive = [t.name for t in threading.enumerate() if t.name == "adaptive-rag-decode"]
    print("alive:", alive, "freed:", Slow.freed, flush=True)

atexit.register(report)

from langchain_adaptive_rag import ChatTransformers

class Slow:
    freed = False
    def __del__(self):
        time.sleep(1.0)  # freeing the model takes a while, in the engine's thread
        Slow.freed = True

chat = ChatTransformers(model=sys.argv[1], batch_concurrent_calls=True, max_new_tokens=2)
chat.invoke("Anna")
chat.hf_model.exit_probe = Slow()
del chat  # the engine's idle thread now holds the last reference to the model
time.sleep(0.8)  # past its linger: it is freeing the model when the interpreter exits
"""


def test_the_interpreter_exit_waits_for_an_engine_thread_freeing_its_model(
    llama_dir: Path,
) -> None:
    """A worker thread still freeing tensors at shutdown aborts the process ("terminate
    called without an active exception"); exit waits for it."""
    done = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT, str(llama_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "alive: [] freed: True" in done.stdout, done.stdout


def test_a_graph_run_streams_its_messages_as_their_steps_end(llama_dir: Path) -> None:
    """``stream_mode="messages"`` of one graph run on a batching model: each token comes
    within a few decoding passes of the pass that chose it."""
    chat = ChatTransformers(model=str(llama_dir), batch_concurrent_calls=True, min_new_tokens=30)
    graph = create_fix_length_graph(
        chat,
        create_bm25_retriever(["Anna Berg was born in Oslo."]),
        config=FixLengthConfig(generate_max_length=30, fix_length=30),
        prompts=QAPrompts(exemplars=()),
    )
    question = {"question": "Where was Anna Berg born?"}
    with counted(chat) as passes:
        seen = [
            passes.decoding
            for _, meta in graph.stream(question, stream_mode="messages")
            if meta["langgraph_node"] == "continue_generation"  # then finalize's answer
        ]
    assert len(seen) == 30  # one chunk a token (a piece of a character has no text)
    late = [passes_then - index for index, passes_then in enumerate(seen)]
    assert max(late) <= 3, late
