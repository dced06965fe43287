"""Answer and retrieval-decision metrics.

Answer metrics follow the official HotpotQA evaluation (``hotpot_evaluate_v1.py``), which
2WikiMultihopQA's script and DRAGIN reuse:

- normalisation: lower-case, drop ASCII punctuation (``string.punctuation``), replace the
  whole words ``a``/``an``/``the`` by spaces, collapse whitespace (in that order);
- exact match: the normalised strings are equal;
- token F1, precision, recall over the normalised whitespace tokens (a multiset overlap),
  except that when either side normalises to ``yes``, ``no`` or ``noanswer`` and the two
  differ, all three are 0; no overlap (including two empty strings) gives 0;
- several gold aliases: each metric is the maximum over the aliases, taken separately
  (as ``2wikimultihop_evaluate_v1.1.py`` does), so the best precision and the best recall may
  come from different aliases.

RetrievalQA's ``match`` is 1 when any normalised gold is a substring of the normalised
prediction. StrategyQA's accuracy maps the generated text to yes/no first. The retrieval
decision is scored as a binary classifier whose positive class is "retrieve".
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, NamedTuple, TypeGuard

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation.datasets import Example

__all__ = [
    "AnswerScores",
    "DecisionScores",
    "answer_match",
    "exact_match",
    "f1_precision_recall",
    "f1_score",
    "mean_scores",
    "normalize_answer",
    "parse_yes_no",
    "retrieval_decision_scores",
    "score_answer",
    "score_example",
    "strategyqa_accuracy",
]

_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_SPECIAL = frozenset({"yes", "no", "noanswer"})


def normalize_answer(text: str) -> str:
    """SQuAD/HotpotQA answer normalisation.

    Lower-case, remove ASCII punctuation, replace the articles ``a``, ``an``, ``the`` (whole
    words) by spaces, and collapse runs of whitespace to one space.

    Args:
        text: A predicted or gold answer.

    Returns:
        The normalised string; ``"The  U.S.A.!"`` becomes ``"usa"``.
    """
    text = text.lower().translate(_PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _golds(golds: str | Sequence[str]) -> tuple[str, ...]:
    values = (golds,) if isinstance(golds, str) else tuple(golds)
    if not values:
        msg = "Received an empty list of gold answers; expected at least one gold answer."
        raise AdaptiveRAGError(msg)
    return values


class AnswerScores(NamedTuple):
    """Token-overlap scores of one prediction, each in [0, 1]."""

    f1: float
    """Harmonic mean of precision and recall."""
    precision: float
    """Shared tokens / prediction tokens."""
    recall: float
    """Shared tokens / gold tokens."""


def _overlap(prediction: str, gold: str) -> AnswerScores:
    """F1/precision/recall against one gold, with the yes/no/noanswer rule."""
    pred = normalize_answer(prediction)
    ref = normalize_answer(gold)
    if (pred in _SPECIAL or ref in _SPECIAL) and pred != ref:
        return AnswerScores(0.0, 0.0, 0.0)
    pred_tokens = pred.split()
    ref_tokens = ref.split()
    shared = sum((Counter(pred_tokens) & Counter(ref_tokens)).values())
    if shared == 0:
        return AnswerScores(0.0, 0.0, 0.0)
    precision = shared / len(pred_tokens)
    recall = shared / len(ref_tokens)
    return AnswerScores(2 * precision * recall / (precision + recall), precision, recall)


def exact_match(prediction: str, golds: str | Sequence[str]) -> float:
    """Exact match after normalisation, maximised over the gold aliases.

    Args:
        prediction: The predicted answer.
        golds: One gold answer or all acceptable ones.

    Returns:
        1.0 if the normalised prediction equals a normalised gold, else 0.0.

    Raises:
        AdaptiveRAGError: ``golds`` is empty.
    """
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(gold) for gold in _golds(golds)))


def f1_precision_recall(prediction: str, golds: str | Sequence[str]) -> AnswerScores:
    """Token F1, precision and recall (HotpotQA official), each maximised over the aliases.

    Args:
        prediction: The predicted answer.
        golds: One gold answer or all acceptable ones.

    Returns:
        The scores; 0 for all three when a yes/no/noanswer side differs from the other.

    Raises:
        AdaptiveRAGError: ``golds`` is empty.
    """
    scores = [_overlap(prediction, gold) for gold in _golds(golds)]
    return AnswerScores(
        f1=max(s.f1 for s in scores),
        precision=max(s.precision for s in scores),
        recall=max(s.recall for s in scores),
    )


def f1_score(prediction: str, golds: str | Sequence[str]) -> float:
    """Token F1 (HotpotQA official), maximised over the gold aliases.

    Args:
        prediction: The predicted answer.
        golds: One gold answer or all acceptable ones.

    Returns:
        The best F1 in [0, 1].
    """
    return f1_precision_recall(prediction, golds).f1


def answer_match(prediction: str, golds: str | Sequence[str]) -> float:
    """RetrievalQA's "match": some normalised gold is a substring of the normalised prediction.

    Args:
        prediction: The generated answer (it may be a whole sentence).
        golds: One gold answer or all acceptable ones.

    Returns:
        1.0 or 0.0. A gold that normalises to the empty string never matches.

    Raises:
        AdaptiveRAGError: ``golds`` is empty.
    """
    pred = normalize_answer(prediction)
    for gold in _golds(golds):
        ref = normalize_answer(gold)
        if ref and ref in pred:
            return 1.0
    return 0.0


_YES = frozenset({"yes", "true"})
_NO = frozenset({"no", "false"})
_ANSWER_IS = re.compile(r"answer is\b", re.IGNORECASE)


def parse_yes_no(text: str) -> Literal["yes", "no"] | None:
    """Map a generated answer to ``"yes"``/``"no"`` for StrategyQA.

    The text after the last "answer is" (the chain-of-thought exemplars end with "So the
    answer is yes.") is used when present, otherwise the whole text. Its first normalised
    word decides: ``yes``/``true`` -> ``"yes"``, ``no``/``false`` -> ``"no"``.

    Args:
        text: The generated text.

    Returns:
        ``"yes"``, ``"no"``, or ``None`` when the text commits to neither.
    """
    matches = list(_ANSWER_IS.finditer(text))
    tail = text[matches[-1].end() :] if matches else text
    words = normalize_answer(tail).split()
    if not words:
        return None
    if words[0] in _YES:
        return "yes"
    if words[0] in _NO:
        return "no"
    return None


def strategyqa_accuracy(prediction: str, gold: bool | str) -> float:
    """StrategyQA accuracy of one generated answer.

    Args:
        prediction: The generated text (see [`parse_yes_no`][]).
        gold: The boolean answer, or ``"yes"``/``"no"``.

    Returns:
        1.0 when the parsed answer equals the gold, else 0.0 (also when unparseable).

    Raises:
        AdaptiveRAGError: ``gold`` is a string other than yes/no.
    """
    if isinstance(gold, bool):
        expected = "yes" if gold else "no"
    else:
        expected = normalize_answer(gold)
        if expected not in ("yes", "no"):
            msg = f"StrategyQA gold {gold!r} received; expected True/False or 'yes'/'no'."
            raise AdaptiveRAGError(msg)
    return float(parse_yes_no(prediction) == expected)


def score_answer(prediction: str, golds: str | Sequence[str]) -> dict[str, float]:
    """All open-answer metrics of one prediction.

    Args:
        prediction: The predicted answer.
        golds: One gold answer or all acceptable ones.

    Returns:
        ``{"em", "f1", "precision", "recall", "match"}``.
    """
    overlap = f1_precision_recall(prediction, golds)
    return {
        "em": exact_match(prediction, golds),
        "f1": overlap.f1,
        "precision": overlap.precision,
        "recall": overlap.recall,
        "match": answer_match(prediction, golds),
    }


def score_example(prediction: str, example: Example) -> dict[str, float]:
    """The metrics of one prediction for a loaded [`Example`][].

    Args:
        prediction: The predicted answer.
        example: The question with its golds.

    Returns:
        [`score_answer`][]'s keys; for StrategyQA also ``"accuracy"`` (yes/no parsed from
        the prediction), with EM/F1 computed against ``"yes"``/``"no"``.
    """
    scores = score_answer(prediction, example.answers)
    if example.answer_bool is not None:
        scores["accuracy"] = strategyqa_accuracy(prediction, example.answer_bool)
    return scores


class DecisionScores(NamedTuple):
    """Retrieval-decision quality; the positive class is "retrieve"."""

    accuracy: float
    """Share of questions where the decision equals the need."""
    precision: float
    """Of the questions retrieved for, the share that needed it (0 when none retrieved)."""
    recall: float
    """Of the questions that needed retrieval, the share retrieved for (0 when none needed)."""
    f1: float
    """Harmonic mean of precision and recall (0 when both are 0)."""
    total: int
    """Number of questions scored."""


def retrieval_decision_scores(retrieved: Sequence[bool], needed: Sequence[bool]) -> DecisionScores:
    """Score retrieve/no-retrieve decisions against the gold need.

    For RetrievalQA the need is ``param_knowledge_answerable == 0``
    (``Example.needs_retrieval``).

    Args:
        retrieved: Whether the method retrieved, per question.
        needed: Whether the question needed retrieval, per question.

    Returns:
        Accuracy, precision, recall and F1.

    Raises:
        AdaptiveRAGError: The sequences are empty or differ in length.
    """
    if len(retrieved) != len(needed) or not needed:
        msg = (
            f"Received {len(retrieved)} decisions and {len(needed)} gold needs; expected two "
            "non-empty sequences of the same length."
        )
        raise AdaptiveRAGError(msg)
    pairs = [(bool(r), bool(n)) for r, n in zip(retrieved, needed, strict=True)]
    tp = sum(r and n for r, n in pairs)
    fp = sum(r and not n for r, n in pairs)
    fn = sum(n and not r for r, n in pairs)
    correct = sum(r == n for r, n in pairs)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return DecisionScores(correct / len(pairs), precision, recall, f1, len(pairs))


def _numeric(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float))


def mean_scores(
    records: Iterable[Mapping[str, object]], *, keys: Sequence[str] | None = None
) -> dict[str, float]:
    """Average per-question records key by key.

    Args:
        records: One mapping per question, e.g. [`score_answer`][] results merged with
            counts (``{"em": 1.0, "f1": 0.5, "retrievals": 2, "id": "q1"}``). Booleans count
            as 0/1.
        keys: The keys to average. By default every key whose values are all numbers (or
            ``None``); others, such as ids, are left out.

    Returns:
        The mean of each key over the records where its value is a number, as
        ``{key: mean}``; ``None`` values and absent keys are skipped, so a key seen in no
        record is left out.

    Raises:
        AdaptiveRAGError: There are no records, or a requested key holds a non-number.
    """
    rows = list(records)
    if not rows:
        msg = "Received no records to average; expected at least one per-question record."
        raise AdaptiveRAGError(msg)
    if keys is None:
        ordered: dict[str, None] = {}
        for row in rows:
            ordered.update(dict.fromkeys(row))
        keys = [
            key
            for key in ordered
            if all(row.get(key) is None or _numeric(row.get(key)) for row in rows)
        ]
    means: dict[str, float] = {}
    for key in keys:
        values: list[float] = []
        for index, row in enumerate(rows):
            value = row.get(key)
            if value is None:
                continue
            if not _numeric(value):
                msg = (
                    f"Record {index} has {key}={value!r}; expected a number, a boolean or "
                    "None to average."
                )
                raise AdaptiveRAGError(msg)
            values.append(float(value))
        if values:
            means[key] = sum(values) / len(values)
    return means
