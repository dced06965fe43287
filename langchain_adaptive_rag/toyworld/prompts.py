"""The prompts the toy model was trained on and is run with."""

from __future__ import annotations

from langchain_adaptive_rag.prompts import QAPrompts

__all__ = ["TOY_PROMPTS"]

TOY_PROMPTS = QAPrompts(
    exemplars=(), forced_answer=" So the answer is", followup_query="concatenate"
)
"""Prompts of the toy world: the shared format without exemplars (short prompts). A forced
answer ends at "is" without the reference code's trailing space: the toy tokenizer's
answers are single tokens that carry their leading space (" 1902"), so a prompt ending in
a space asks for a token the model never saw there. The toy model was never taught to
rewrite a question, so a follow-up's retrievals read the last turn before it
(``followup_query="concatenate"``)."""
