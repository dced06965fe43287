"""Query complexity for Adaptive-RAG's router: A (no retrieval), B (one), C (multi-step).

Adaptive-RAG (Jeong et al., NAACL 2024) trains a small classifier on these labels. This
module gives the two that need no training, and reads any other classifier's output:

- [`rule_complexity`][]: a scored rule on the question's form. It tells a single-hop
  question (B) from a multi-hop one (C): a comparison of two things, a relative clause
  that describes the thing asked about, a relation of a relation ("the director of the
  film ..."), or a kinship chain. Whether a model already knows the answer (A) is not
  in the question's form, so the rule never answers A.
- [`complexity_prompt`][] and [`read_complexity`][]: the chat model is asked for the
  letter; the first standalone A, B or C in its reply is the class.
- [`uncertainty_complexity`][]: a class from the model's own uncertainty about its
  closed-book answer (semantic entropy, or an uncertainty gate's score) and two
  thresholds: sure enough answers without retrieval (A), unsure ones take several steps
  (C), the rest one retrieval (B).
"""

from __future__ import annotations

import re
from typing import Literal

from langchain_core.messages import BaseMessage

from langchain_adaptive_rag.errors import AdaptiveRAGError

__all__ = [
    "COMPLEXITY_LABELS",
    "Complexity",
    "complexity_cues",
    "complexity_prompt",
    "read_complexity",
    "rule_complexity",
    "uncertainty_complexity",
]

Complexity = Literal["A", "B", "C"]
"""A question's class: ``A`` simple (answer without retrieval), ``B`` moderate (one
retrieval), ``C`` complex (multi-step retrieval)."""

COMPLEXITY_LABELS: tuple[Complexity, ...] = ("A", "B", "C")
"""The classes, in order."""

_COMPARISON = re.compile(
    r"\b(both|same|than|either|neither|first|older|younger|earlier|later|longer|shorter|"
    r"larger|smaller|taller|higher|lower|more|fewer|less)\b.*\bor\b|\bor\b.*\b(first|"
    r"older|younger|earlier|later|longer|shorter|larger|smaller|taller|higher|lower|"
    r"more|fewer|less)\b|\bboth\b|\bthe same\b|\bin common\b|\bbetween\b.*\band\b.*\b(who|"
    r"which)\b|^(are|were|do|did|does|have|has)\s.*\band\b"
)
"""Two things compared ("born first, X or Y", "Are X and Y both ...", "the same country")."""
_RELATIVE = re.compile(r"\b(\w+)\s+(who|whom|whose|which|that|where)\s+(\w+)")
"""A relative clause: "the woman who portrayed ...", "the city where ... was born"."""
_NOT_BEFORE_RELATIVE = frozenset(
    {
        "of",
        "in",
        "to",
        "for",
        "with",
        "by",
        "on",
        "at",
        "from",
        "into",
        "about",
        "is",
        "was",
        "are",
        "were",
        "and",
        "or",
        "said",
        "says",
        "admitted",
        "claimed",
        "saw",
        "know",
        "knew",
        "think",
        "believe",
        "believed",
        "than",
        "so",
    }
)
"""Words before "which"/"that"/"who" that make it a question word or a conjunction."""
_NOT_AFTER_RELATIVE = frozenset({"is", "was", "are", "were", "the", "a", "an", "of", "s"})
"""Words after "which"/"that" that end a question rather than start a clause."""
_RELATIONAL = re.compile(
    r"\b(director|author|founder|performer|composer|producer|creator|writer|father|"
    r"mother|husband|wife|spouse|son|daughter|artist|manufacturer|maker|employer|owner|"
    r"star|winner|publisher|developer|designer|singer|leader|member|headquarters|"
    r"birthplace)s?\b"
)
"""Nouns that name something by its relation to another thing ("the director of")."""
_PERSON_PLACE_FACT = re.compile(
    r"\b(born|died|die|death|buried|nationality|married|founded|located|based)\b"
)
"""Facts asked about the thing a relation describes ("When was the director ... born?")."""
_KINSHIP = re.compile(
    r"\b(grandfather|grandmother|grandson|granddaughter|grandparent|grandchild|uncle|"
    r"aunt|nephew|niece|cousin|in-law|stepfather|stepmother|stepson|stepdaughter)\b"
)
"""A kinship that chains two relations (2WikiMultihopQA's inference questions)."""


def complexity_cues(question: str) -> list[str]:
    """The multi-hop cues [`rule_complexity`][] finds in ``question``.

    Args:
        question: The question.

    Returns:
        Any of ``"comparison"``, ``"relative clause"``, ``"relation chain"`` (two
        relations, or a relation and a fact asked about what it names) and
        ``"kinship chain"``, in that order.
    """
    text = " ".join(question.lower().replace("\u2019", "'").split())
    cues: list[str] = []
    if _COMPARISON.search(text):
        cues.append("comparison")
    if any(
        before not in _NOT_BEFORE_RELATIVE and after not in _NOT_AFTER_RELATIVE
        for before, _, after in _RELATIVE.findall(text)
    ):
        cues.append("relative clause")
    if len(_RELATIONAL.findall(text)) + len(_PERSON_PLACE_FACT.findall(text)) >= 2:
        cues.append("relation chain")
    if _KINSHIP.search(text):
        cues.append("kinship chain")
    return cues


def rule_complexity(question: str) -> Complexity:
    """Adaptive-RAG's class of ``question`` by a rule on its form: C with a multi-hop cue.

    Args:
        question: The question.

    Returns:
        ``"C"`` when [`complexity_cues`][] finds a cue, else ``"B"`` (never ``"A"``;
        see the module's notes).
    """
    return "C" if complexity_cues(question) else "B"


def complexity_prompt(question: str) -> str:
    """The completion prompt that asks a model for the question's class.

    Three labelled examples, then the question; the reply's first letter is the class.

    Args:
        question: The question.

    Returns:
        The prompt, ending in the line that asks for the class.
    """
    return (
        "Classify how much looking up each question needs.\n"
        "A: common knowledge, answered without searching.\n"
        "B: one search finds the answer.\n"
        "C: several searches, one fact leading to the next.\n\n"
        "Question: What is the capital of France?\nClass: A\n\n"
        "Question: Who wrote the novel The Remains of the Day?\nClass: B\n\n"
        "Question: When was the director of the film Jaws born?\nClass: C\n\n"
        f"Question: {question.strip()}\nClass:"
    )


_LETTER = re.compile(r"\b([ABC])\b")


def read_complexity(value: object, *, source: str) -> Complexity | None:
    """The class a classifier returned: ``"A"``, ``"B"`` or ``"C"``.

    Args:
        value: A string (``"B"``, ``" c "``, ``"(C)"``; the first standalone letter of a
            longer reply) or a message whose text is one.
        source: What produced it, for the error message.

    Returns:
        The class, or ``None`` when ``value`` is text without one (a model's reply the
        caller falls back from).

    Raises:
        AdaptiveRAGError: ``value`` is neither text nor a message.
    """
    text = value.text if isinstance(value, BaseMessage) else value
    if not isinstance(text, str):
        msg = (
            f"{source} returned {value!r} ({type(value).__name__}). Expected 'A', 'B' or "
            "'C' (a string or a message). Fix: return the class letter: A no retrieval, "
            "B single-step, C multi-step."
        )
        raise AdaptiveRAGError(msg)
    stripped = text.strip().upper()
    if stripped in COMPLEXITY_LABELS:
        return stripped
    found = _LETTER.search(text.strip())
    return found.group(1) if found is not None else None  # type: ignore[return-value]


def uncertainty_complexity(
    value: float, thresholds: tuple[float, float], direction: Literal["above", "below"]
) -> Complexity:
    """The class of a question from an uncertainty score and two thresholds.

    With ``direction="above"`` (more is less sure: entropy, perplexity) the class is A up to
    ``thresholds[0]``, C above ``thresholds[1]`` and B between. With ``"below"`` (more is
    surer: the top-two margin) it is A from ``thresholds[0]`` up, C below ``thresholds[1]``
    and B between. ``nan`` (no score) is C.

    Args:
        value: The score.
        thresholds: ``(τ_A, τ_C)``.
        direction: Which side of a threshold is the unsure one.

    Returns:
        ``"A"``, ``"B"`` or ``"C"``.
    """
    to_a, to_c = thresholds
    if value != value:  # nan
        return "C"
    if direction == "above":
        return "A" if value <= to_a else "C" if value > to_c else "B"
    return "A" if value >= to_a else "C" if value < to_c else "B"
