"""Vanilla and TA-ARE prompting on a scripted model."""

from __future__ import annotations

import pytest

from langchain_adaptive_rag.graphs.ta_are import (
    DECISION_INSTRUCTION,
    TAAREConfig,
    create_ta_are_graph,
    create_vanilla_graph,
    parse_decision,
)
from langchain_adaptive_rag.testing import FakeTraceModel
from tests.unit_tests.test_fixed_graphs import PASSAGES, QUESTION, RecordingRetriever


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (" [Yes]", True),
        ("Yes", True),
        (" **Yes**", True),
        ("yes.", True),
        (" [No]", False),
        ("No, I know it.", False),
        (" Maybe", None),
        ("", None),
    ],
)
def test_parse_decision(text: str, expected: bool | None) -> None:
    assert parse_decision(text) is expected


def test_yes_retrieves_top_documents_and_answers_over_a_paragraph() -> None:
    model = FakeTraceModel([" [Yes]", " 1931"])
    retriever = RecordingRetriever()
    result = create_vanilla_graph(model, retriever).invoke({"question": QUESTION})
    assert model.prompts[0] == f"{DECISION_INSTRUCTION}\nQuestion: {QUESTION}\nAnswer:"
    assert retriever.queries == [QUESTION]
    assert f"Paragraph: {' '.join(PASSAGES)}\nQuestion: {QUESTION}\nAnswer:" in model.prompts[1]
    assert result["answer"] == "1931"
    (event,) = result["retrievals"]
    assert event["trigger_word"] == "[Yes]" and event["note"] == ""
    assert result["counts"]["llm_calls"] == 2


def test_no_answers_from_own_knowledge() -> None:
    model = FakeTraceModel([" [No]", " I don't know"])
    retriever = RecordingRetriever()
    result = create_vanilla_graph(model, retriever).invoke({"question": QUESTION})
    assert retriever.queries == [] and result["retrievals"] == []
    assert model.prompts[1].startswith("Please use your own knowledge to answer the question.")
    assert result["answer"] == "I don't know"


def test_unparseable_decision_retrieves_and_says_so() -> None:
    model = FakeTraceModel([" Hmm", " 1931"])
    result = create_vanilla_graph(model, RecordingRetriever()).invoke({"question": QUESTION})
    assert result["retrievals"][0]["note"] == "unparseable decision ' Hmm': retrieved"


def test_ta_are_adds_the_date_and_demonstrations() -> None:
    model = FakeTraceModel([" [No]", " Paris"])
    config = TAAREConfig(today="November 21, 2026")
    create_ta_are_graph(model, RecordingRetriever(), config=config).invoke({"question": QUESTION})
    prompt = model.prompts[0]
    assert prompt.startswith(f"Today is November 21, 2026. {DECISION_INSTRUCTION}\n")
    assert prompt.count("Answer: [Yes]") == 2 and prompt.count("Answer: [No]") == 2
    assert prompt.endswith(f"Question: {QUESTION}\nAnswer:")
