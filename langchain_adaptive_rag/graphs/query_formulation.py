"""Queries formed from the text before a trigger, shared by the methods' ablations.

The DRAGIN paper compares retrieval timings under one query (its Table 4) and query
formulations under one timing (its Table 6); the DRAGIN code names them
``query_formulation``. Each method keeps its own query by default and can ask instead
with one of these, built from the context before its trigger: the question, the accepted
answer text and the draft's text before the triggering sentence (the code's
``forward_all``).
"""

from __future__ import annotations

from typing import Literal

from langchain_adaptive_rag.graphs.policy import Policy, RunContext
from langchain_adaptive_rag.graphs.pos import load_sentence_splitter
from langchain_adaptive_rag.signals import split_sentences

__all__ = ["ContextQuery", "context_before_trigger", "context_query"]

ContextQuery = Literal["last_sentence", "last_n_tokens", "full_context"]
"""A query from the context before the trigger: its last sentence, its last ``n`` tokens,
or all of it (the DRAGIN code's ``last_sentence``, ``last_n_tokens`` and
``forward_all``)."""


def context_before_trigger(question: str, text: str, pending: str = "") -> str:
    """The question, the accepted text and the draft's text before the trigger, joined.

    Args:
        question: The question.
        text: The answer text accepted so far.
        pending: Draft text before the trigger that is not accepted yet.

    Returns:
        The non-empty parts, stripped, joined by single spaces (the code's ``forward_all``).
    """
    return " ".join(part.strip() for part in (question, text, pending) if part.strip())


def context_query(
    kind: ContextQuery,
    context: str,
    ctx: RunContext,
    *,
    last_n: int,
    reference: bool,
    spacy_model: str | None = "en_core_web_sm",
) -> str:
    """The ``kind`` query of ``context``.

    Args:
        kind: Which query (see [`ContextQuery`][]).
        context: The text before the trigger ([`context_before_trigger`][]).
        ctx: The run context (its model's tokenizer counts tokens).
        last_n: ``n`` of ``last_n_tokens``.
        reference: As the DRAGIN code: sentences by ``spacy_model`` when installed, and
            the last ``n`` tokens as the tokenizer's pieces joined by spaces; otherwise
            the package's sentence rule (FS-RAG's) and the last ``n`` tokens decoded.
        spacy_model: The spaCy pipeline of the reference sentence split.

    Returns:
        The query; the whole context when it has ``n`` tokens or fewer.
    """
    if kind == "full_context":
        return context
    if kind == "last_sentence":
        if reference:
            sentences = load_sentence_splitter(spacy_model)(context)
        else:
            sentences = [s.strip() for s in split_sentences(context) if s.strip()]
        return sentences[-1] if sentences else ""
    tokenizer = getattr(ctx.model, "hf_tokenizer", None)
    if reference and tokenizer is not None:
        pieces = tokenizer.tokenize(context)
        return context if last_n >= len(pieces) else " ".join(pieces[-last_n:])
    return Policy.cut_query(ctx, context, last_n)
