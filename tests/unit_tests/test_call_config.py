"""Per-call method settings: context, configurable, the context schema, and bad values."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs.dragin import DRAGINConfig, create_dragin_graph
from langchain_adaptive_rag.graphs.fixed import FixLengthConfig, create_fix_length_graph
from tests.helpers import dragin_script
from tests.helpers.scripted import NO_SHOTS, QUESTION, RecordingRetriever

# a budget of 4 tokens: chunks of 2 retrieve once after the question, chunks of 4 do not
TWO_CHUNKS = [" a b", " c d", " 1931."]
ONE_CHUNK = [" a b c d", " 1931."]


def _fix_length(retriever: RecordingRetriever, script: list[str], **options: Any) -> Any:
    return create_fix_length_graph(
        dragin_script.model(*script),
        retriever,
        config=FixLengthConfig(fix_length=4, generate_max_length=4),
        prompts=NO_SHOTS,
        **options,
    )


def test_the_context_schema_lists_the_methods_fields() -> None:
    graph = create_dragin_graph(dragin_script.model(), RecordingRetriever(), prompts=NO_SHOTS)
    schema = graph.get_context_jsonschema()
    assert schema["title"] == "DRAGINConfigContext"
    assert schema["properties"]["theta"]["type"] == "number"
    assert "required" not in schema  # every field optional: the build-time config fills in
    assert {"generate_max_length", "retrieve_topk", "attention_mode"} <= set(schema["properties"])


def test_every_methods_context_schema_is_json_schema() -> None:
    # LangGraph's server publishes it (assistants' schemas); a field pydantic cannot
    # describe would break the listing of that method
    from pydantic import TypeAdapter

    from langchain_adaptive_rag.graphs import AVAILABLE_METHODS, config_class
    from langchain_adaptive_rag.graphs.call_config import context_schema

    for method in AVAILABLE_METHODS:
        schema = TypeAdapter(context_schema(config_class(method))).json_schema()
        assert "retrieve_topk" in schema["properties"], method


def test_theta_in_the_context_changes_the_decision_for_that_call() -> None:
    # s(1931.) = 0.816 (test_dragin_graph.test_threshold_decides): under theta 1.0 (the
    # build-time value here), over theta 0.8 given for one call
    graph = create_dragin_graph(
        dragin_script.model(
            dragin_script.draft(entropy_1931=1.0),
            " So the answer is 1931.",
            dragin_script.draft(1.0),
            " Anna Berg was born in 1930.",
            " So the answer is 1930.",
        ),
        RecordingRetriever(),
        config=DRAGINConfig(theta=1.0),
        prompts=NO_SHOTS,
    )
    assert graph.invoke({"question": QUESTION})["retrievals"] == []
    lower = graph.invoke({"question": QUESTION}, context={"theta": 0.8})
    assert len(lower["retrievals"]) == 1 and lower["retrievals"][0]["threshold"] == 0.8


@pytest.mark.parametrize("how", ["context", "configurable", "with_config"])
def test_a_field_set_for_one_call_and_the_default_after(how: str) -> None:
    retriever = RecordingRetriever()
    graph = _fix_length(retriever, TWO_CHUNKS)
    if how == "context":
        graph.invoke({"question": QUESTION}, context={"fix_length": 2})
    elif how == "configurable":
        graph.invoke({"question": QUESTION}, {"configurable": {"fix_length": 2}})
    else:
        graph.with_config(configurable={"fix_length": 2}).invoke({"question": QUESTION})
    assert retriever.queries == [QUESTION, "a b"]  # chunks of 2 tokens
    retriever.queries.clear()
    assert _fix_length(retriever, ONE_CHUNK).invoke({"question": QUESTION})["answer"] == "1931"
    assert retriever.queries == [QUESTION]  # the build-time 4


def test_per_call_settings_on_a_thread_with_a_checkpointer() -> None:
    retriever = RecordingRetriever()
    graph = _fix_length(retriever, TWO_CHUNKS, checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t1"}}
    result = graph.invoke({"question": QUESTION}, thread, context={"fix_length": 2})
    assert result["answer"] == "1931" and retriever.queries == [QUESTION, "a b"]


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"fix_length": 0}, r"FixLengthConfig.fix_length must be >= 1, got 0"),
        ({"fix_length": "2"}, r"FixLengthConfig.fix_length must be an integer"),
        ({"theta": 1.0}, r"sets 'theta', which FixLengthConfig does not have. Expected some of"),
        ("fix_length=2", r"context is a str; expected a dict of FixLengthConfig fields"),
    ],
)
def test_a_bad_per_call_value_is_refused_like_a_bad_config(context: object, message: str) -> None:
    graph = _fix_length(RecordingRetriever(), TWO_CHUNKS)
    with pytest.raises(AdaptiveRAGError, match=message):
        graph.invoke({"question": QUESTION}, context=context)
