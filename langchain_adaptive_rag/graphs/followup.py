"""A follow-up question made to stand on its own before the run retrieves.

"When was she born?" after a turn about a film director means nothing to a retriever.
Before a follow-up's first retrieval the question is rewritten from the chat's history
(as LangChain's history-aware retriever does), or the last turn is put before it, as
``QAPrompts.followup_query`` says. Generation still reads the question as asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from langchain_core.messages import BaseMessage

from langchain_adaptive_rag.graphs._streaming import token_stream
from langchain_adaptive_rag.options import GenerationTrace, TraceModel
from langchain_adaptive_rag.prompts import FollowupQuery, QAPrompts, format_turns, recent_turns

__all__ = ["StandaloneQuestion", "standalone_question"]


@dataclass(frozen=True)
class StandaloneQuestion:
    """The question a follow-up's retrievals read, and how it was made."""

    text: str
    """The question as retrieval reads it."""
    how: FollowupQuery
    """``"rewrite"``, ``"concatenate"`` or ``"as_asked"`` (no history, or a rewrite that
    came back empty)."""
    note: str = ""
    """``""``, or why the question stayed as asked."""
    trace: GenerationTrace | None = None
    """The rewrite's generation (``None``: no model call)."""


def standalone_question(
    model: TraceModel,
    prompts: QAPrompts,
    question: str,
    history: Sequence[BaseMessage],
) -> StandaloneQuestion:
    """The question as its retrievals should read it, given the earlier turns.

    Args:
        model: The graph's model (it writes the rewrite).
        prompts: The prompts: ``followup_query``, ``followup_template``,
            ``followup_max_tokens`` and ``history_template``.
        question: The question as asked.
        history: The earlier turns the run shows (empty: not a follow-up).

    Returns:
        The question unchanged without history or with ``followup_query="as_asked"``; the
        last turn's question and answer before it with ``"concatenate"``; the first line
        the model writes with ``"rewrite"`` (the question as asked when that is blank).
    """
    if not history or prompts.followup_query == "as_asked":
        return StandaloneQuestion(question, "as_asked")
    if prompts.followup_query == "concatenate":
        last = " ".join(m.text.strip() for m in recent_turns(history, 1))
        return StandaloneQuestion(f"{last} {question}".strip(), "concatenate")
    prompt = prompts.followup_template.format(
        history=format_turns(prompts, history), question=question
    )
    budget = prompts.followup_max_tokens
    decoding = replace(
        model.decoding,
        max_new_tokens=budget,
        min_new_tokens=min(model.decoding.min_new_tokens, budget),
        stop=("\n",),
    )
    with token_stream(prompt, "followup") as sink:
        trace = model.generate_trace(prompt, decoding=decoding, on_token=sink)[0]
    rewritten = trace.text.strip().split("\n", 1)[0].strip()
    if not rewritten:
        note = "the rewrite came back empty: retrieval reads the question as asked"
        return StandaloneQuestion(question, "as_asked", note, trace)
    return StandaloneQuestion(rewritten, "rewrite", "", trace)
