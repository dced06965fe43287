"""Test helper: a model's forward passes counted, each slowed down so that calls overlap."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from langchain_adaptive_rag import ChatTransformers

__all__ = ["STEP_SECONDS", "Passes", "counted"]

STEP_SECONDS = 0.005
"""How long each forward pass is slowed by."""


class Passes:
    """Counts the model's forward passes (prefills apart), each slowed by STEP_SECONDS."""

    def __init__(self) -> None:
        self.decoding = 0
        self.prefills = 0

    def __call__(self, module: Any, args: Any, kwargs: dict[str, Any], output: Any) -> None:
        ids = kwargs.get("input_ids")
        if ids is not None and ids.shape[1] > 1:
            self.prefills += 1
        else:
            self.decoding += 1
        time.sleep(STEP_SECONDS)


@contextmanager
def counted(chat: ChatTransformers) -> Iterator[Passes]:
    """Count ``chat``'s forward passes while the block runs."""
    passes = Passes()
    handle = chat.hf_model.register_forward_hook(passes, with_kwargs=True)
    try:
        yield passes
    finally:
        handle.remove()
