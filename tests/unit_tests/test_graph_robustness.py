"""What a hostile run finds in a graph: bad retrievers, bad inputs, bad configs, strict
checkpoints; and the typed decision record every method streams."""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.retrievers import BaseRetriever
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import RetryPolicy
from pydantic import Field

from langchain_adaptive_rag import RetrieverOptions
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs import AVAILABLE_METHODS, create_adaptive_rag_graph
from langchain_adaptive_rag.graphs.dragin import DRAGINConfig, create_dragin_graph
from langchain_adaptive_rag.graphs.fixed import (
    FixLengthConfig,
    create_fix_length_graph,
    create_single_round_graph,
)
from langchain_adaptive_rag.graphs.reflection import CONTROL_TOKENS
from langchain_adaptive_rag.graphs.seakr import SeaKRConfig
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.retrieving import (
    RetrieverTimeoutError,
    is_transient_retriever_error,
    retry_rule,
    to_documents,
)
from langchain_adaptive_rag.state import RetrievalDecision
from langchain_adaptive_rag.testing import FakeTraceModel
from tests.helpers import dragin_script
from tests.helpers.agent_model import ScriptedAgentModel, call, reply
from tests.helpers.scripted import PASSAGES, QUESTION, RecordingRetriever

NO_SHOTS = QAPrompts(exemplars=(), followup_query="as_asked")  # scripts hold no rewrite
FAST = RetryPolicy(initial_interval=0.0, jitter=False)
ANSWER = " So the answer is 1931."


class FlakyRetriever(BaseRetriever):
    """Raises ``error`` on the first ``failures`` calls, then returns ``result``."""

    failures: int = 0
    error: Exception = Field(default_factory=lambda: ConnectionError("reset by peer"))
    result: Any = None
    delay: float = 0.0
    calls: int = 0

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        if self.calls <= self.failures:
            raise self.error
        if self.result is not None:
            return self.result  # type: ignore[no-any-return]
        return [Document(id=f"p{i}", page_content=t) for i, t in enumerate(PASSAGES)]


def _single_round(retriever: Any, options: RetrieverOptions | None = None) -> dict[str, Any]:
    graph = create_single_round_graph(
        FakeTraceModel([ANSWER]),
        retriever,
        prompts=NO_SHOTS,
        retriever_options=options or RetrieverOptions(retry=FAST),
    )
    return graph.invoke({"question": QUESTION})


# -- retrievers ---------------------------------------------------------------------------


def test_a_transient_failure_is_retried_until_it_succeeds() -> None:
    retriever = FlakyRetriever(failures=2)
    result = _single_round(retriever)
    (event,) = result["retrievals"]
    assert retriever.calls == 3 and event["doc_ids"] == ["p0", "p1", "p2"]
    assert event["note"] == "" and result["counts"]["retrieval_errors"] == 0


def test_a_failure_that_persists_is_counted_and_the_run_goes_on() -> None:
    retriever = FlakyRetriever(failures=10)
    result = _single_round(retriever, RetrieverOptions(retry=FAST._replace(max_attempts=4)))
    (event,) = result["retrievals"]
    assert retriever.calls == 4 and event["doc_ids"] == []
    assert event["note"] == "retriever raised ConnectionError: reset by peer (after 4 attempts)"
    assert result["counts"]["retrieval_errors"] == 1 and result["answer"] == "1931"


def test_a_programming_error_is_not_retried() -> None:
    retriever = FlakyRetriever(failures=10, error=ValueError("bad index"))
    result = _single_round(retriever)
    assert retriever.calls == 1
    assert result["retrievals"][0]["note"] == "retriever raised ValueError: bad index"
    assert is_transient_retriever_error(TimeoutError()) and is_transient_retriever_error(
        ConnectionError()
    )
    assert not is_transient_retriever_error(KeyError("x"))


@pytest.mark.parametrize(
    "error",
    [AttributeError("'Index' object has no attribute 'search'"), NameError("x"), TypeError("t")],
    ids=lambda e: type(e).__name__,
)
def test_a_bug_in_the_retrievers_own_code_is_not_retried_and_shows(
    error: Exception, caplog: pytest.LogCaptureFixture
) -> None:
    retriever = FlakyRetriever(failures=10, error=error)
    with caplog.at_level(logging.WARNING, logger="langchain_adaptive_rag"):
        result = _single_round(retriever)
    assert retriever.calls == 1  # a bug, not a transient failure
    note = f"retriever raised {type(error).__name__}: {error}"
    assert result["retrievals"][0]["note"] == note
    warned = [r for r in caplog.records if r.name.startswith("langchain_adaptive_rag")]
    assert len(warned) == 1 and warned[0].levelno == logging.WARNING
    assert note in warned[0].getMessage() and "on_failure='raise'" in warned[0].getMessage()
    reply = result["messages"][-1].additional_kwargs
    assert reply["retrieval_errors"] == 1 and reply["retrieval_failures"] == [note]


def test_a_run_without_failures_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="langchain_adaptive_rag"):
        result = _single_round(FlakyRetriever())
    assert not [r for r in caplog.records if r.name.startswith("langchain_adaptive_rag")]
    reply = result["messages"][-1].additional_kwargs
    assert reply["retrieval_errors"] == 0 and reply["retrieval_failures"] == []


def test_on_failure_raise_fails_the_run() -> None:
    options = RetrieverOptions(retry=FAST._replace(max_attempts=1), on_failure="raise")
    with pytest.raises(AdaptiveRAGError, match=r"Retrieval failed for query .*ConnectionError"):
        _single_round(FlakyRetriever(failures=1), options)


def test_a_hanging_retriever_times_out() -> None:
    options = RetrieverOptions(retry=FAST._replace(max_attempts=1), timeout_seconds=0.2)
    start = time.perf_counter()
    result = _single_round(FlakyRetriever(delay=10.0), options)
    assert time.perf_counter() - start < 8.0  # the call's time limit, not the retriever's 10 s
    note = result["retrievals"][0]["note"]
    assert note.startswith("retriever raised RetrieverTimeoutError: The retriever did not")
    assert "within 0.2 s" in note and result["counts"]["retrieval_errors"] == 1


class BlockedRetriever(BaseRetriever):
    """Hangs until ``release`` is set; counts its calls."""

    release: Any = Field(default_factory=threading.Event)
    calls: int = 0

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        self.calls += 1
        self.release.wait(30)
        return []


def _retrieve_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "adaptive-rag-retrieve"]


def test_a_users_retry_policy_retries_timeouts() -> None:
    # RetryPolicy() carries LangGraph's default rule, which does not retry TimeoutError
    assert not RetryPolicy().retry_on(TimeoutError())  # type: ignore[operator]
    retriever = BlockedRetriever()
    options = RetrieverOptions(
        retry=RetryPolicy(max_attempts=2, jitter=False, initial_interval=0.0), timeout_seconds=0.2
    )
    try:
        result = _single_round(retriever, options)
    finally:
        retriever.release.set()
    assert retriever.calls == 2
    note = result["retrievals"][0]["note"]
    assert (
        note.startswith("retriever raised RetrieverTimeoutError") and "(after 2 attempts)" in note
    )
    assert retry_rule(options.retry)(RetrieverTimeoutError()) is True
    # a rule of the user's own decides alone
    own = RetryPolicy(max_attempts=3, retry_on=ConnectionError)
    assert retry_rule(own)(RetrieverTimeoutError()) is False
    assert retry_rule(own)(ConnectionError()) is True


def test_one_retrieval_stops_at_its_deadline() -> None:
    retriever = BlockedRetriever()
    options = RetrieverOptions(
        retry=FAST._replace(max_attempts=50),
        timeout_seconds=0.3,
        deadline_seconds=1.0,
        max_abandoned_calls=50,
    )
    start = time.perf_counter()
    try:
        result = _single_round(retriever, options)
    finally:
        retriever.release.set()
    elapsed = time.perf_counter() - start
    assert elapsed < 2.5, elapsed  # 50 attempts of 0.3 s would take 15 s
    assert 3 <= retriever.calls <= 5
    note = result["retrievals"][0]["note"]
    assert "no time left for another in its 1 s" in note
    with pytest.raises(AdaptiveRAGError, match="deadline_seconds must be a positive number"):
        RetrieverOptions(deadline_seconds=-1)


def test_timed_out_calls_keep_at_most_max_abandoned_calls_threads() -> None:
    retriever = BlockedRetriever()
    before = set(threading.enumerate())
    options = RetrieverOptions(
        retry=FAST._replace(max_attempts=6), timeout_seconds=0.1, max_abandoned_calls=2
    )
    try:
        result = _single_round(retriever, options)
        assert retriever.calls == 2  # attempts 3 to 6 start no thread
        started = [t for t in _retrieve_threads() if t not in before]
        assert len(started) == 2 and all(t.is_alive() for t in started)
        note = result["retrievals"][0]["note"]
        assert "2 earlier calls of this retriever timed out and are still running" in note
    finally:
        retriever.release.set()
    for thread in started:
        thread.join(timeout=5)
    assert not any(t.is_alive() for t in started)  # the calls returned, their threads ended


SIX_CHUNKS = [" a b c", " d e f", " g h i", " j k l", " So the answer", " is 1931."]


def test_a_dead_backend_costs_a_question_at_most_max_failed_retrievals() -> None:
    model = FakeTraceModel(SIX_CHUNKS)
    retriever = FlakyRetriever(failures=100)
    graph = create_fix_length_graph(
        model,
        retriever,
        config=FixLengthConfig(fix_length=3, generate_max_length=64),
        prompts=NO_SHOTS,
        retriever_options=RetrieverOptions(retry=FAST._replace(max_attempts=2)),
    )
    result = graph.invoke({"question": QUESTION})
    notes = [e["note"] for e in result["retrievals"]]
    assert len(notes) == 6 and retriever.calls == 4  # 2 retrievals of 2 attempts each
    assert all(n.startswith("retriever raised ConnectionError") for n in notes[:2])
    assert all(n.startswith("retriever not called: 2 retrievals") for n in notes[2:])
    assert result["counts"]["retrieval_errors"] == 6 and result["answer"] == "1931"
    unlimited = RetrieverOptions(retry=FAST._replace(max_attempts=1), max_failed_retrievals=None)
    model = FakeTraceModel(SIX_CHUNKS)
    retriever = FlakyRetriever(failures=100)
    create_fix_length_graph(
        model,
        retriever,
        config=FixLengthConfig(fix_length=3, generate_max_length=64),
        prompts=NO_SHOTS,
        retriever_options=unlimited,
    ).invoke({"question": QUESTION})
    assert retriever.calls == 6


def test_a_retriever_wrapped_with_retry_is_accepted() -> None:
    retriever = FlakyRetriever(failures=1)
    wrapped = retriever.with_retry(stop_after_attempt=2, retry_if_exception_type=(ConnectionError,))
    no_retry = RetrieverOptions(retry=FAST._replace(max_attempts=1))
    result = _single_round(wrapped, no_retry)
    assert retriever.calls == 2 and result["retrievals"][0]["doc_ids"] == ["p0", "p1", "p2"]


def test_strings_and_dicts_are_documents() -> None:
    retriever = FlakyRetriever(result=["plain text", {"text": "a dict", "id": "d7"}])
    (event,) = _single_round(retriever)["retrievals"]
    assert event["doc_texts"] == ["plain text", "a dict"]
    assert event["doc_ids"] == ["result-0", "d7"]
    doc = to_documents([{"page_content": "x", "metadata": {"title": "T"}}])[0]
    assert doc.page_content == "x" and doc.metadata == {"title": "T"}


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ("one string", "returned a str; expected a list of Documents"),
        ([3], "result 0 is a int; expected a Document"),
        ([{"title": "no text"}], "result 0 is a dict; expected a Document"),
    ],
)
def test_another_output_is_a_named_failure(output: object, message: str) -> None:
    with pytest.raises(AdaptiveRAGError, match=message):
        to_documents(output)
    result = _single_round(FlakyRetriever(result=output))
    assert message in result["retrievals"][0]["note"]
    assert result["counts"]["retrieval_errors"] == 1


def test_retriever_options_are_checked() -> None:
    with pytest.raises(AdaptiveRAGError, match="timeout_seconds must be a positive number"):
        RetrieverOptions(timeout_seconds=0)
    with pytest.raises(AdaptiveRAGError, match="max_attempts must be an integer >= 1, got 0"):
        RetrieverOptions(retry=RetryPolicy(max_attempts=0))
    with pytest.raises(AdaptiveRAGError, match="retriever must be a LangChain retriever"):
        create_single_round_graph(FakeTraceModel([]), "not a retriever")  # type: ignore[arg-type]


# -- inputs and configs -------------------------------------------------------------------


def test_a_question_with_a_lone_surrogate_is_refused() -> None:
    graph = create_single_round_graph(FakeTraceModel([ANSWER]), RecordingRetriever())
    with pytest.raises(AdaptiveRAGError, match=r"'\\udce9' at position 3 \(a lone surrogate"):
        graph.invoke({"question": "Caf\udce9 owner?"})


@pytest.mark.parametrize(
    ("history", "received"),
    [("hello", "str"), ([HumanMessage("hi"), "hello"], "['HumanMessage', 'str']")],
)
def test_a_wrong_chat_history_is_refused(history: object, received: str) -> None:
    graph = create_single_round_graph(FakeTraceModel([ANSWER]), RecordingRetriever())
    expected = re.escape(f"chat_history of {received}. Expected a list")
    with pytest.raises(AdaptiveRAGError, match=expected):
        graph.invoke({"question": QUESTION, "chat_history": history})


def test_a_chat_history_of_messages_is_used() -> None:
    model = FakeTraceModel([ANSWER])
    graph = create_single_round_graph(model, RecordingRetriever(), prompts=NO_SHOTS)
    history = [HumanMessage("Who directed it?"), AIMessage("Anna Berg.")]
    graph.invoke({"question": QUESTION, "chat_history": history})
    assert "Question: Who directed it?\nAnswer: Anna Berg.\n" in model.prompts[0]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("generate_max_length", True, "an integer \\(not a bool\\)"),
        ("generate_max_length", 64.0, "an integer \\(not a bool\\)"),
        ("retrieve_topk", "3", "an integer \\(not a bool\\)"),
        ("theta", math.nan, "a real number \\(not a bool, not NaN\\)"),
        ("theta", "1.0", "a real number \\(not a bool, not NaN\\)"),
        ("mode", "official", "one of 'reference', 'paper'"),
        ("spacy_model", 3, "a string or None"),
    ],
)
def test_a_wrong_config_value_names_its_field(field: str, value: object, expected: str) -> None:
    with pytest.raises(AdaptiveRAGError, match=rf"DRAGINConfig\.{field} must be {expected}, got"):
        DRAGINConfig(**{field: value})  # type: ignore[arg-type]


def test_an_infinite_count_is_refused_and_an_infinite_threshold_kept() -> None:
    with pytest.raises(AdaptiveRAGError, match="num_samples must be an integer"):
        SeaKRConfig(num_samples=math.inf)  # type: ignore[arg-type]
    assert SeaKRConfig(delta=-math.inf).delta == -math.inf  # retrieve at every step


# -- the decision record ------------------------------------------------------------------


def test_every_decision_streams_as_one_typed_record() -> None:
    model = dragin_script.model(
        dragin_script.draft(), " Anna Berg was born in 1930.", " So the answer is 1930."
    )
    graph = create_dragin_graph(model, RecordingRetriever(), prompts=NO_SHOTS)
    events = list(graph.stream({"question": QUESTION}, stream_mode="custom"))
    decisions = [e for e in events if e["event"] == "decision"]
    assert [e["event"] for e in events] == ["decision", "retrieval", "decision"]
    for decision in decisions:
        assert set(decision) - {"event"} == set(RetrievalDecision.__annotations__)
    first, second = decisions
    assert first["retrieve"] is True and first["trigger_word"] == "1931"  # bare
    assert first["trigger_words"] == ["1931"] and first["step"] == 1
    assert second["retrieve"] is False and second["step"] == 2


# -- strict checkpoints -------------------------------------------------------------------


class DyingSaver(InMemorySaver):
    """A checkpointer whose process dies, once armed, after a task's writes are saved
    and before the step's checkpoint: resuming re-applies the saved writes."""

    armed: bool = False
    saw_writes: bool = False

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        super().put_writes(config, writes, task_id, task_path)
        self.saw_writes = self.saw_writes or (self.armed and bool(writes))

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        if self.armed and self.saw_writes:
            self.armed = False
            raise SystemExit("killed between a task's writes and the step's checkpoint")
        return super().put(config, checkpoint, metadata, new_versions)


QUESTION_AS_QUERY = {
    "single_round",
    "fix_length",
    "fix_sentence",
    "vanilla",
    "ta_are",
    "self_rag",
    "tool_agent",
}


@pytest.mark.parametrize("method", AVAILABLE_METHODS)
def test_a_second_question_resumed_holds_only_its_own_retrievals(method: str) -> None:
    # strict: only LangGraph's allow-listed types revive (LANGGRAPH_STRICT_MSGPACK=true)
    saver = DyingSaver(serde=JsonPlusSerializer(allowed_msgpack_modules=None))
    replies = [" [Yes]", ANSWER] * 3 if method in {"vanilla", "ta_are"} else [ANSWER] * 90
    if method == "search_agent":  # Search-o1's answer form
        replies = [" \\boxed{1931}"] * 90
    options: dict[str, Any] = {}
    if method == "seakr":
        options["config"] = SeaKRConfig(num_samples=2, hidden_layer=1)
    reflection = {token: 1000 + i for i, token in enumerate(CONTROL_TOKENS)}
    model: Any = FakeTraceModel(replies, vocabulary=reflection if method == "self_rag" else None)
    if method == "tool_agent":  # a chat model that calls tools
        second = [call("Who was born first?"), reply("1931")]
        model = ScriptedAgentModel(replies=[call(QUESTION), reply("1931"), *second * 2])
    graph = create_adaptive_rag_graph(
        model,
        RecordingRetriever(),
        method,
        prompts=NO_SHOTS,
        checkpointer=saver,
        **options,
    )
    config: Any = {"configurable": {"thread_id": f"strict-{method}"}}
    first = graph.invoke({"question": QUESTION}, config)
    if method in QUESTION_AS_QUERY:  # the first question's events, which must not leak
        assert [e["query"] for e in first["retrievals"]][:1] == [QUESTION]
    saver.armed = True  # the second question dies after its first node's writes
    with pytest.raises(SystemExit, match="killed"):
        graph.invoke({"question": "Who was born first?"}, config)
    second = graph.invoke(None, config)  # resumed: the reset is among the saved writes
    assert "1931" in second["answer"]
    assert [e["query"] for e in second["retrievals"] if e["query"] == QUESTION] == []
    if method in QUESTION_AS_QUERY:
        assert [e["query"] for e in second["retrievals"]] == ["Who was born first?"]
