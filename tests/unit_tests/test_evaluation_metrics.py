"""Answer and retrieval-decision metrics: hand-computed values and the HotpotQA definition."""

from __future__ import annotations

import os
import re
import string
from pathlib import Path

import pytest

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation import (
    AnswerScores,
    DecisionScores,
    Example,
    answer_match,
    exact_match,
    f1_precision_recall,
    f1_score,
    load_hotpotqa,
    mean_scores,
    normalize_answer,
    parse_yes_no,
    retrieval_decision_scores,
    score_answer,
    score_example,
    strategyqa_accuracy,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The  U.S.A.!", "usa"),
        ("An apple a day", "apple day"),
        ("theatre", "theatre"),
        ("Hello,\tWorld.", "hello world"),
        ("a-b", "ab"),  # punctuation is deleted, not replaced by a space
        ("the", ""),
        ("Caf\u00e9\u2019s", "caf\u00e9\u2019s"),  # only ASCII punctuation is removed
        ("  12,500 BC ", "12500 bc"),
    ],
)
def test_normalize_answer(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


def test_exact_match() -> None:
    assert exact_match("The Band", "band") == 1.0
    assert exact_match("Band!", ["x", "the band"]) == 1.0
    assert exact_match("bands", "band") == 0.0
    with pytest.raises(AdaptiveRAGError, match="empty list of gold answers"):
        exact_match("x", [])


def test_f1_hand_computed() -> None:
    # prediction tokens [big, red, dog], gold [red, dog]: P = 2/3, R = 1, F1 = 0.8
    assert f1_precision_recall("the big red dog", "red dog") == pytest.approx(
        AnswerScores(0.8, 2 / 3, 1.0)
    )
    # multiset overlap: dog min(2, 1) + cat min(1, 2) = 2 shared of 3 each
    assert f1_precision_recall("dog dog cat", "dog cat cat") == pytest.approx(
        AnswerScores(2 / 3, 2 / 3, 2 / 3)
    )
    assert f1_precision_recall("green", "red") == AnswerScores(0.0, 0.0, 0.0)
    assert f1_score("Red  dog.", "the red dog") == 1.0


def test_f1_yes_no_noanswer_rule() -> None:
    assert f1_score("yes", "no") == 0.0
    assert f1_score("Yes.", "yes") == 1.0
    # A gold of yes/no only matches that exact word: extra tokens give 0, not 0.67.
    assert f1_score("yes it is", "yes") == 0.0
    assert f1_score("yes", "yes it is") == 0.0
    assert f1_score("no answer", "noanswer") == 0.0
    assert f1_score("noanswer", "noanswer") == 1.0


def test_f1_empty_strings_follow_the_official_script() -> None:
    assert f1_score("", "x") == 0.0
    # Both empty: exact match holds, but no shared token, so F1 is 0 (the official quirk).
    assert exact_match("", "the") == 1.0
    assert f1_score("", "the") == 0.0


def test_aliases_maximise_each_component_separately() -> None:
    # vs "cat": P 1/2, R 1, F1 2/3; vs "cat sat down": P 1, R 2/3, F1 0.8
    scores = f1_precision_recall("the cat sat", ["cat", "a cat sat down"])
    assert scores == pytest.approx(AnswerScores(0.8, 1.0, 1.0))
    assert exact_match("Sat, cat", ["cat sat", "sat cat"]) == 1.0


def test_answer_match() -> None:
    assert answer_match("It was Elton John, in 1974.", ["Elton John"]) == 1.0
    assert answer_match("Eltonjohn", "Elton John") == 0.0
    assert answer_match("cats", "cat") == 1.0  # a plain substring test, as in RetrievalQA
    assert answer_match("anything", ["The", "zzz"]) == 0.0  # an empty gold never matches
    assert answer_match("15%", ["15%"]) == 1.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Pears float. So the answer is no.", "no"),
        ("Yes, because hamsters are prey.", "yes"),
        ("The answer is: True", "yes"),
        ("So the answer is maybe.", None),
        ("", None),
        ("Some say the answer is no. On reflection the answer is yes.", "yes"),
        ("FALSE", "no"),
        ("Hydrogen has an atomic number of 1.", None),
    ],
)
def test_parse_yes_no(text: str, expected: str | None) -> None:
    assert parse_yes_no(text) == expected


def test_strategyqa_accuracy() -> None:
    assert strategyqa_accuracy("So the answer is yes.", True) == 1.0
    assert strategyqa_accuracy("So the answer is yes.", "no") == 0.0
    assert strategyqa_accuracy("I cannot tell.", False) == 0.0
    assert strategyqa_accuracy("No.", "No") == 1.0
    with pytest.raises(AdaptiveRAGError, match="expected True/False or 'yes'/'no'"):
        strategyqa_accuracy("yes", "maybe")


def test_retrieval_decision_scores_hand_computed() -> None:
    # tp = 2 (0, 4), fp = 1 (1), fn = 1 (3), tn = 1 (2)
    scores = retrieval_decision_scores(
        [True, True, False, False, True], [True, False, False, True, True]
    )
    assert scores == pytest.approx(DecisionScores(0.6, 2 / 3, 2 / 3, 2 / 3, 5))
    assert scores.total == 5
    never = retrieval_decision_scores([False, False], [True, False])
    assert never == DecisionScores(0.5, 0.0, 0.0, 0.0, 2)
    with pytest.raises(AdaptiveRAGError, match="same length"):
        retrieval_decision_scores([True], [True, False])
    with pytest.raises(AdaptiveRAGError, match="non-empty"):
        retrieval_decision_scores([], [])


def test_decisions_against_retrievalqa_labels() -> None:
    examples = [
        Example("a", "q", ("x",), "retrievalqa", param_knowledge_answerable=label)
        for label in (0, 1)
    ]
    needed = [bool(e.needs_retrieval) for e in examples]
    assert needed == [True, False]
    assert retrieval_decision_scores([True, True], needed).precision == 0.5


def test_mean_scores() -> None:
    records = [
        {"id": "a", "em": 1.0, "f1": 0.5, "retrievals": 2, "hit": True},
        {"id": "b", "em": 0.0, "f1": 1.0, "retrievals": None, "hit": False},
    ]
    assert mean_scores(records) == {"em": 0.5, "f1": 0.75, "retrievals": 2.0, "hit": 0.5}
    assert mean_scores(records, keys=["f1"]) == {"f1": 0.75}
    with pytest.raises(AdaptiveRAGError, match="id='a'"):
        mean_scores(records, keys=["id"])
    with pytest.raises(AdaptiveRAGError, match="no records"):
        mean_scores([])


def test_score_answer_and_example() -> None:
    assert score_answer("the red dog", ["Red Dog", "dog"]) == {
        "em": 1.0,
        "f1": 1.0,
        "precision": 1.0,
        "recall": 1.0,
        "match": 1.0,
    }
    strategy = Example(
        id="s", question="q", answers=("no",), dataset="strategyqa", answer_bool=False
    )
    scores = score_example("Pears float. So the answer is no.", strategy)
    assert scores["accuracy"] == 1.0
    assert scores["em"] == 0.0  # the whole chain of thought is not the word "no"
    assert "accuracy" not in score_example("x", Example("i", "q", ("x",), "nq"))


# --------------------------------------------------------------------------------------
# Agreement with the official HotpotQA definition on the real dev questions

_ASCII_PUNCTUATION = frozenset(string.punctuation)


def _reference_scores(prediction: str, gold: str) -> tuple[float, float, float, float]:
    """The official definition, written out independently: (em, f1, precision, recall)."""

    def norm(text: str) -> str:
        kept = "".join(ch for ch in text.lower() if ch not in _ASCII_PUNCTUATION)
        return " ".join(re.sub(r"\b(?:the|an|a)\b", " ", kept).split())

    pred, ref = norm(prediction), norm(gold)
    em = 1.0 if pred == ref else 0.0
    if pred != ref and (pred in ("yes", "no", "noanswer") or ref in ("yes", "no", "noanswer")):
        return em, 0.0, 0.0, 0.0
    remaining = ref.split()
    shared = 0
    for token in pred.split():
        if token in remaining:
            remaining.remove(token)
            shared += 1
    if shared == 0:
        return em, 0.0, 0.0, 0.0
    precision = shared / len(pred.split())
    recall = shared / len(ref.split())
    return em, 2 * precision * recall / (precision + recall), precision, recall


def _data_dir() -> Path:
    override = os.environ.get("ADAPTIVE_RAG_DATA")
    return Path(override) if override else Path(__file__).parents[3] / "shared" / "data"


HOTPOT = _data_dir() / "hotpotqa" / "hotpotqa_adarag_dev500_ctx.jsonl"
needs_hotpot = pytest.mark.skipif(
    not HOTPOT.is_file(),
    reason=f"real HotpotQA data not found at {HOTPOT} (set ADAPTIVE_RAG_DATA to its folder)",
)


def _predictions(gold: str, other: str) -> list[str]:
    words = gold.split()
    return [
        gold,
        f"The {gold.upper()}!",
        " ".join(words[: max(1, len(words) // 2)]),
        f"{gold} and some more words",
        f"{words[-1]} {words[0]}",
        "yes",
        "no",
        "noanswer",
        other,
        "",
    ]


@needs_hotpot
def test_hand_computed_values_on_real_questions() -> None:
    examples = load_hotpotqa(HOTPOT)
    first = examples[0]
    assert first.answer == "an American football quarterback"
    # gold tokens [american, football, quarterback]; prediction [american, quarterback]
    assert f1_precision_recall("American quarterback", first.answers) == pytest.approx(
        AnswerScores(0.8, 1.0, 2 / 3)
    )
    assert exact_match("An American Football Quarterback.", first.answers) == 1.0
    yes_no = [e for e in examples if e.answer in ("yes", "no")]
    assert len(yes_no) == 25
    for example in yes_no:
        flipped = "no" if example.answer == "yes" else "yes"
        assert f1_score(flipped, example.answers) == 0.0
        assert f1_score(f"{example.answer}, it is", example.answers) == 0.0
        assert exact_match(example.answer.upper(), example.answers) == 1.0


@needs_hotpot
def test_agrees_with_the_official_definition_on_real_questions() -> None:
    examples = load_hotpotqa(HOTPOT)
    golds = [e.answer for e in examples]
    for index, example in enumerate(examples):
        other = golds[(index + 1) % len(golds)]
        for prediction in _predictions(example.answer, other):
            em, f1, precision, recall = _reference_scores(prediction, example.answer)
            scores = score_answer(prediction, example.answers)
            assert scores["em"] == em, (prediction, example.answer)
            assert scores["f1"] == pytest.approx(f1), (prediction, example.answer)
            assert scores["precision"] == pytest.approx(precision), (prediction, example.answer)
            assert scores["recall"] == pytest.approx(recall), (prediction, example.answer)
    exact = mean_scores([score_answer(e.answer, e.answers) for e in examples], keys=["em", "f1"])
    # One gold, the band "The The", normalises to "" and so scores F1 0 even when exact.
    assert [e.answer for e in examples if normalize_answer(e.answer) == ""] == ["The The"]
    assert exact == {"em": 1.0, "f1": pytest.approx(1 - 1 / len(examples))}
