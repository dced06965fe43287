"""Fixed-schedule baselines on a scripted model: where retrieval fires, with which query."""

from __future__ import annotations

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langgraph.types import RetryPolicy

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs.fixed import (
    FixLengthConfig,
    create_fix_length_graph,
    create_fix_sentence_graph,
    create_no_retrieval_graph,
    create_single_round_graph,
)
from langchain_adaptive_rag.graphs.policy import MethodConfig
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.retrievers import create_bm25_retriever
from langchain_adaptive_rag.retrieving import RetrieverOptions
from langchain_adaptive_rag.testing import FakeTraceModel
from tests.helpers.scripted import PASSAGES, QUESTION, RecordingRetriever

NO_SHOTS = QAPrompts(exemplars=(), followup_query="as_asked")  # scripts hold no rewrite


def test_no_retrieval_answers_in_one_call() -> None:
    model = FakeTraceModel([" Blue Harbour was directed by Anna Berg. So the answer is 1931.\n"])
    graph = create_no_retrieval_graph(model, RecordingRetriever(), prompts=NO_SHOTS)
    result = graph.invoke({"question": QUESTION})
    assert result["answer"] == "1931"
    assert result["text"] == " Blue Harbour was directed by Anna Berg. So the answer is 1931."
    assert result["retrievals"] == []
    assert result["counts"] == {
        "retrievals": 0,
        "llm_calls": 1,
        "generated_tokens": 12,
        "rounds": 1,
        "retrieval_errors": 0,
        "prompt_tokens": 0,  # the fake's prompts carry no token ids
    }
    assert model.prompts == [f"Question: {QUESTION}\nAnswer:"]


def test_single_round_retrieves_with_the_question_first() -> None:
    model = FakeTraceModel([" Anna Berg was born in 1931. So the answer is 1931."])
    retriever = RecordingRetriever()
    result = create_single_round_graph(model, retriever, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert retriever.queries == [QUESTION]
    assert model.prompts[0] == (
        "Context:\n[1] "
        + PASSAGES[0]
        + "\n[2] "
        + PASSAGES[1]
        + "\n[3] "
        + PASSAGES[2]
        + "\nAnswer in the same format as before.\n"
        f"Question: {QUESTION}\nAnswer:"
    )
    (event,) = result["retrievals"]
    assert event["query"] == QUESTION and event["step"] == 0
    assert event["doc_ids"] == ["p0", "p1", "p2"]
    assert event["trigger_position"] is None and event["score"] is None
    assert result["answer"] == "1931"


def test_fix_length_retrieves_every_n_tokens_with_the_previous_chunk() -> None:
    model = FakeTraceModel(
        [
            " Blue Harbour was directed",  # 4 tokens, cut to 3
            " by Anna Berg",
            " who was born",
            " in 1931. So",
            " the answer is 1931.",
            " 1931.",  # the budget cut the text after "the answer is": it is continued
        ]
    )
    retriever = RecordingRetriever()
    graph = create_fix_length_graph(
        model,
        retriever,
        config=FixLengthConfig(fix_length=3, generate_max_length=64),
        prompts=NO_SHOTS,
    )
    result = graph.invoke({"question": QUESTION})
    assert retriever.queries == [
        QUESTION,
        "Blue Harbour was",
        "by Anna Berg",
        "who was born",
        "in 1931. So",
    ]
    assert result["text"] == (
        " Blue Harbour was by Anna Berg who was born in 1931. So the answer is 1931."
    )
    assert result["answer"] == "1931"
    assert model.prompts[-1].endswith("in 1931. So the answer is")
    assert result["counts"]["retrievals"] == 5
    assert [e["step"] for e in result["retrievals"]] == [0, 1, 2, 3, 4]
    # each chunk is generated after the text accepted so far
    assert model.prompts[2].endswith("Answer: Blue Harbour was by Anna Berg")


def test_fix_length_stops_at_the_budget() -> None:
    model = FakeTraceModel([" a b c", " d e f", " g h i"])
    graph = create_fix_length_graph(
        model,
        RecordingRetriever(),
        config=FixLengthConfig(fix_length=3, generate_max_length=5),
        prompts=NO_SHOTS,
    )
    # 3 + 2 tokens fill the budget; no answer marker, so one forced-answer call follows
    result = graph.invoke({"question": QUESTION})
    assert result["text"].startswith(" a b c d e So the answer is")
    assert result["counts"]["retrievals"] == 2
    assert model.prompts[-1].endswith("Answer: a b c d e So the answer is")
    assert result["answer"] == "g h i"


def test_fix_sentence_keeps_one_sentence_per_retrieval() -> None:
    model = FakeTraceModel(
        [
            " Blue Harbour was directed by Anna Berg. She was born in 1931.",
            " Anna Berg was born in 1931. So the answer is 1931.",
            " So the answer is 1931.",
        ]
    )
    retriever = RecordingRetriever()
    result = create_fix_sentence_graph(model, retriever, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert retriever.queries == [
        QUESTION,
        "Blue Harbour was directed by Anna Berg.",
        "Anna Berg was born in 1931.",
    ]
    assert result["text"] == (
        " Blue Harbour was directed by Anna Berg. Anna Berg was born in 1931."
        " So the answer is 1931."
    )
    assert result["answer"] == "1931"
    # generated tokens count everything generated; the budget counts accepted tokens only
    assert result["counts"]["generated_tokens"] == 12 + 11 + 5


def test_failing_retriever_is_recorded_and_generation_goes_on() -> None:
    model = FakeTraceModel([" So the answer is 1931."])
    retriever = RecordingRetriever(fail=True)
    fast = RetrieverOptions(retry=RetryPolicy(initial_interval=0.0, jitter=False))
    result = create_single_round_graph(
        model, retriever, prompts=NO_SHOTS, retriever_options=fast
    ).invoke({"question": QUESTION})
    (event,) = result["retrievals"]
    assert event["note"] == (
        "retriever raised ConnectionError: search service down (after 3 attempts)"
    )
    assert event["doc_ids"] == [] and len(retriever.queries) == 3
    assert result["counts"]["retrieval_errors"] == 1 and result["counts"]["retrievals"] == 1
    assert "Context:" not in model.prompts[0]
    assert result["answer"] == "1931"


def test_empty_retrieval_is_recorded() -> None:
    model = FakeTraceModel([" So the answer is 1931."])
    result = create_single_round_graph(
        model, RecordingRetriever(empty=True), prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    assert result["retrievals"][0]["note"] == "retriever returned no documents"


@pytest.mark.parametrize("question", ["", "   "])
def test_empty_question_is_explained(question: str) -> None:
    graph = create_no_retrieval_graph(FakeTraceModel([]), RecordingRetriever())
    with pytest.raises(AdaptiveRAGError, match="Expected a non-empty string"):
        graph.invoke({"question": question})


def test_bm25_default_retriever_and_top_k() -> None:
    model = FakeTraceModel([" So the answer is 1931."])
    retriever = create_bm25_retriever(PASSAGES)
    result = create_single_round_graph(
        model, retriever, config=MethodConfig(retrieve_topk=2), prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    (event,) = result["retrievals"]
    assert event["doc_ids"] == ["doc-0", "doc-1"]


def test_not_a_retriever_is_explained() -> None:
    with pytest.raises(AdaptiveRAGError, match="retriever must be a LangChain retriever"):
        create_no_retrieval_graph(FakeTraceModel([]), PASSAGES)  # type: ignore[arg-type]


def test_config_values_are_checked() -> None:
    with pytest.raises(AdaptiveRAGError, match="fix_length must be >= 1, got 0"):
        FixLengthConfig(fix_length=0)
    with pytest.raises(AdaptiveRAGError, match="generate_max_length must be >= 1"):
        MethodConfig(generate_max_length=0)


def test_messages_stream_mode_streams_each_generation_token_by_token() -> None:
    from langchain_core.messages import AIMessageChunk

    model = FakeTraceModel([" Anna Berg was born in 1931.", " So the answer is 1931."])
    graph = create_fix_sentence_graph(model, RecordingRetriever(), prompts=NO_SHOTS)
    parts = list(graph.stream({"question": QUESTION}, stream_mode="messages"))
    *chunks, (question, asked_in), (reply, answered_in) = [
        (chunk, meta["langgraph_node"]) for chunk, meta in parts
    ]
    # the run's turn, written to ``messages`` by finalize, comes last, whole
    assert (type(question).__name__, question.content, asked_in) == (
        "HumanMessage",
        QUESTION,
        "finalize",
    )
    assert (type(reply).__name__, answered_in) == ("AIMessage", "finalize")
    assert reply.content == "Anna Berg was born in 1931. So the answer is 1931."
    assert all(isinstance(chunk, AIMessageChunk) for chunk, _ in chunks)
    assert [c.content for c, _ in chunks] == [
        " Anna", " Berg", " was", " born", " in", " 1931.",
        " So", " the", " answer", " is", " 1931.",
    ]  # fmt: skip
    assert {node for _, node in chunks} == {"continue_generation"}
    assert len({c.id for c, _ in chunks}) == 2  # one message per generation


def test_chat_history_is_shown_before_the_question() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    model = FakeTraceModel([" So the answer is 1931."])
    history = [
        HumanMessage("Who directed Blue Harbour?"),
        AIMessage("Anna Berg."),
        HumanMessage("unanswered"),
    ]
    create_no_retrieval_graph(model, RecordingRetriever(), prompts=NO_SHOTS).invoke(
        {"question": QUESTION, "chat_history": history}
    )
    assert model.prompts[0] == (
        f"Question: Who directed Blue Harbour?\nAnswer: Anna Berg.\nQuestion: {QUESTION}\nAnswer:"
    )


def test_interrupted_run_resumes_from_the_checkpoint() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    class FlakyRetriever(RecordingRetriever):
        broken: bool = True

        def _get_relevant_documents(self, query, *, run_manager):  # type: ignore[no-untyped-def]
            if self.broken:
                raise KeyboardInterrupt  # the run stops here (not a recorded retriever error)
            return super()._get_relevant_documents(query, run_manager=run_manager)

    model = FakeTraceModel([" Anna Berg was born in 1931. So the answer is 1931."])
    retriever = FlakyRetriever()
    graph = create_single_round_graph(
        model, retriever, prompts=NO_SHOTS, checkpointer=InMemorySaver()
    )
    thread = {"configurable": {"thread_id": "t1"}}
    with pytest.raises(KeyboardInterrupt):
        graph.invoke({"question": QUESTION}, thread)
    assert graph.get_state(thread).next == ("retrieve",)
    retriever.broken = False
    result = graph.invoke(None, thread)  # resume: nothing before "retrieve" runs again
    assert result["answer"] == "1931"
    assert len(model.prompts) == 1


def test_a_new_question_on_the_same_thread_starts_clean() -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    model = FakeTraceModel([" So the answer is 1931.", " So the answer is 1902."])
    retriever = RecordingRetriever()
    graph = create_single_round_graph(
        model, retriever, prompts=NO_SHOTS, checkpointer=InMemorySaver()
    )
    thread = {"configurable": {"thread_id": "conversation"}}
    first = graph.invoke({"question": QUESTION}, thread)
    second = graph.invoke({"question": "When was Carl Lind born?"}, thread)
    assert first["answer"] == "1931" and second["answer"] == "1902"
    assert second["text"] == " So the answer is 1902."
    assert [e["query"] for e in second["retrievals"]] == ["When was Carl Lind born?"]
    assert second["counts"] == first["counts"]
    assert model.prompts[1].endswith("Question: When was Carl Lind born?\nAnswer:")


class MetadataIdRetriever(BaseRetriever):
    """Documents identified only by ``metadata["id"]`` (or not at all)."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [
            Document(page_content=PASSAGES[0], metadata={"id": "p0"}),
            Document(page_content=PASSAGES[1]),
        ]


def test_retrieved_ids_fall_back_to_metadata_then_position() -> None:
    model = FakeTraceModel([" So the answer is 1931."])
    result = create_single_round_graph(
        model, MetadataIdRetriever(), config=MethodConfig(), prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    assert result["retrievals"][0]["doc_ids"] == ["p0", "result-1"]


def test_generations_stream_tokens_only_when_a_callback_handler_listens() -> None:
    from typing import Any

    class Recording(FakeTraceModel):
        def generate_trace(self, *args: Any, **kwargs: Any) -> Any:
            listened.append(kwargs.get("on_token") is not None)
            return super().generate_trace(*args, **kwargs)

    listened: list[bool] = []
    model = Recording([" Anna Berg was born in 1931.", " So the answer is 1931."] * 2)
    graph = create_fix_sentence_graph(model, RecordingRetriever(), prompts=NO_SHOTS)
    graph.invoke({"question": QUESTION})  # nobody listens: no per-token events
    assert listened and not any(listened)
    listened.clear()
    list(graph.stream({"question": QUESTION}, stream_mode="messages"))
    assert listened and all(listened)


@pytest.mark.parametrize(
    ("formulation", "queries"),
    [
        ("last_chunk", [QUESTION, "Blue Harbour was directed"]),
        ("last_sentence", [QUESTION, "Blue Harbour was directed"]),
        ("full_context", [QUESTION, f"{QUESTION} Blue Harbour was directed"]),
    ],
)
def test_fix_length_timing_with_another_query(formulation: str, queries: list[str]) -> None:
    # the DRAGIN paper's Table 4: FL-RAG's timing, a query shared by every method
    model = FakeTraceModel([" Blue Harbour was directed", " by Anna Berg.", " 1931."])
    retriever = RecordingRetriever()
    config = FixLengthConfig(fix_length=4, generate_max_length=7, query_formulation=formulation)  # type: ignore[arg-type]
    create_fix_length_graph(model, retriever, config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert retriever.queries == queries
