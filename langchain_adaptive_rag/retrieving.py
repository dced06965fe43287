"""How a graph calls its retriever: retries, time limits, and any reasonable output.

The ``retrieve`` node calls any LangChain retriever (or a retriever runnable, such as
``retriever.with_retry()``) through [`call_retriever`][]: a transient failure (a
connection error, a timeout, a server error) is retried with LangGraph's
``RetryPolicy``; a call that does not return within ``timeout_seconds`` counts as a
failed attempt, and the attempts and pauses of one retrieval stop at
``deadline_seconds``; strings and dicts are accepted as documents. A retrieval that
finally fails is recorded in the retrieval event's note and counted in
``counts["retrieval_errors"]``, and the run continues without documents (or raises, with
``on_failure="raise"``); after ``max_failed_retrievals`` failures in one run, its later
retrievals are not attempted. A call that timed out cannot be stopped: it finishes in a
background thread, and at most ``max_abandoned_calls`` of them run at once per graph.
"""

from __future__ import annotations

import contextvars
import inspect
import math
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from langchain_core.documents import Document
from langchain_core.runnables import Runnable
from langgraph.types import RetryPolicy

from langchain_adaptive_rag.errors import AdaptiveRAGError

__all__ = [
    "AbandonedCalls",
    "QuestionRetrieval",
    "RetrievalOutcome",
    "Retriever",
    "RetrieverOptions",
    "RetrieverTimeoutError",
    "call_retriever",
    "is_transient_retriever_error",
    "retry_rule",
    "takes_k",
    "to_documents",
]


Retriever = Runnable[str, list[Document]]
"""A LangChain retriever (``BaseRetriever``), or a runnable that takes the query and
returns its documents (``retriever.with_retry()``, ``retriever.with_config(...)``)."""


def takes_k(retriever: object) -> bool:
    """Whether the retriever (or the retriever a runnable wraps) takes a per-call ``k``.

    LangChain hands ``invoke``'s keyword arguments to the retriever's
    ``_get_relevant_documents``: one that names a ``k`` parameter (this package's BM25
    and Elasticsearch retrievers, or a user's own) returns as many documents as a
    method's ``retrieve_topk`` asks for. Others are called with the query alone and
    return what they are configured to (``search_kwargs={"k": ...}``). Wrappers such as
    ``retriever.with_retry()`` are looked through (their ``bound``).

    Args:
        retriever: The graph's retriever.

    Returns:
        Whether the graph passes ``k`` to its calls.
    """
    while retriever is not None:
        method = getattr(retriever, "_get_relevant_documents", None)
        if callable(method):
            parameter = inspect.signature(method).parameters.get("k")
            return parameter is not None and parameter.kind in (
                inspect.Parameter.KEYWORD_ONLY,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
            )
        retriever = getattr(retriever, "bound", None)
    return False


class RetrieverTimeoutError(TimeoutError):
    """A retriever call did not return within ``RetrieverOptions.timeout_seconds``."""


_NOT_TRANSIENT = (
    ValueError,
    TypeError,
    AttributeError,
    AssertionError,
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
"""Exception types not retried (but connection errors and timeouts, which are ``OSError``
too): the list of LangGraph 1.x's default rule, and the errors of a bug in the
retriever's own code (``AttributeError``, ``AssertionError``)."""


def is_transient_retriever_error(error: Exception) -> bool:
    """Whether a retriever failure is worth another attempt.

    Connection errors, timeouts and HTTP 5xx responses (``httpx.HTTPStatusError``,
    ``requests.HTTPError``) are; so are exception types no rule knows (a client library's
    own). Programming and data errors (``ValueError``, ``TypeError``, ``KeyError``,
    ``AttributeError``, ``NameError``, ...), other HTTP statuses and the package's own
    errors are not. This is LangGraph 1.x's
    default rule, except that a ``requests`` error with a 4xx response or none, an
    ``AttributeError`` and an ``AssertionError`` (a bug in the retriever's own code) are
    not retried (LangGraph's retries them).

    Args:
        error: What the retriever raised.

    Returns:
        ``True`` for a transient failure.
    """
    if isinstance(error, (ConnectionError, TimeoutError)):
        return True
    if isinstance(error, AdaptiveRAGError):
        return False
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    if type(error).__name__ in ("HTTPStatusError", "HTTPError"):
        return isinstance(status, int) and 500 <= status < 600
    return not isinstance(error, _NOT_TRANSIENT)


_LANGGRAPH_DEFAULT_RULE = RetryPolicy().retry_on
"""The ``retry_on`` a ``RetryPolicy`` built without one carries (LangGraph's default)."""


def retry_rule(policy: RetryPolicy) -> Callable[[Exception], bool]:
    """Which failures ``policy`` retries for a retriever.

    A policy that keeps LangGraph's default ``retry_on`` (``RetryPolicy(max_attempts=5)``)
    retries the transient retriever failures of [`is_transient_retriever_error`][],
    timeouts included (LangGraph's own default does not retry a ``TimeoutError``, an
    ``OSError``); a ``retry_on`` of the user's own (a type, types, or a function) decides
    alone.

    Args:
        policy: The retry policy of ``RetrieverOptions.retry``.

    Returns:
        A function from the raised exception to whether to retry.
    """
    rule = policy.retry_on
    if rule is _LANGGRAPH_DEFAULT_RULE:
        return is_transient_retriever_error
    if isinstance(rule, type):
        kind: type[BaseException] = rule
        return lambda error: isinstance(error, kind)
    if isinstance(rule, Sequence):
        kinds = tuple(rule)
        return lambda error: isinstance(error, kinds)
    return lambda error: bool(rule(error))


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
    retried (default: 3 attempts, 0.5 s then 1 s apart, transient errors only). A policy
    with LangGraph's default ``retry_on`` retries the transient retriever errors
    (connection errors, timeouts, HTTP 5xx; see [`retry_rule`][]); a ``retry_on`` of your
    own decides alone. ``RetryPolicy(max_attempts=1)`` never retries."""
    timeout_seconds: float | None = 30.0
    """A call that has not returned by then counts as a failed (transient) attempt; the
    call itself cannot be stopped and finishes in a background thread. ``None``: no
    limit."""
    deadline_seconds: float | None = 60.0
    """The most one retrieval may take, its attempts and the pauses between them
    together: an attempt gets what is left of it (or ``timeout_seconds``, if less), and
    no attempt starts after it. ``None``: attempts alone bound it."""
    max_failed_retrievals: int | None = 2
    """Once this many retrievals of one run (one question) have finally failed, its
    later retrievals are not attempted and are recorded as failed, so a dead backend
    costs a question at most this many deadlines. ``None``: every retrieval is tried."""
    max_abandoned_calls: int = 4
    """Timed-out calls still running in the background that one graph tolerates; beyond
    them an attempt fails at once instead of starting another thread."""
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
        for name in ("timeout_seconds", "deadline_seconds"):
            seconds = getattr(self, name)
            if seconds is not None and (
                isinstance(seconds, bool)
                or not isinstance(seconds, (int, float))
                or not math.isfinite(seconds)
                or seconds <= 0
            ):
                msg = (
                    f"RetrieverOptions.{name} must be a positive number of seconds or "
                    f"None, got {seconds!r}."
                )
                raise AdaptiveRAGError(msg)
        for name, lowest in (("max_failed_retrievals", 1), ("max_abandoned_calls", 0)):
            value = getattr(self, name)
            if value is None and name == "max_failed_retrievals":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
                msg = f"RetrieverOptions.{name} must be an integer >= {lowest}, got {value!r}."
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


class AbandonedCalls:
    """The timed-out retriever calls of one graph that are still running.

    A call cannot be stopped once started; when its attempt times out it goes on in its
    thread and counts here until it returns. Past ``limit`` of them, an attempt fails
    at once (a [`RetrieverTimeoutError`][]) instead of starting one more thread.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._running = 0
        self._lock = threading.Lock()

    @property
    def running(self) -> int:
        """Timed-out calls still running."""
        with self._lock:
            return self._running

    def add(self) -> None:
        """Count a call that just timed out."""
        with self._lock:
            self._running += 1

    def finished(self) -> None:
        """Uncount a timed-out call that returned."""
        with self._lock:
            self._running -= 1


def _invoke_within(
    retriever: Retriever,
    query: str,
    k: int | None,
    timeout: float | None,
    abandoned: AbandonedCalls,
) -> object:
    """One call, given up after ``timeout`` seconds (it runs in a daemon thread then)."""
    if timeout is None:
        return _invoke(retriever, query, k)
    if abandoned.running >= abandoned.limit:
        msg = (
            f"{abandoned.running} earlier calls of this retriever timed out and are still "
            f"running (RetrieverOptions.max_abandoned_calls={abandoned.limit}); no new call "
            f"is started (query {query[:80]!r})."
        )
        raise RetrieverTimeoutError(msg)
    box: dict[str, object] = {}
    done = threading.Event()
    lock = threading.Lock()
    context = contextvars.copy_context()  # LangChain callbacks and tracing follow the call

    def run() -> None:
        try:
            box["value"] = context.run(_invoke, retriever, query, k)
        except BaseException as error:  # handed to the waiting node
            box["error"] = error
        finally:
            with lock:
                done.set()
                if box.get("abandoned"):
                    abandoned.finished()

    threading.Thread(target=run, name="adaptive-rag-retrieve", daemon=True).start()
    if not done.wait(timeout):
        with lock:
            if not done.is_set():
                box["abandoned"] = True
                abandoned.add()
        if box.get("abandoned"):
            msg = f"The retriever did not answer within {timeout:g} s (query {query[:80]!r})."
            raise RetrieverTimeoutError(msg)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


def call_retriever(
    retriever: Retriever,
    query: str,
    k: int,
    options: RetrieverOptions,
    *,
    passes_k: bool = False,
    abandoned: AbandonedCalls | None = None,
) -> RetrievalOutcome:
    """Retrieve up to ``k`` documents for ``query``, retrying transient failures.

    Args:
        retriever: A LangChain retriever, or a runnable that takes the query and returns
            documents (``retriever.with_retry()``, ``retriever | ...``).
        query: The query.
        k: Documents kept.
        options: Retries, time limits and what a final failure does.
        passes_k: Give ``k`` to the call (retrievers with a per-call ``k``).
        abandoned: The timed-out calls still running, shared by the calls of one graph
            (default: a count of this retrieval's own).

    Returns:
        The documents and attempts, or the final error (with ``on_failure="continue"``).

    Raises:
        AdaptiveRAGError: The retrieval finally failed and ``on_failure`` is ``raise``.
    """
    policy = options.retry
    retries = retry_rule(policy)
    pending = abandoned if abandoned is not None else AbandonedCalls(options.max_abandoned_calls)
    deadline = (
        None if options.deadline_seconds is None else time.monotonic() + options.deadline_seconds
    )
    interval = policy.initial_interval
    attempt = 0
    while True:
        attempt += 1
        timeout = options.timeout_seconds
        if deadline is not None:
            left = max(deadline - time.monotonic(), 1e-3)
            timeout = left if timeout is None else min(timeout, left)
        try:
            found = _invoke_within(retriever, query, k if passes_k else None, timeout, pending)
            return RetrievalOutcome(to_documents(found)[:k], attempt)
        except Exception as error:
            pause = min(interval, policy.max_interval)
            pause += random.uniform(0, 1) if policy.jitter else 0.0
            wanted = attempt < policy.max_attempts and retries(error)
            in_time = deadline is None or time.monotonic() + pause < deadline
            if wanted and in_time:
                time.sleep(pause)
                interval *= policy.backoff_factor
                continue
            message = f"retriever raised {type(error).__name__}: {error}"
            if attempt > 1:
                message += f" (after {attempt} attempts)"
            if wanted:
                message += f" (no time left for another in its {options.deadline_seconds:g} s)"
            if options.on_failure == "raise":
                msg = f"Retrieval failed for query {query[:80]!r}: {message}."
                raise AdaptiveRAGError(msg) from error
            return RetrievalOutcome([], attempt, message)


@dataclass(frozen=True)
class QuestionRetrieval:
    """What one retrieval of a question found, and why it found nothing."""

    documents: list[Document]
    """The documents, at most ``k``."""
    note: str
    """``""``, or what the run should know: a blank query, a final failure, a retriever
    not called after too many failures, no documents."""
    failed: bool
    """Whether it counts as a failed retrieval (``counts["retrieval_errors"]``)."""


class QuestionRetriever:
    """A graph's retriever calls, with the rules every method's retrievals follow.

    A blank query finds nothing without a call; once ``max_failed_retrievals`` of a
    question's retrievals have failed, its later ones are not attempted (and count as
    failed); otherwise [`call_retriever`][] retries and times out as ``options`` say.
    Timed-out calls still running are shared by the graph's runs.
    """

    def __init__(self, retriever: Retriever, options: RetrieverOptions) -> None:
        """Keep the retriever and its options.

        Args:
            retriever: Any LangChain retriever.
            options: Retries, time limits and failure handling.
        """
        self.retriever = retriever
        self.options = options
        self.passes_k = takes_k(retriever)
        self.abandoned = AbandonedCalls(options.max_abandoned_calls)

    def retrieve(self, query: str, k: int, failed_before: int) -> QuestionRetrieval:
        """One retrieval of a question.

        Args:
            query: The query.
            k: Documents kept.
            failed_before: The question's retrievals that failed so far.

        Returns:
            The documents, the note and whether it failed.

        Raises:
            AdaptiveRAGError: The retrieval finally failed and ``on_failure`` is ``raise``.
        """
        give_up = self.options.max_failed_retrievals
        if not query.strip():  # a blank query (reference FLARE, DRAGIN): nothing to find
            return QuestionRetrieval([], "blank query: nothing retrieved", failed=False)
        if give_up is not None and failed_before >= give_up:
            note = (
                f"retriever not called: {give_up} retrievals of this question failed "
                f"already (RetrieverOptions.max_failed_retrievals={give_up})"
            )
            return QuestionRetrieval([], note, failed=True)
        outcome = call_retriever(
            self.retriever,
            query,
            k,
            self.options,
            passes_k=self.passes_k,
            abandoned=self.abandoned,
        )
        note = outcome.error or ("" if outcome.documents else "retriever returned no documents")
        return QuestionRetrieval(outcome.documents, note, failed=bool(outcome.error))
