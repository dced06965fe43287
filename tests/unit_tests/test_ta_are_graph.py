"""Vanilla and TA-ARE prompting on a scripted model."""

from __future__ import annotations

import pytest
from langchain_core.embeddings import Embeddings

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs.ta_are import (
    DECISION_INSTRUCTION,
    TAAREConfig,
    create_ta_are_graph,
    create_vanilla_graph,
    parse_decision,
)
from langchain_adaptive_rag.testing import FakeTraceModel
from tests.helpers.scripted import PASSAGES, QUESTION, RecordingRetriever


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


class WordEmbeddings(Embeddings):
    """Bag-of-words vectors over a fixed vocabulary: questions sharing words are close."""

    VOCAB = ("weather", "today", "stock", "price", "election", "winner", "film")

    def _vector(self, text: str) -> list[float]:
        words = text.lower().replace("?", "").split()
        return [float(words.count(w)) for w in self.VOCAB]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


POOL = (
    "What is the weather in Oslo today?",
    "Who is the winner of the latest election?",
    "What is the stock price of ACME today?",
    "Which film won the latest award?",
)


def test_ta_are_picks_the_nearest_yes_demonstrations() -> None:
    model = FakeTraceModel([" [Yes]", " 12 dollars"])
    config = TAAREConfig(today="November 21, 2026", yes_pool=POOL)
    graph = create_ta_are_graph(
        model, RecordingRetriever(), config=config, embeddings=WordEmbeddings()
    )
    graph.invoke({"question": "What is the stock price of Initech today?"})
    prompt = model.prompts[0]
    # the two pool questions sharing "stock price today" / "today", then the fixed [No] ones
    shown = [line for line in prompt.splitlines() if line.startswith("Question:")]
    assert shown[:2] == [f"Question: {POOL[2]}", f"Question: {POOL[0]}"]
    assert prompt.count("Answer: [Yes]") == 2 and prompt.count("Answer: [No]") == 2
    assert "Who won the most recent men's football World Cup?" not in prompt  # fixed [Yes]


def test_ta_are_embeddings_need_a_pool() -> None:
    with pytest.raises(AdaptiveRAGError, match="yes_pool is empty"):
        create_ta_are_graph(FakeTraceModel([]), RecordingRetriever(), embeddings=WordEmbeddings())
    with pytest.raises(AdaptiveRAGError, match="nearest_yes must be >= 0, got -1"):
        TAAREConfig(nearest_yes=-1)


def test_qa_answer_prompt_uses_the_graphs_qa_format() -> None:
    from langchain_adaptive_rag.prompts import QAPrompts

    model = FakeTraceModel(
        [" [Yes]", " Anna Berg was born in 1931. So the answer is 1931.\nQuestion: x"]
    )
    config = TAAREConfig(answer_prompt="qa", retrieve_topk=2)
    result = create_vanilla_graph(
        model, RecordingRetriever(), config=config, prompts=QAPrompts(exemplars=())
    ).invoke({"question": QUESTION})
    answer_prompt = model.prompts[1]
    assert answer_prompt.startswith(f"Context:\n[1] {PASSAGES[0]}\n[2] {PASSAGES[1]}\n")
    assert answer_prompt.endswith(f"Question: {QUESTION}\nAnswer:")
    assert "Paragraph:" not in answer_prompt
    assert result["answer"] == "1931"  # extracted after "So the answer is", cut at the stop
    no_answer = FakeTraceModel([" [No]", " Anna Berg was born in 1931.", " 1931."])
    result = create_vanilla_graph(
        no_answer, RecordingRetriever(), config=config, prompts=QAPrompts(exemplars=())
    ).invoke({"question": QUESTION})
    assert result["answer"] == "1931" and result["counts"]["llm_calls"] == 3  # forced once
    with pytest.raises(AdaptiveRAGError, match="answer_prompt"):
        TAAREConfig(answer_prompt="long")  # type: ignore[arg-type]
