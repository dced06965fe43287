"""Exceptions raised by langchain-adaptive-rag.

Every error says what was received, what was expected and how to fix it.
"""

from __future__ import annotations

import concurrent.futures
import os

__all__ = [
    "AdaptiveRAGError",
    "AttentionUnavailableError",
    "CallCancelledError",
    "DamagedIndexError",
    "DatasetFormatError",
    "HiddenLayerError",
    "ModelServerError",
    "PromptTooLongError",
]


class AdaptiveRAGError(ValueError):
    """Base class for the package's input and configuration errors."""


class AttentionUnavailableError(AdaptiveRAGError):
    """Attention weights were requested from a model whose attention cannot give them."""

    def __init__(
        self,
        attn_implementation: str | None,
        detail: str = "",
        *,
        fix: str = "",
        served: str | None = None,
    ) -> None:
        why = detail or "its attention layer does not go through transformers' attention interface"
        fix = fix or (
            'load the model with ChatTransformers(model=..., attn_implementation="eager"), or '
            "use a method that needs no attention (FLARE, SeaKR, the fixed schedules)"
        )
        if served is not None:  # a model behind an API: no kernel to change
            msg = (
                f"Attention weights were requested, but the model is served ({served}): "
                f"{why}. Expected an in-process model. Fix: {fix}."
            )
        else:
            msg = (
                "Attention weights were requested, but the model (attn_implementation="
                f"{attn_implementation!r}) cannot give them: {why}. Expected a decoder whose "
                "attention modules call transformers' AttentionInterface (Llama, Qwen2, "
                f'Mistral, Gemma, GPT-2, ...) on any kernel, or attn_implementation="eager". '
                f"Fix: {fix}."
            )
        super().__init__(msg)


class CallCancelledError(concurrent.futures.CancelledError):
    """A model call ran for an async caller that was cancelled (it stopped waiting).

    Raised in the thread the call ran in, where no one reads it but the code that made
    the call (a graph node's later calls and retrievals stop there too); the awaiting
    task itself ends with ``asyncio.CancelledError``.
    """

    def __init__(self) -> None:
        super().__init__(
            "The async call this model call ran for was cancelled (its task stopped "
            "waiting), so the call stopped and left the batched decoding loop. Expected "
            "a caller that awaits the result; nothing to fix unless the cancellation was "
            "not meant (an asyncio.wait_for timeout too short for the call)."
        )


class DatasetFormatError(AdaptiveRAGError):
    """A dataset, corpus or qrels file does not have the expected format.

    Attributes:
        path: The file that was read.
        location: Where in the file: ``"line 7"`` (JSON lines, TSV) or ``"record 3"``
            (JSON lists); ``None`` for a problem with the file as a whole.
        field: The offending field (``"answers"``, ``"context[2].title"``), or ``None``.
        received: What was found, in words.
        expected: What was expected, in words.
    """

    def __init__(
        self,
        path: str,
        *,
        location: str | None,
        field: str | None,
        received: str,
        expected: str,
        fix: str | None = None,
    ) -> None:
        self.path = path
        self.location = location
        self.field = field
        self.received = received
        self.expected = expected
        where = path if location is None else f"{path}, {location}"
        what = "" if field is None else f"field {field!r}: "
        msg = f"{where}: {what}received {received}; expected {expected}."
        if fix is not None:
            msg += f" Fix: {fix}"
        super().__init__(msg)


class DamagedIndexError(AdaptiveRAGError):
    """A file of a saved BM25 index is not what was written (cut, overwritten, garbled).

    Attributes:
        path: The damaged file.
        problem: What is wrong with it, in words.
    """

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        msg = (
            f"BM25 index file {self.path!r} {problem}: the index is damaged. Fix: rebuild "
            "the index (adaptive-rag index CORPUS --out DIR)."
        )
        super().__init__(msg)


class HiddenLayerError(AdaptiveRAGError):
    """A layer index outside the model's decoder layers was requested."""

    def __init__(self, what: str, layer: int, num_layers: int) -> None:
        msg = (
            f"{what} layer {layer} does not exist: the model has {num_layers} decoder "
            f"layers. Expected an index in [{-num_layers}, {num_layers - 1}] "
            "(negative indexes count from the last layer)."
        )
        super().__init__(msg)


class PromptTooLongError(AdaptiveRAGError):
    """A prompt does not fit in the model's context window."""

    def __init__(self, prompt_tokens: int, max_new_tokens: int, context_length: int) -> None:
        msg = (
            f"The prompt has {prompt_tokens} tokens and up to {max_new_tokens} new tokens "
            f"were requested, but the model's context holds {context_length} positions. "
            "Fix: shorten the prompt (fewer or shorter documents, fewer exemplars) or "
            "lower max_new_tokens."
        )
        super().__init__(msg)


class ModelServerError(RuntimeError):
    """A served model's request failed: the server is down, hangs, or refused it."""

    def __init__(self, cause: BaseException, attempts: int, base_url: str | None) -> None:
        where = f"at {base_url}" if base_url else "of the model's provider"
        detail = " ".join(str(cause).split())[:300].rstrip(".") or type(cause).__name__
        msg = (
            f"The model server {where} failed after {attempts} attempt(s): "
            f"{type(cause).__name__}: {detail}. Expected a server that answers the request. "
            "Fix: check that the server runs and is reachable (and its time limit: "
            "ChatOpenAI(timeout=...)); an evaluation records the question as failed and "
            "`adaptive-rag eval ... --retry-errors` answers it again."
        )
        super().__init__(msg)
        self.cause = cause
        self.attempts = attempts
