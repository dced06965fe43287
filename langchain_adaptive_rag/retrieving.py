"""How a graph calls its retriever: retries, a time limit, and any reasonable output.

The ``retrieve`` node calls any LangChain retriever (or a retriever runnable, such as
``retriever.with_retry()``) through :func:`call_retriever`: a transient failure (a
connection error, a timeout, a server error) is retried with LangGraph's
:class:`~langgraph.types.RetryPolicy`; a call that does not return within
``timeout_seconds`` counts as failed; strings and dicts are accepted as documents. A
retrieval that finally fails is recorded in the retrieval event's note and counted in
``counts["retrieval_errors"]``, and the run continues without documents (or raises, with
``on_failure="raise"``).
"""

from __future__ import annotations

import contextvars
import math
import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from langchain_core.documents import Document
from langchain_core.runnables import Runnable
from langgraph.types import RetryPolicy

from langchain_adaptive_rag.errors import AdaptiveRAGError

__all__ = [
    "RetrievalOutcome",
    "Retriever",
    "RetrieverOptions",
    "RetrieverTimeoutError",
    "call_retriever",
    "is_transient_retriever_error",
    "to_documents",
]


Retriever = Runnable[str, list[Document]]
"""A LangChain retriever (``BaseRetriever``), or a runnable that takes the query and
returns its documents (``retriever.with_retry()``, ``retriever.with_config(...)``)."""


class RetrieverTimeoutError(TimeoutError):
    """A retriever call did not return within ``RetrieverOptions.timeout_seconds``."""


def is_transient_retriever_error(error: Exception) -> bool:
    """Whether a retriever failure is worth another attempt.

    Connection errors and timeouts are; so is whatever LangGraph's default retry rule
    retries (HTTP 5xx from ``httpx`` and ``requests``, and unknown exception types);
    programming and data errors (``ValueError``, ``TypeError``, ``KeyError``, ...) are not.

    Args:
        error: What the retriever raised.

    Returns:
        ``True`` for a transient failure.
    """
    if isinstance(error, (ConnectionError, TimeoutError)):
        return True
    if isinstance(error, AdaptiveRAGError):
        return False
    try:  # LangGraph's own rule (an internal module of LangGraph 1.x)
        from langgraph._internal._retry import default_retry_on
    except ImportError:  # a LangGraph release that moved it: the rule kept here
        return _retried_by_default(error)
    return bool(default_retry_on(error))


_NOT_TRANSIENT = (
    ValueError,
    TypeError,
    ArithmeticError,
    ImportError,
    LookupError,
    NameError,
    SyntaxError,
    RuntimeError,
    ReferenceError,
    StopIteration,
    StopAsyncIteration,
    OSError,
)
"""Exception types LangGraph 1.x's default retry rule does not retry (but connection
errors, which are ``OSError`` too)."""


def _retried_by_default(error: Exception) -> bool:
    """LangGraph 1.x's default retry rule, for a LangGraph without it where it was.

    Connection errors and HTTP 5xx responses (``httpx.HTTPStatusError``,
    ``requests.HTTPError``) are retried; programming and data errors are not, nor other
    HTTP statuses (LangGraph 1.x retries a ``requests`` error whose response is 4xx or
    missing); exception types it does not know are.
    """
    if isinstance(error, ConnectionError):
        return True
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    if type(error).__name__ in ("HTTPStatusError", "HTTPError") and isinstance(status, int):
        return 500 <= status < 600
    return not isinstance(error, _NOT_TRANSIENT)


def _default_retry() -> RetryPolicy:
    return RetryPolicy(
        initial_interval=0.5,
        backoff_factor=2.0,
        max_interval=8.0,
        max_attempts=3,
        retry_on=is_transient_retriever_error,
    )


@dataclass(frozen=True)
class RetrieverOptions:
    """How the ``retrieve`` node calls the retriever.

    Give it to a graph factory: ``create_dragin_graph(llm, retriever,
    retriever_options=RetrieverOptions(timeout_seconds=5))``.
    """

    retry: RetryPolicy = field(default_factory=_default_retry)
    """LangGraph's retry policy for one retrieval: attempts, backoff and which errors are
    retried (default: 3 attempts, 0.5 s then 1 s apart, transient errors only; see
    :func:`is_transient_retriever_error`). ``RetryPolicy(max_attempts=1)`` never retries."""
    timeout_seconds: float | None = 30.0
    """A call that has not returned by then counts as a failed (transient) attempt; the
    call itself cannot be stopped and finishes in the background. ``None``: no limit."""
    on_failure: Literal["continue", "raise"] = "continue"
    """After the last attempt: record the failure and generate without documents
    (``continue``), or fail the run (``raise``)."""

    def __post_init__(self) -> None:
        if not isinstance(self.retry, RetryPolicy):
            msg = (
                f"RetrieverOptions.retry must be a langgraph.types.RetryPolicy, got "
                f"{type(self.retry).__name__}. Fix: RetryPolicy(max_attempts=3)."
            )
            raise AdaptiveRAGError(msg)
        attempts = self.retry.max_attempts
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            msg = f"RetrieverOptions.retry.max_attempts must be an integer >= 1, got {attempts!r}."
            raise AdaptiveRAGError(msg)
        timeout = self.timeout_seconds
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            msg = (
                f"RetrieverOptions.timeout_seconds must be a positive number of seconds or "
                f"None, got {timeout!r}."
            )
            raise AdaptiveRAGError(msg)
        if self.on_failure not in ("continue", "raise"):
            msg = (
                f"RetrieverOptions.on_failure must be 'continue' or 'raise', got "
                f"{self.on_failure!r}."
            )
            raise AdaptiveRAGError(msg)


@dataclass(frozen=True)
class RetrievalOutcome:
    """What one retrieval gave."""

    documents: list[Document]
    """The documents, at most ``k``, in the retriever's order."""
    attempts: int
    """Calls made (1 without a retry)."""
    error: str = ""
    """``""``, or why the retrieval finally failed (then ``documents`` is empty)."""


def to_documents(found: object) -> list[Document]:
    """A retriever's output as Documents.

    Accepts a list (or tuple) of Documents, strings (the passage text) and mappings with
    ``page_content`` or ``text`` (and optionally ``id`` and ``metadata``).

    Args:
        found: What the retriever returned.

    Returns:
        The documents.

    Raises:
        AdaptiveRAGError: Another output, naming what was received.
    """
    if not isinstance(found, (list, tuple)):
        msg = (
            f"The retriever returned a {type(found).__name__}; expected a list of "
            "Documents (strings and dicts with 'page_content' or 'text' are accepted too)."
        )
        raise AdaptiveRAGError(msg)
    documents: list[Document] = []
    for index, item in enumerate(found):
        if isinstance(item, Document):
            documents.append(item)
        elif isinstance(item, str):
            documents.append(Document(page_content=item))
        elif isinstance(item, Mapping) and isinstance(
            item.get("page_content", item.get("text")), str
        ):
            metadata = item.get("metadata")
            identifier = item.get("id")
            documents.append(
                Document(
                    page_content=str(item.get("page_content", item.get("text"))),
                    id=None if identifier is None else str(identifier),
                    metadata=dict(metadata) if isinstance(metadata, Mapping) else {},
                )
            )
        else:
            msg = (
                f"The retriever's result {index} is a {type(item).__name__}; expected a "
                "Document, a string or a dict with 'page_content' or 'text'."
            )
            raise AdaptiveRAGError(msg)
    return documents


def _invoke(retriever: Retriever, query: str, k: int | None) -> object:
    return retriever.invoke(query, k=k) if k is not None else retriever.invoke(query)


def _invoke_within(
    retriever: Retriever, query: str, k: int | None, timeout: float | None
) -> object:
    """One call, given up after ``timeout`` seconds (run in a daemon thread then)."""
    if timeout is None:
        return _invoke(retriever, query, k)
    box: dict[str, object] = {}
    done = threading.Event()
    context = contextvars.copy_context()  # LangChain callbacks and tracing follow the call

    def run() -> None:
        try:
            box["value"] = context.run(_invoke, retriever, query, k)
        except BaseException as error:  # handed to the waiting node
            box["error"] = error
        finally:
            done.set()

    threading.Thread(target=run, name="adaptive-rag-retrieve", daemon=True).start()
    if not done.wait(timeout):
        msg = f"The retriever did not answer within {timeout:g} s (query {query[:80]!r})."
        raise RetrieverTimeoutError(msg)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


def _retries(policy: RetryPolicy, error: Exception) -> bool:
    rule = policy.retry_on
    if isinstance(rule, type):
        return isinstance(error, rule)
    if isinstance(rule, Sequence):
        return isinstance(error, tuple(rule))
    return bool(rule(error))


def call_retriever(
    retriever: Retriever,
    query: str,
    k: int,
    options: RetrieverOptions,
    *,
    passes_k: bool = False,
) -> RetrievalOutcome:
    """Retrieve up to ``k`` documents for ``query``, retrying transient failures.

    Args:
        retriever: A LangChain retriever, or a runnable that takes the query and returns
            documents (``retriever.with_retry()``, ``retriever | ...``).
        query: The query.
        k: Documents kept.
        options: Retries, time limit and what a final failure does.
        passes_k: Give ``k`` to the call (retrievers with a per-call ``k``).

    Returns:
        The documents and attempts, or the final error (with ``on_failure="continue"``).

    Raises:
        AdaptiveRAGError: The retrieval finally failed and ``on_failure`` is ``raise``.
    """
    policy = options.retry
    interval = policy.initial_interval
    attempt = 0
    while True:
        attempt += 1
        try:
            found = _invoke_within(
                retriever, query, k if passes_k else None, options.timeout_seconds
            )
            return RetrievalOutcome(to_documents(found)[:k], attempt)
        except Exception as error:
            if attempt < policy.max_attempts and _retries(policy, error):
                pause = min(interval, policy.max_interval)
                time.sleep(pause + (random.uniform(0, 1) if policy.jitter else 0.0))
                interval *= policy.backoff_factor
                continue
            message = f"retriever raised {type(error).__name__}: {error}"
            if attempt > 1:
                message += f" (after {attempt} attempts)"
            if options.on_failure == "raise":
                msg = f"Retrieval failed for query {query[:80]!r}: {message}."
                raise AdaptiveRAGError(msg) from error
            return RetrievalOutcome([], attempt, message)
