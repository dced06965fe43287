"""Citations: a retriever's document metadata kept in the state, events, answer and report."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langchain_adaptive_rag.graphs.fixed import create_single_round_graph
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.testing import FakeTraceModel
from langchain_adaptive_rag.visualize import record_run, tokens_html
from tests.helpers.catalogue import ANSWER, CatalogueRetriever
from tests.helpers.scripted import QUESTION


def _graph(**options: Any) -> Any:
    return create_single_round_graph(
        FakeTraceModel([ANSWER] * 4),
        CatalogueRetriever(),
        prompts=QAPrompts(exemplars=()),
        **options,
    )


EXPECTED = {
    "title": "Anna Berg",
    "source": "wikipedia",
    "url": "https://en.wikipedia.org/wiki/Anna_Berg",
    "score": 12.5,
    "tags": ["film", "director"],
}


def test_metadata_reaches_the_events_and_the_answers_sources() -> None:
    result = _graph().invoke({"question": QUESTION})
    (event,) = result["retrievals"]
    assert event["doc_metadata"] == [EXPECTED, {}]
    assert type(event["doc_metadata"][0]["score"]) is float  # plain data, not numpy
    sources = result["messages"][-1].additional_kwargs["sources"]
    assert [s["id"] for s in sources] == ["wiki-17", "wiki-3"]
    assert sources[0]["metadata"]["url"] == EXPECTED["url"]
    assert sources[0]["text"].startswith("Anna Berg (born 1931)")


def test_the_streamed_retrieval_event_carries_each_documents_text_and_metadata() -> None:
    graph = _graph()
    events = list(graph.stream({"question": QUESTION}, stream_mode="custom"))
    (streamed,) = [e for e in events if e["event"] == "retrieval"]
    (recorded,) = graph.invoke({"question": QUESTION})["retrievals"]
    assert streamed["doc_ids"] == recorded["doc_ids"] == ["wiki-17", "wiki-3"]
    assert streamed["doc_texts"] == recorded["doc_texts"]
    assert streamed["doc_texts"][0].startswith("Anna Berg (born 1931)")
    assert streamed["doc_metadata"] == recorded["doc_metadata"] == [EXPECTED, {}]


def test_metadata_survives_a_strict_checkpoint() -> None:
    saver = InMemorySaver(serde=JsonPlusSerializer(allowed_msgpack_modules=None))
    graph = _graph(checkpointer=saver)
    thread = {"configurable": {"thread_id": "cite"}}
    graph.invoke({"question": QUESTION}, thread)  # type: ignore[arg-type]
    state = graph.get_state(thread)  # type: ignore[arg-type]
    assert state.values["docs"][0]["metadata"] == EXPECTED
    assert state.values["retrievals"][0]["doc_metadata"][0] == EXPECTED


def test_the_report_cites_each_passage() -> None:
    record = record_run(_graph(), QUESTION)
    page = tokens_html(record)
    assert 'href="https://en.wikipedia.org/wiki/Anna_Berg"' in page
    assert "Anna Berg · wikipedia" in page
    assert record.rounds[0].retrieval is not None
    assert record.rounds[0].retrieval.doc_metadata[0]["title"] == "Anna Berg"
    again = type(record).from_json(record.to_json())
    assert again.rounds[0].retrieval is not None
    assert again.rounds[0].retrieval.doc_metadata == record.rounds[0].retrieval.doc_metadata
