"""The prompts the toy model was trained on and is run with."""

from __future__ import annotations

from dataclasses import replace

from langchain_adaptive_rag.graphs.search_presets import SEARCH_R1
from langchain_adaptive_rag.prompts import QAPrompts

__all__ = ["TOY_PROMPTS", "TOY_SEARCH_PROTOCOL"]

TOY_PROMPTS = QAPrompts(
    exemplars=(), forced_answer=" So the answer is", followup_query="concatenate"
)
"""Prompts of the toy world: the shared format without exemplars (short prompts). A forced
answer ends at "is" without the reference code's trailing space: the toy tokenizer's
answers are single tokens that carry their leading space (" 1902"), so a prompt ending in
a space asks for a token the model never saw there. The toy model was never taught to
rewrite a question, so a follow-up's retrievals read the last turn before it
(``followup_query="concatenate"``)."""

TOY_SEARCH_PROTOCOL = replace(
    SEARCH_R1,
    name="toy_search_r1",
    prompt="Search and answer.\nQuestion: {question}",
    thought_format="{thought}",
    no_action="end",
    invalid_message="",
    turn_max_tokens=48,
    source="Search-R1's tags, documents, answer and limits (search_presets.SEARCH_R1) "
    "with the short prompt of the toy model's search traces (toyworld_training.data)",
)
"""The search protocol of the toy model's search traces: Search-R1's tags (``<search>``,
``<information>``, ``<answer>``), documents (``Doc i(Title: t) text``), answer reading and
limits (4 searches, 5 turns), with a one-line prompt, no ``<think>`` block (a turn's
reasoning is the toy world's own step sentence), 48 tokens a turn, and a turn with
neither a query nor an answer ending the run (the traces never show Search-R1's "My
previous action is invalid" retry). A trace searches
the entity of each reasoning step (" Lost Tower ", then the director's name) and ends
with the toy answer's sentence and ``<answer> 1929 </answer>``."""
