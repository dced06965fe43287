"""Test helper: the engine tests' prompts, calls started at once, and traces that agree."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from langchain_adaptive_rag import ChatTransformers, GenerationTrace

__all__ = ["ATOL", "PROMPTS", "assert_same", "run_together"]

ATOL = 1e-4
"""How far a call's signals may be from the same call's made alone."""
PROMPTS = [
    "Anna Berg was born in",
    "Question: who directed the film Blue Harbour in 1962 and where?\nAnswer:",
    "Carl",
    "The river Seine flows through Paris, the capital of France, and then",
    "Maria Holm",
    "Question: In which city was Carl Lind born?\nAnswer:",
]
"""Six prompts of different lengths that the engine tests decode alone and together."""


def assert_same(got: list[GenerationTrace], want: list[GenerationTrace], label: str = "") -> None:
    """The traces' tokens and text are equal; their signals agree to ATOL."""
    assert len(got) == len(want), label
    for a, b in zip(got, want, strict=True):
        assert a.token_ids.tolist() == b.token_ids.tolist(), label
        assert (a.text, a.finish_reason) == (b.text, b.finish_reason), label
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=ATOL, err_msg=label)
        np.testing.assert_allclose(a.entropies, b.entropies, atol=ATOL, err_msg=label)
        for name in ("attention", "attention_head_max", "hidden", "top_logprobs"):
            x, y = getattr(a, name), getattr(b, name)
            assert (x is None) == (y is None), f"{label}: {name}"
            if x is not None:
                np.testing.assert_allclose(x, y, atol=ATOL, err_msg=f"{label}: {name}")


def run_together(chat: ChatTransformers, calls: list[Callable[[], Any]]) -> list[Any]:
    """Start every call at once from its own thread."""
    barrier = threading.Barrier(len(calls))

    def start(call: Callable[[], Any]) -> Any:
        barrier.wait()
        return call()

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(start, calls))
