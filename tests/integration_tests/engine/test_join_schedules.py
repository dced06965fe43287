"""Random join schedules: every request gets what it gets alone, whenever it joins.

On the five tiny architectures (grouped-query heads, Mistral's 16-token sliding window,
Gemma's scaled embeddings, GPT-2), each seed draws requests (prompts, budgets, stop
strings, samples, captures), a loop capture covering them, a prefix cache or none, room
for joins or none, and a schedule: which requests start the loop and which join at which
step boundary, which caller stops reading at which boundary, which request fails at which
of its steps, and when another forward pass of the model (a plain one, or the reference
mode's attention pass) runs between steps. Deferred attention rows are flushed at joins
and leaves, so the schedules cross those points in many orders. The reference runs
decode each request alone on the model's own cache (no joins, prefix cache or shared
prompts), computing each step's row in its own pass.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest
import torch

from langchain_adaptive_rag import ChatTransformers
from langchain_adaptive_rag.engine import attention_rows
from langchain_adaptive_rag.engine.capabilities import ModelCapabilities
from langchain_adaptive_rag.engine.hooks import CaptureHooks
from langchain_adaptive_rag.engine.prefix_cache import PrefixCache
from langchain_adaptive_rag.engine.request import DecodeRequest
from langchain_adaptive_rag.engine.runner import decode_alone, decode_together
from langchain_adaptive_rag.options import (
    CaptureOptions,
    DecodingOptions,
    HiddenPosition,
    capture_covers,
)
from tests.helpers.engine_calls import assert_same

SEEDS = int(os.environ.get("ADAPTIVE_RAG_SCHEDULE_SEEDS", "8"))
"""Schedules drawn per architecture (each about 0.2 s); set it for a wider sweep."""
TEXT = (
    "Anna Berg was born in the city of Lund , and Carl Lind directed Blue Harbour in 1962 ."
    " Question : who wrote the river song ? Answer :"
)
WORDS = tuple(TEXT.split(" "))
REFERENCE_TEXT = "Carl Lind directed Blue Harbour"
STOPS = (" the", "\n", ",", " in")
SITES: tuple[HiddenPosition, ...] = ("last", "eos", "eos_replacing_last")


@dataclass(frozen=True)
class Request:
    prompt: str
    decoding: DecodingOptions
    capture: CaptureOptions
    n: int
    include_greedy: bool


def draw_request(rng: random.Random, attention: bool, hidden: bool, short: bool) -> Request:
    """A request asking for some of the signals the loop reads (``attention``, ``hidden``).

    ``short``: a prompt of a few words and a budget of a few tokens (within the tiny
    Mistral's 16-position window).
    """
    start = rng.randrange(len(WORDS) - 2)
    prompt = " ".join(WORDS[start : start + rng.randint(1, 4 if short else 18)])
    budget = rng.randint(1, 6 if short else 14)
    sampling = rng.random() < 0.3
    decoding = DecodingOptions(
        max_new_tokens=budget,
        min_new_tokens=rng.randint(0, budget),
        stop=tuple(rng.sample(STOPS, rng.randint(0, 2))),
        do_sample=sampling,
        seed=rng.randrange(1000) if sampling else None,
        top_logprobs=rng.choice((0, 0, 2)),
    )
    wants_hidden = hidden and rng.random() < 0.6
    capture = CaptureOptions(
        attention=attention and rng.random() < 0.7,
        attention_head_max=attention and rng.random() < 0.5,
        hidden=wants_hidden,
        hidden_layer=1,
        hidden_at=rng.choice(SITES) if wants_hidden else "last",
    )
    n = rng.choice((1, 1, 2)) if sampling else 1
    return Request(prompt, decoding, capture, n, sampling and rng.random() < 0.3)


_deferring_rows = CaptureHooks.deferring_rows


@contextmanager
def _computing_rows_in_the_pass(hooks: CaptureHooks, enabled: bool) -> Iterator[bool]:
    with _deferring_rows(hooks, False) as deferred:
        yield deferred


def decoder(chat: ChatTransformers, request: Request) -> DecodeRequest:
    return DecodeRequest(
        chat.hf_model,
        chat.hf_tokenizer,
        chat.encode(request.prompt),
        n=request.n,
        include_greedy=request.include_greedy,
        decoding=request.decoding,
        capture=request.capture,
    )


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gpt2", "mistral", "gemma", "deepseek_v3"])
@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_join_schedules_give_each_request_what_it_gets_alone(
    tiny_model_dirs: dict[str, Path], arch: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    chat = ChatTransformers(model=str(tiny_model_dirs[arch]), attn_implementation="sdpa")
    model = chat.hf_model
    attention, hidden = rng.choice(((True, True), (True, False), (False, True)))
    loop_capture = CaptureOptions(
        attention=attention, attention_head_max=attention, hidden=hidden, hidden_layer=1
    )
    windowed = arch == "mistral" and rng.random() < 0.6  # requests that fit its window
    count = rng.randint(4, 7)
    requests = [draw_request(rng, attention, hidden, windowed) for _ in range(count)]
    assert all(capture_covers(loop_capture, r.capture) for r in requests)
    with monkeypatch.context() as plain:  # references on the model's own cache, one by one
        plain.setattr(CaptureHooks, "deferring_rows", _computing_rows_in_the_pass)
        own = replace(ModelCapabilities.of(model), window=0)
        alone = [decode_alone(decoder(chat, r), capabilities=own) for r in requests]

    if seed % 2:  # the deferred rows of a flush come in chunks of one to a few steps
        monkeypatch.setattr(attention_rows, "PENDING_SCORES", rng.randint(20, 200))
    decoders = [decoder(chat, r) for r in requests]
    first = rng.randint(1, 2)
    starting, waiting = decoders[:first], decoders[first:]
    joined: list[DecodeRequest] = []
    # one request's caller may stop reading at some step boundary, one may fail
    stopping = rng.randrange(len(decoders)) if rng.random() < 0.5 else None
    stop_at = rng.randint(1, 12)
    failing = rng.randrange(len(decoders)) if rng.random() < 0.5 else None
    fired = {"n": 0, "at": rng.randint(1, 6)}  # calls to choose tokens, the failing one
    if failing is not None and failing != stopping:
        _fail_at_call(decoders[failing], fired)
    boundary = {"n": 0}
    cut: list[int | None] = []  # the stopped request's tokens when it was stopped

    def admit(rows: int, longest: int | None) -> list[DecodeRequest]:
        # a last sequence decoding lets every waiting request in that fits
        count = len(waiting) if rows <= 1 else rng.choice((0, 0, 0, 1, 2))
        taken = [d for d in waiting[:count] if longest is None or d.longest <= longest]
        for d in taken:
            waiting.remove(d)
        joined.extend(taken)
        return taken

    def between() -> None:
        boundary["n"] += 1
        if stopping is not None and boundary["n"] == stop_at:
            decoders[stopping].stop_requested = True  # seen before the step's tokens
            samples = decoders[stopping].samples
            cut.extend(len(s.ids) if s.active else None for s in samples)
        use = rng.random()  # another use of the model between two steps
        if use < 0.1:  # a reference-mode pass routes the captured layer in its turn
            got = chat.forward_attention(REFERENCE_TEXT).weights
            np.testing.assert_allclose(got, reference, atol=1e-6, err_msg="between steps")
        elif use < 0.2:
            ids = torch.tensor([chat.encode(rng.choice(WORDS))], device=model.device)
            model(input_ids=ids)

    reference = chat.forward_attention(REFERENCE_TEXT).weights
    cache = PrefixCache(2**24, min_tokens=2) if rng.random() < 0.5 else None
    events = list(
        decode_together(
            model,
            starting,
            capture=loop_capture,
            admit=admit,
            between=between,
            prefix_cache=cache,
            max_rows=rng.choice((0, 8)),
        )
    )
    ran = starting + joined
    assert {r for r, event in events if event is None} == set(range(len(ran)))
    if waiting:  # the loop ended first, or ran past a window (no joins): a loop of their own
        later = decode_together(
            model, waiting, capture=loop_capture, admit=lambda rows, longest: [], between=between
        )
        list(later)
    for index, (got, want) in enumerate(zip(decoders, alone, strict=True)):
        label = f"seed {seed}, request {index}"
        if index == failing and fired["n"] >= fired["at"]:
            assert isinstance(got.error, RuntimeError) and str(got.error) == _FAILURE, label
        elif index == stopping and got.stop_requested:
            for part, whole, kept in zip(got.traces, want, cut, strict=True):
                tokens = part.token_ids.tolist()
                assert whole.token_ids.tolist()[: len(tokens)] == tokens, label
                if kept is not None:  # a sample still choosing tokens ends there
                    assert len(tokens) == kept and part.finish_reason == "stop", label
        else:
            assert got.error is None, label
            assert_same(got.traces, want, label)


_FAILURE = "a request failing at one of its steps"


def _fail_at_call(request: DecodeRequest, calls: dict[str, int]) -> None:
    """Make ``request`` fail the ``calls["at"]``-th time the loop asks it to choose tokens.

    ``calls["n"]`` counts the times it was asked.
    """
    choose = request.choose_tokens

    def failing(*args: object) -> object:
        calls["n"] += 1
        if calls["n"] == calls["at"]:
            raise RuntimeError(_FAILURE)
        return choose(*args)  # type: ignore[arg-type]

    request.choose_tokens = failing  # type: ignore[method-assign]
