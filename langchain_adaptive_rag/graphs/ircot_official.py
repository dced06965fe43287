r"""The official IRCoT code's rules for queries, paragraphs and answers.

IRCoT's and Adaptive-RAG's reference modes follow them. The official code
(StonyBrookNLP/ircot, ``commaqa/inference/ircot.py``; Adaptive-RAG runs the same file)
shapes every query, paragraph and answer with these rules:

- a query is the question or the latest chain sentence that is not a reasoning sentence,
  with its wh-words and the auxiliaries "is" and "does" removed;
- a retrieved paragraph is skipped when it has more than 600 words, or when it matches a
  collected one: the same title and the same text among the collected ones, or both
  title and text at a fuzzy ratio of 90 or more (rapidfuzz's ``fuzz.ratio``);
- the model sees the first 350 words of each collected paragraph;
- a chain sentence gives the answer when it matches ``.* answer is:? (.*)\.?``
  (case-sensitive, from the sentence's start, so the last marker counts); the reader's
  output is read with the same pattern, and taken whole when it does not match.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rapidfuzz import fuzz

from langchain_adaptive_rag.state import RetrievedDoc

__all__ = [
    "ANSWER_PATTERN",
    "CLOSE_MATCH_RATIO",
    "LONG_PARAGRAPH_WORDS",
    "PARAGRAPH_VIEW_WORDS",
    "QUERY_STOP_WORDS",
    "chain_answer",
    "collect_paragraphs",
    "is_close_paragraph",
    "is_reasoning_sentence",
    "paragraph_view",
    "reader_answer",
    "without_question_words",
]

QUERY_STOP_WORDS = frozenset({"who", "what", "when", "where", "why", "which", "how", "does", "is"})
"""The words the official IRCoT retriever removes from every query (``remove_wh_words``)."""

ANSWER_PATTERN = re.compile(r".* answer is:? (.*)\.?")
"""The official configs' answer pattern (``answer_extractor_regex``), matched from a
text's start: case-sensitive, and its greedy ``.*`` makes the last marker count."""

LONG_PARAGRAPH_WORDS = 600
"""A retrieved paragraph with more words than this (split on spaces) is skipped."""

PARAGRAPH_VIEW_WORDS = 350
"""Words of each collected paragraph the model sees (``max_para_num_words``)."""

CLOSE_MATCH_RATIO = 90.0
"""Fuzzy ratio (0-100) at which both a title and a text match a collected paragraph's."""

_REASONING_STARTS = ("thus ", "thus,", "so ", "so,", "that is,", "therefore", "hence")
_ARITHMETIC_STEP = re.compile(
    r"(.*)(\d[\d,]*\.?\d+|\d+) ([+-]) (\d[\d,]*\.?\d+|\d+) = (\d[\d,]*\.?\d+|\d+)(.*)"
)


def is_reasoning_sentence(sentence: str) -> bool:
    """Whether a chain sentence only reasons over earlier ones (no query source).

    As the official IRCoT code: a sentence that starts with "Thus", "So", "That is,",
    "Therefore" or "Hence" (any case), or that holds an addition or subtraction
    ``a + b = c``.
    """
    lowered = sentence.lower()
    return lowered.startswith(_REASONING_STARTS) or _ARITHMETIC_STEP.match(sentence) is not None


def without_question_words(query: str) -> str:
    """``query`` without its wh-words and the auxiliaries "is" and "does".

    Words are split on single spaces and compared stripped and lower-cased, as the
    official IRCoT retriever does, so "Who" goes and "born?" stays.
    """
    return " ".join(w for w in query.split(" ") if w.strip().lower() not in QUERY_STOP_WORDS)


def _without_last_fullstop(answer: str) -> str:
    return answer[:-1] if answer.endswith(".") else answer


def chain_answer(sentence: str) -> str | None:
    """The answer a chain sentence gives, or ``None`` when it gives none (the chain goes on).

    As the official exit controller: [`ANSWER_PATTERN`][] matched from the sentence's
    start, its group without a last full stop. "So the answer is: 1931." gives "1931";
    "So the Answer is 1931." gives none (the pattern is case-sensitive).
    """
    match = ANSWER_PATTERN.match(sentence)
    return None if match is None else _without_last_fullstop(match.group(1))


def reader_answer(output: str) -> str:
    """The answer in a chain-of-thought reader's output, as the official answer extractor.

    Surrounding double quotes are dropped, then [`ANSWER_PATTERN`][] is matched; with no
    match the whole output is the answer (``match_all_on_failure``, up to its first line
    break). A last full stop is removed either way.
    """
    if output.startswith('"') and output.endswith('"'):
        output = output[1:-1]
    match = ANSWER_PATTERN.match(output) or re.match(r"(.*)", output)
    assert match is not None  # (.*) matches every string
    return _without_last_fullstop(match.group(1))


def _title(doc: RetrievedDoc) -> str:
    return str(doc["metadata"].get("title", ""))


def is_close_paragraph(collected: Sequence[RetrievedDoc], doc: RetrievedDoc) -> bool:
    """Whether ``doc`` repeats a collected paragraph (``is_para_closely_matching``).

    True when its title is among the collected titles and its text among the collected
    texts, or when one collected paragraph's title and text both have a fuzzy ratio of at
    least [`CLOSE_MATCH_RATIO`][] with its own. A paragraph without a title has the title
    ``""``, so texts alone decide.
    """
    titles = [_title(kept) for kept in collected]
    texts = [kept["text"] for kept in collected]
    title, text = _title(doc), doc["text"]
    if title in titles and text in texts:
        return True
    return any(
        fuzz.ratio(kept_title, title) >= CLOSE_MATCH_RATIO
        and fuzz.ratio(kept_text, text) >= CLOSE_MATCH_RATIO
        for kept_title, kept_text in zip(titles, texts, strict=True)
    )


def collect_paragraphs(
    collected: Sequence[RetrievedDoc], retrieved: Sequence[RetrievedDoc], max_paragraphs: int
) -> tuple[list[RetrievedDoc], list[int]]:
    """Add the retrieved paragraphs to the collection as the official retriever does.

    In retriever order, a paragraph is skipped when it has more than
    [`LONG_PARAGRAPH_WORDS`][] words, repeats a collected one ([`is_close_paragraph`][]),
    or the collection holds ``max_paragraphs`` already.

    Returns:
        The new collection, and the retriever ranks of the paragraphs added.
    """
    kept = list(collected)
    added: list[int] = []
    for rank, doc in enumerate(retrieved):
        if len(doc["text"].split(" ")) > LONG_PARAGRAPH_WORDS:
            continue
        if is_close_paragraph(kept, doc) or len(kept) >= max_paragraphs:
            continue
        kept.append(doc)
        added.append(rank)
    return kept, added


def paragraph_view(doc: RetrievedDoc, max_words: int = PARAGRAPH_VIEW_WORDS) -> RetrievedDoc:
    """``doc`` with its text cut to its first ``max_words`` words, as the model sees it.

    Words are split on single spaces, so line breaks stay.
    """
    return {**doc, "text": " ".join(doc["text"].split(" ")[:max_words])}
