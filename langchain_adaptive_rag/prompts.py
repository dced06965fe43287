r"""Prompt templates and answer extraction shared by the methods.

The default format is the one of the DRAGIN code: few-shot exemplars
``Question: {q}\\nAnswer: {reasoning} So the answer is {a}.``, then (with retrieval) a
numbered ``Context:`` block, then the case ``Question: {q}\\nAnswer:`` followed by the
answer generated so far.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.state import RetrievedDoc

__all__ = [
    "DEFAULT_EXEMPLARS",
    "AnswerKind",
    "Exemplar",
    "FollowupQuery",
    "QAPrompts",
    "build_prompt",
    "extract_answer",
    "format_turns",
    "read_answer_as",
    "recent_turns",
]

AnswerKind = Literal["span", "yes_no"]
"""``span``: the answer is the text after the marker; ``yes_no``: it is read as "yes" when
it starts with yes and "no" otherwise (StrategyQA, as in the DRAGIN code)."""

FollowupQuery = Literal["rewrite", "concatenate", "as_asked"]
"""How a follow-up question becomes the question its retrieval reads: ``"rewrite"``
(the model rewrites it from the history), ``"concatenate"`` (the last turn goes before
it) or ``"as_asked"`` (unchanged)."""


@dataclass(frozen=True)
class Exemplar:
    """One few-shot demonstration."""

    question: str
    reasoning: str
    answer: str


DEFAULT_EXEMPLARS: tuple[Exemplar, ...] = (
    Exemplar(
        question="When was the director of film Blue Harbour born?",
        reasoning="The film Blue Harbour was directed by Anna Berg. Anna Berg was born in 1931.",
        answer="1931",
    ),
    Exemplar(
        question="Who was born first, Carl Lind or Maria Holm?",
        reasoning="Carl Lind was born in 1902. Maria Holm was born in 1899.",
        answer="Maria Holm",
    ),
)
"""Two multi-hop demonstrations in the 2WikiMultihopQA style."""


@dataclass(frozen=True)
class QAPrompts:
    """Overridable templates of the few-shot QA prompt."""

    exemplars: tuple[Exemplar, ...] = DEFAULT_EXEMPLARS
    """Few-shot demonstrations (may be empty)."""
    exemplar_template: str = (
        "Question: {question}\nAnswer: {reasoning} So the answer is {answer}.\n"
    )
    """One demonstration; fields ``question``, ``reasoning``, ``answer``."""
    context_template: str = "Context:\n{docs}Answer in the same format as before.\n"
    """The retrieved-documents block; field ``docs`` (the formatted documents)."""
    doc_template: str = "[{index}] {text}\n"
    """One document; fields ``index`` (from 1) and ``text``."""
    case_template: str = "Question: {question}\nAnswer:"
    """The question being answered; the answer so far follows it."""
    answer_marker: str = "the answer is"
    """Generation stops once this appears; the answer is the text after it."""
    forced_answer: str = " So the answer is"
    """Appended when no answer was given, to force one. The DRAGIN evaluation code appends
    a trailing space; without it here, because tokenizers that attach a space to the word
    after it (SentencePiece's ``▁``, byte-level BPE's ``Ġ``: Gemma, Llama 3, GPT-2) never
    saw a lone space before an answer: Gemma 3 270M then answered "1." in every forced
    HotpotQA case tried, and the answer itself without the space."""
    history_template: str = "Question: {question}\nAnswer: {answer}\n"
    """One earlier chat turn; fields ``question`` and ``answer``."""
    history_turns: int = 4
    """Earlier chat turns shown (the most recent; ``0``: none): a thread's memory."""
    followup_query: FollowupQuery = "rewrite"
    """How a follow-up (a question asked after earlier turns) becomes the question its
    retrievals read, so that "When was she born?" finds her passage: ``"rewrite"``: the
    model rewrites it to stand on its own with ``followup_template``, as LangChain's
    history-aware retriever does; ``"concatenate"``: the last turn's question and answer
    go before it, for a model that cannot rewrite (the toy model); ``"as_asked"``:
    retrieval reads it unchanged. Generation always sees the question as asked, after the
    history."""
    followup_template: str = (
        "Rewrite the last question so that it can be understood without the conversation: "
        "replace each pronoun or reference with the name it refers to. Write only the "
        "question.\n\n{history}Last question: {question}\nStandalone question:"
    )
    """The rewrite prompt; fields ``history`` (the earlier turns, each in
    ``history_template``) and ``question``. The first line generated is the question."""
    followup_max_tokens: int = 48
    """Token budget of the rewrite (at least 1)."""
    stop: tuple[str, ...] = field(default=("\n",))
    """Stop strings of every generation (the case's answer is one line)."""
    answer_kind: AnswerKind = "span"
    """How the extracted answer is read (see [`AnswerKind`][])."""

    def __post_init__(self) -> None:
        turns = self.history_turns
        if isinstance(turns, bool) or not isinstance(turns, int) or turns < 0:
            msg = f"QAPrompts.history_turns must be an integer >= 0, got {turns!r}."
            raise AdaptiveRAGError(msg)
        if self.followup_query not in get_args(FollowupQuery):
            msg = (
                f"QAPrompts.followup_query must be one of {get_args(FollowupQuery)}, got "
                f"{self.followup_query!r}."
            )
            raise AdaptiveRAGError(msg)
        budget = self.followup_max_tokens
        if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= 4096:
            msg = (
                f"QAPrompts.followup_max_tokens must be an integer from 1 to 4096, got {budget!r}."
            )
            raise AdaptiveRAGError(msg)
        if "{question}" not in self.followup_template:
            msg = (
                "QAPrompts.followup_template must contain the field {question} (and may "
                f"contain {{history}}), got {self.followup_template!r}."
            )
            raise AdaptiveRAGError(msg)


def build_prompt(
    prompts: QAPrompts,
    question: str,
    text: str = "",
    docs: Sequence[RetrievedDoc] = (),
    history: Sequence[BaseMessage] = (),
) -> str:
    """The full completion prompt for ``question`` with the answer so far and documents.

    Args:
        prompts: Templates.
        question: The question.
        text: Answer text accepted so far (appended verbatim after the case).
        docs: Documents to show in the context block.
        history: Earlier chat turns; each human message and the AI reply after it are
            shown after the exemplars, each in ``history_template``.

    Returns:
        The prompt text.
    """
    parts = [
        prompts.exemplar_template.format(
            question=e.question, reasoning=e.reasoning, answer=e.answer
        )
        for e in prompts.exemplars
    ]
    parts.append(format_turns(prompts, history))
    if docs:
        block = "".join(
            prompts.doc_template.format(index=i, text=d["text"]) for i, d in enumerate(docs, 1)
        )
        parts.append(prompts.context_template.format(docs=block))
    parts.append(prompts.case_template.format(question=question) + text)
    return "".join(parts)


def extract_answer(
    text: str, marker: str = "the answer is", kind: AnswerKind = "span"
) -> str | None:
    """The first answer given after ``marker`` (case-insensitive), without trailing period.

    The answer is the rest of the marker's line. As in the DRAGIN code, the first
    occurrence counts (a draft generated past its line may start the next exemplar,
    whose own "the answer is" follows); one with nothing after it on its line (a draft
    cut by the budget) is skipped.

    Args:
        text: Generated answer text.
        marker: The phrase that introduces the answer.
        kind: How the answer is read ([`read_answer_as`][]).

    Returns:
        The answer, or ``None`` when no marker is followed by an answer.
    """
    for match in re.finditer(re.escape(marker), text, flags=re.IGNORECASE):
        answer = text[match.end() :].split("\n", 1)[0].strip()
        if answer:
            return read_answer_as(answer, kind)
    return None


def read_answer_as(answer: str, kind: AnswerKind = "span") -> str:
    """An extracted or forced answer, read as ``kind``.

    This is the graph's answer, not scoring: the SQuAD-style normalisation that metrics
    compare is [`evaluation.metrics.normalize_answer`][].

    Args:
        answer: The answer text.
        kind: ``span`` strips a trailing period; ``yes_no`` gives "yes" when the answer
            starts with "yes" (case-insensitive) and "no" otherwise.

    Returns:
        The answer.
    """
    answer = answer.strip()
    if kind == "yes_no":
        return "yes" if answer[:3].lower() == "yes" else "no"
    return answer[:-1].strip() if answer.endswith(".") else answer


def recent_turns(history: Sequence[BaseMessage], count: int) -> list[BaseMessage]:
    """The last ``count`` human/AI turns of a chat history, as messages."""
    kept = _turns(history)[-count:] if count else []
    return [m for q, a in kept for m in (HumanMessage(q), AIMessage(a))]


def format_turns(prompts: QAPrompts, history: Sequence[BaseMessage]) -> str:
    """The earlier turns of ``history``, each in ``prompts.history_template``."""
    return "".join(
        prompts.history_template.format(question=q, answer=a) for q, a in _turns(history)
    )


def _turns(history: Sequence[BaseMessage]) -> list[tuple[str, str]]:
    """(question, answer) pairs of a chat history: each human message with the next AI one."""
    turns: list[tuple[str, str]] = []
    pending: str | None = None
    for message in history:
        if isinstance(message, HumanMessage):
            pending = message.text
        elif isinstance(message, AIMessage) and pending is not None:
            turns.append((pending, message.text))
            pending = None
    return turns
