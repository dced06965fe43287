"""Adaptive-RAG's training-free classifiers: the rule's cues and reading a classifier's reply."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs.complexity import (
    complexity_cues,
    complexity_prompt,
    read_complexity,
    rule_complexity,
)


@pytest.mark.parametrize(
    ("question", "cues"),
    [
        # single-hop: one lookup answers them (NQ, TriviaQA, SQuAD forms)
        ("Who wrote the novel The Remains of the Day?", []),
        ("who sings i wont let the sun go down on me", []),
        ("Muscat is the capital of which country?", []),  # "which" asks, it relates nothing
        ("In which year was the United Nations founded?", []),
        ("When was Barack Obama born?", []),  # one fact about a named person
        ("Who is the director of Jaws?", []),  # one relation
        # multi-hop (HotpotQA, 2WikiMultihopQA, MuSiQue, the toy world)
        ("When was the director of film Blue Harbour born?", ["relation chain"]),
        ("Who was born first, Maja Frost or Olaf Holm?", ["comparison"]),
        ("Are Edward F. Cline and Floyd Mutrux both screenwriters?", ["comparison"]),
        ("Who is the paternal grandfather of Erik Gran?", ["kinship chain"]),
        (
            "What government position was held by the woman who portrayed Corliss Archer?",
            ["relative clause"],
        ),
        ("Who is the mayor now in the city where Merrill Elam was born?", ["relative clause"]),
    ],
)
def test_the_rule_finds_the_multi_hop_cues(question: str, cues: list[str]) -> None:
    assert complexity_cues(question) == cues
    assert rule_complexity(question) == ("C" if cues else "B")


def test_the_rule_never_answers_without_retrieval() -> None:
    assert rule_complexity("What is the capital of France?") == "B"


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ("B", "B"),
        (" c \n", "C"),
        ("(C)", "C"),
        (" A: common knowledge", "A"),
        ("The class is C.", "C"),
        ("maybe", None),
        ("", None),
        (AIMessage("A"), "A"),
    ],
)
def test_a_reply_is_read_as_its_class(reply: object, label: str | None) -> None:
    assert read_complexity(reply, source="The classifier") == label


def test_a_reply_that_is_not_text_is_an_error() -> None:
    with pytest.raises(AdaptiveRAGError, match=r"The classifier returned 3 \(int\)\. Expected"):
        read_complexity(3, source="The classifier")


def test_the_prompt_ends_with_the_question_and_asks_for_its_class() -> None:
    prompt = complexity_prompt("  Who is Anna Berg? ")
    assert prompt.endswith("Question: Who is Anna Berg?\nClass:")
    assert prompt.count("Class:") == 4  # three labelled examples, then the question
