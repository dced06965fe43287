"""Hypothesis fuzzing of what a graph is given: its input and its config values.

Whatever a caller passes, a graph either answers or raises ``AdaptiveRAGError`` naming the
field; nothing else escapes (no tokenizer crash, no bare ``TypeError``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs import config_class, create_adaptive_rag_graph
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.testing import FakeTraceModel
from tests.helpers.scripted import RecordingRetriever

FUZZ = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
ANSWER = " So the answer is 1931."

# any text: letters, lone surrogates (text decoded with surrogateescape), blanks, NUL
surrogates = st.integers(0xD800, 0xDFFF).map(chr)
questions = st.lists(
    st.one_of(st.characters(), surrogates, st.sampled_from(" \t\n\x00")), max_size=40
).map("".join)
histories = st.one_of(
    st.none(),
    st.text(max_size=5),
    st.integers(),
    st.lists(
        st.one_of(
            st.builds(HumanMessage, st.text(max_size=10)),
            st.builds(AIMessage, st.text(max_size=10)),
            st.text(max_size=5),
            st.integers(),
            st.none(),
        ),
        max_size=4,
    ),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
)


def _invoke(state: dict[str, Any]) -> dict[str, Any] | None:
    graph = create_adaptive_rag_graph(
        FakeTraceModel([ANSWER]),
        RecordingRetriever(),
        "single_round",
        prompts=QAPrompts(exemplars=()),
    )
    try:
        return graph.invoke(state)  # type: ignore[arg-type]
    except AdaptiveRAGError as error:
        assert "Expected" in str(error), str(error)
        return None


@FUZZ
@given(question=questions, history=histories)
def test_any_question_and_history_answer_or_name_the_problem(question: str, history: Any) -> None:
    state: dict[str, Any] = {"question": question}
    if history is not None:
        state["chat_history"] = history
    result = _invoke(state)
    valid_history = history is None or (
        isinstance(history, list) and all(isinstance(m, HumanMessage | AIMessage) for m in history)
    )
    valid_question = bool(question.strip()) and not any(
        0xD800 <= ord(c) <= 0xDFFF for c in question
    )
    assert (result is not None) == (valid_history and valid_question)
    if result is not None:
        assert result["answer"] == "1931"


values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.just(math.nan),
)
methods = st.sampled_from(
    ["single_round", "fix_length", "fix_sentence", "flare", "dragin", "seakr", "ta_are"]
)


@FUZZ
@given(method=methods, data=st.data())
def test_any_config_value_is_accepted_or_named(method: str, data: st.DataObject) -> None:
    cls = config_class(method)
    field = data.draw(st.sampled_from(sorted(f.name for f in dataclasses.fields(cls))))
    value = data.draw(values)
    try:
        config = cls(**{field: value})
    except AdaptiveRAGError as error:
        assert f"{cls.__name__}.{field}" in str(error), str(error)
        assert "got" in str(error)
        return
    accepted = getattr(config, field)
    assert not isinstance(accepted, float) or not math.isnan(accepted)
    if field in {"generate_max_length", "retrieve_topk", "max_rounds", "num_samples"}:
        assert isinstance(accepted, int) and not isinstance(accepted, bool) and accepted >= 1
