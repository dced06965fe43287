"""What the package takes from LangGraph's internal modules, and what it does without them.

The graph builder builds its nodes as LangGraph builds a node from a function (so that
async runs wait in the model's threads), which lives in LangGraph 1.x's ``_internal``
package: a LangGraph release that moves it must leave the graphs working, with plain
function nodes. The retriever's retry rule is the package's own, compared here with
LangGraph's default.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import requests
from langgraph.types import RetryPolicy

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs import _builder
from langchain_adaptive_rag.graphs.fixed import create_fix_length_graph
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.retrieving import is_transient_retriever_error, retry_rule
from langchain_adaptive_rag.testing import FakeTraceModel
from tests.helpers.outputs import comparable
from tests.helpers.scripted import QUESTION, RecordingRetriever

SCRIPT = [" Lindbergh flew in 1927.", " So the answer is 1927."]


class ThreadedModel(FakeTraceModel):
    """A scripted model with its own threads for async runs (its calls record where
    they ran)."""

    def __init__(self, executor: ThreadPoolExecutor) -> None:
        super().__init__(SCRIPT)
        self.async_executor = executor


def _run(model: ThreadedModel, *, asynchronous: bool) -> dict[str, Any]:
    graph = create_fix_length_graph(model, RecordingRetriever(), prompts=QAPrompts(exemplars=()))
    if asynchronous:
        return asyncio.run(graph.ainvoke({"question": QUESTION}))
    return graph.invoke({"question": QUESTION})


@pytest.mark.parametrize("langgraph_builder", [True, False], ids=["node-builder", "plain"])
def test_graphs_run_with_and_without_langgraphs_node_builder(
    monkeypatch: pytest.MonkeyPatch, langgraph_builder: bool
) -> None:
    if not langgraph_builder:
        monkeypatch.setattr(_builder, "_NodeRunnable", None)
    with ThreadPoolExecutor(2, thread_name_prefix="model-thread") as executor:
        sync = _run(ThreadedModel(executor), asynchronous=False)
        model = ThreadedModel(executor)
        result = _run(model, asynchronous=True)
    assert comparable(result) == comparable(sync) and result["answer"] == "1927"
    in_model_threads = [str(call["thread"]).startswith("model-thread") for call in model.calls]
    assert len(in_model_threads) == 2
    # With LangGraph's node builder, async runs wait in the model's threads; without
    # it, in the event loop's default executor.
    assert all(in_model_threads) if langgraph_builder else not any(in_model_threads)


def test_the_package_imports_and_runs_without_langgraphs_internal_modules() -> None:
    script = textwrap.dedent(
        """
        import sys
        import langgraph.graph  # LangGraph itself uses them: imported first
        sys.modules["langgraph._internal._runnable"] = None  # then importing them fails
        sys.modules["langgraph._internal._retry"] = None
        from langchain_adaptive_rag.graphs import _builder
        from langchain_adaptive_rag.retrieving import is_transient_retriever_error, retry_rule
        from tests.unit_tests.test_langgraph_internals import ThreadedModel, _run
        from concurrent.futures import ThreadPoolExecutor
        assert _builder._NodeRunnable is None
        assert is_transient_retriever_error(ConnectionError())
        assert not is_transient_retriever_error(ValueError())
        with ThreadPoolExecutor(1) as executor:
            print(_run(ThreadedModel(executor), asynchronous=True)["answer"])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1927"]


def _requests_error(status: int | None) -> requests.HTTPError:
    if status is None:
        return requests.HTTPError("no response")
    response = requests.Response()
    response.status_code = status
    return requests.HTTPError(f"{status}", response=response)


def _httpx_error(status: int) -> httpx.HTTPStatusError:
    request = httpx.Request("GET", "http://search.invalid/")
    return httpx.HTTPStatusError(
        f"{status}", request=request, response=httpx.Response(status, request=request)
    )


class UnknownError(Exception):
    """An exception type no rule knows."""


ERRORS: list[tuple[Exception, bool]] = [
    (ConnectionError("reset"), True),
    (ConnectionRefusedError("refused"), True),
    (TimeoutError("slow"), True),
    (_httpx_error(503), True),
    (_httpx_error(500), True),
    (_httpx_error(404), False),
    (_requests_error(502), True),
    (_requests_error(404), False),
    (_requests_error(None), False),
    (UnknownError("?"), True),
    (RuntimeError("bug"), False),
    (ValueError("bad"), False),
    (KeyError("k"), False),
    (IndexError("i"), False),
    (TypeError("t"), False),
    (AttributeError("a bug in the retriever"), False),
    (AssertionError("a"), False),
    (ZeroDivisionError("z"), False),
    (FileNotFoundError("f"), False),
    (AdaptiveRAGError("ours"), False),
]


def _langgraphs_differs(error: Exception) -> bool:
    """LangGraph 1.x retries a ``requests`` error whose response is 4xx or missing (it
    tests the response's truth, which is False for any status >= 400)."""
    response = getattr(error, "response", None)
    return isinstance(error, requests.HTTPError) and (response is None or response.ok is False)


@pytest.mark.parametrize(("error", "retried"), ERRORS, ids=[repr(e) for e, _ in ERRORS])
def test_the_retry_rule_and_langgraphs(error: Exception, retried: bool) -> None:
    langgraphs = RetryPolicy().retry_on  # LangGraph's default rule, as a user's policy has it
    assert is_transient_retriever_error(error) is retried
    if isinstance(error, TimeoutError):  # retried here, not by LangGraph's rule
        assert langgraphs(error) is False  # type: ignore[operator]
    elif _langgraphs_differs(error) or isinstance(error, (AttributeError, AssertionError)):
        # LangGraph retries these; here a bug in the retriever's own code is not retried
        assert langgraphs(error) is True  # type: ignore[operator]
    elif not isinstance(error, AdaptiveRAGError):
        assert langgraphs(error) is retried  # type: ignore[operator]
    # a user's policy with LangGraph's default rule retries what the package's does
    assert retry_rule(RetryPolicy(max_attempts=5))(error) is retried
