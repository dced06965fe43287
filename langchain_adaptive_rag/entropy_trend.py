"""ETC's entropy-trend signals: words, entropy differences, smoothing, scores, trigger, query.

ETC is Li et al., "Modeling Uncertainty Trends for Timely Retrieval in Dynamic RAG"
(AAAI 2026).

Every function works on one draft: its token pieces, per-token entropies and the
head-averaged attention rows of its tokens. Words are the ETC code's (a punctuation or
whitespace token is a word of its own); a word's entropy is the largest of its tokens'.
Over content words, the first difference is a word's entropy minus the previous content
word's, the second difference a word's first difference minus the previous non-zero one;
the second differences are smoothed with a weight that follows how far they stray from
their running mean, and multiplied by the word's largest attention to the draft's words,
normalised per sentence. Retrieval fires at the first word over the threshold.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from langchain_adaptive_rag.signals import Word

__all__ = [
    "UNMERGEABLE",
    "ETCTrigger",
    "attention_to_columns",
    "entropy_differences",
    "etc_scores",
    "etc_sentence_spans",
    "etc_trigger",
    "etc_words",
    "max_attention_to_draft",
    "select_query_words",
    "smoothed_trend",
    "word_rows",
]

UNMERGEABLE = frozenset(string.whitespace + string.punctuation)
"""Characters whose token is always a word of its own, and ends the word before the next
token (the ETC code's ``tokens_cannot_merged``: each whitespace and punctuation character
as the tokenizer writes it after a digit)."""


def etc_words(pieces: Sequence[str]) -> list[Word]:
    """The ETC code's words of a draft's token pieces.

    A token starts a word when it is the first, when its text starts with a space (the
    tokenizer's space marker), when it is one whitespace or punctuation character
    ([`UNMERGEABLE`][]), or when the token before it is one.

    Args:
        pieces: Decoded text of each token.

    Returns:
        The words in order, covering every token once.
    """
    starts = [
        i
        for i, piece in enumerate(pieces)
        if i == 0 or piece.startswith(" ") or piece in UNMERGEABLE or pieces[i - 1] in UNMERGEABLE
    ]
    ends = [*starts[1:], len(pieces)] if starts else []
    return [
        Word(start=s, end=e, text="".join(pieces[s:e]).strip())
        for s, e in zip(starts, ends, strict=True)
    ]


def entropy_differences(
    entropy: Sequence[float] | np.ndarray, content: Sequence[bool]
) -> tuple[np.ndarray, np.ndarray]:
    """First and second differences of word entropy over content words.

    ``ΔH`` of a content word is its entropy minus that of the nearest earlier content
    word (0 when there is none); ``Δ²H`` of a content word (from the third word on) is its
    ``ΔH`` minus the nearest earlier non-zero ``ΔH`` (0 when there is none). Function
    words keep 0 in both.

    Args:
        entropy: Each word's entropy ``H``.
        content: Each word's content flag.

    Returns:
        ``(ΔH, Δ²H)``, one value per word.
    """
    h = np.asarray(entropy, dtype=np.float64)
    first = np.zeros(len(h), dtype=np.float64)
    second = np.zeros(len(h), dtype=np.float64)
    for i in range(1, len(h)):
        if content[i]:
            earlier = [j for j in range(i) if content[j]]
            if earlier:
                first[i] = h[i] - h[earlier[-1]]
    for i in range(2, len(h)):
        if content[i]:
            earlier = [j for j in range(1, i) if first[j] != 0]
            if earlier:
                second[i] = first[i] - first[earlier[-1]]
    return first, second


def smoothed_trend(
    second: Sequence[float] | np.ndarray, memory: Literal["raw", "smoothed"] = "raw"
) -> np.ndarray:
    """Dynamically smoothed second differences ``M_t``.

    Over the non-zero ``Δ²H_t`` in order, with ``E`` their running mean (this one
    included) and ``M_{t-1}`` the memory (0 before the first):
    ``w = |M_{t-1} - E| / (|Δ²H_t - E| + |M_{t-1} - E|)``, ``alpha = 0.9 + 0.1 w`` and
    ``M_t = alpha Δ²H_t + (1 - alpha) M_{t-1}``. The memory is the previous raw ``Δ²H``
    (``"raw"``, the ETC code) or the previous ``M`` (``"smoothed"``, an exponential
    smoother as the paper writes it). When ``M_{t-1} = E = Δ²H_t`` the weight is
    ``0/0``: ``nan`` in the code (which never triggers) with the raw memory, ``Δ²H_t``
    (the value every ``alpha`` gives) with the smoothed one. Zero second differences keep
    ``M = 0``.

    Args:
        second: ``Δ²H`` of each word.
        memory: What ``M_{t-1}`` holds.

    Returns:
        ``M`` of each word.
    """
    values = np.asarray(second, dtype=np.float64)
    smoothed = np.zeros(len(values), dtype=np.float64)
    previous = 0.0
    total = 0.0
    count = 0
    for i, value in enumerate(values):
        if value == 0:
            continue
        count += 1
        total += float(value)
        mean = total / count
        spread = abs(value - mean) + abs(previous - mean)
        if spread == 0:  # M_{t-1} = E = Δ²H_t: every alpha gives Δ²H_t; the code's 0/0 is nan
            smoothed[i] = math.nan if memory == "raw" else value
        else:
            alpha = 0.9 + 0.1 * abs(previous - mean) / spread
            smoothed[i] = alpha * value + (1 - alpha) * previous
        previous = float(value) if memory == "raw" else float(smoothed[i])
    return smoothed


def word_rows(rows: np.ndarray, words: Sequence[Word], offset: int = 0) -> np.ndarray:
    """Attention rows of words: each word's tokens' rows averaged.

    Args:
        rows: Head-averaged attention of the draft's tokens, shape ``(T, C)``.
        words: Words over those tokens.
        offset: Index of the first draft token's row in ``rows``.

    Returns:
        Shape ``(len(words), C)``.
    """
    matrix = np.asarray(rows, dtype=np.float64)
    if not words:
        return np.zeros((0, matrix.shape[1] if matrix.ndim == 2 else 0), dtype=np.float64)
    return np.stack([matrix[offset + w.start : offset + w.end].mean(axis=0) for w in words])


def max_attention_to_draft(rows: np.ndarray, words: Sequence[Word]) -> np.ndarray:
    """Each draft word's largest attention to a draft word (the ETC code's ``max_atten``).

    The rows of a word's tokens are averaged; a column word's attention is the sum over
    its tokens' columns; each row is divided by its total over every column (the prompt's
    too; ``+ 1e-10``) and the largest value over the draft's words is kept.

    Args:
        rows: Head-averaged attention rows of the draft's tokens over the prompt and the
            draft, shape ``(T, P + T)`` (the prompt's ``P`` columns first).
        words: The draft's words ([`etc_words`][]).

    Returns:
        One value per word.
    """
    matrix = np.asarray(rows, dtype=np.float64)
    if not words:
        return np.zeros(0, dtype=np.float64)
    prompt = matrix.shape[1] - matrix.shape[0]
    averaged = word_rows(matrix, words)
    to_draft = np.stack(
        [averaged[:, prompt + w.start : prompt + w.end].sum(axis=1) for w in words], axis=1
    )
    to_draft /= averaged.sum(axis=1, keepdims=True) + 1e-10
    result: np.ndarray = to_draft.max(axis=1)
    return result


def etc_sentence_spans(
    sentences: Sequence[str], pieces: Sequence[str], words: Sequence[Word]
) -> list[tuple[int, int]]:
    """The ETC code's word range of each sentence of a draft.

    From the first word not yet taken, the range grows one word at a time until the
    tokens' text from its first word to the current one (included) contains the
    sentence; it then ends after that word. A sentence never found takes every word left.
    Empty ranges are dropped, and the search stops once every word is taken.

    Args:
        sentences: The draft's sentences, stripped (spaCy's, in the ETC code).
        pieces: The draft's token pieces.
        words: Its words ([`etc_words`][]).

    Returns:
        ``(start, end)`` word ranges, in order.
    """
    spans: list[tuple[int, int]] = []
    first = 0
    for sentence in sentences:
        if first == len(words):
            break
        last = first
        while last < len(words) and sentence not in "".join(
            pieces[words[first].start : words[last].end]
        ):
            last += 1
        if last < len(words):
            last += 1
        if last > first:
            spans.append((first, last))
        first = last
    return spans


def etc_scores(
    max_attention: Sequence[float] | np.ndarray,
    trend: Sequence[float] | np.ndarray,
    spans: Sequence[tuple[int, int]],
) -> np.ndarray:
    """ETC's score of each word: its sentence-normalised largest attention times ``M``.

    In each sentence the largest attentions are scaled to average 1
    (``a · n / (Σ a + 1e-10)``); words outside every sentence score 0.

    Args:
        max_attention: Each word's [`max_attention_to_draft`][].
        trend: Each word's smoothed second difference ``M`` ([`smoothed_trend`][]).
        spans: Word ranges of the sentences ([`etc_sentence_spans`][]).

    Returns:
        One score per word.
    """
    attention = np.asarray(max_attention, dtype=np.float64)
    smoothed = np.asarray(trend, dtype=np.float64)
    scores = np.zeros(len(smoothed), dtype=np.float64)
    for start, end in spans:
        share = attention[start:end] * (end - start) / (attention[start:end].sum() + 1e-10)
        scores[start:end] = share * smoothed[start:end]
    return scores


@dataclass(frozen=True)
class ETCTrigger:
    """Where ETC fires: the first word over the threshold, and its sentence."""

    sentence: tuple[int, int]
    """Word range of the triggering sentence."""
    word: int
    """Index of the first word over the threshold (retrieval replaces the text from it)."""
    hot: tuple[int, ...]
    """Every word over the threshold from ``word`` to the sentence's end (the rows the
    query reads)."""


def etc_trigger(
    scores: Sequence[float] | np.ndarray,
    spans: Sequence[tuple[int, int]],
    threshold: float,
    *,
    absolute: bool = False,
) -> ETCTrigger | None:
    """The first sentence with a word whose score passes ``threshold``.

    Args:
        scores: Each word's [`etc_scores`][].
        spans: Word ranges of the sentences.
        threshold: The threshold (``hallucination_threshold``; ``nan`` never passes).
        absolute: Compare ``|score|`` (the code's ``thres_abs``).

    Returns:
        The trigger, or ``None``.
    """
    values = np.asarray(scores, dtype=np.float64)
    for start, end in spans:
        passing = [
            i for i in range(start, end) if (abs(values[i]) if absolute else values[i]) > threshold
        ]
        if passing:
            return ETCTrigger(sentence=(start, end), word=passing[0], hot=tuple(passing))
    return None


def attention_to_columns(
    rows: np.ndarray,
    words: Sequence[Word],
    columns: Sequence[tuple[int, int]],
    draft: Sequence[bool],
) -> np.ndarray:
    """Each draft word's attention to each column word (what the query weighs).

    A column's attention is the sum over its tokens' columns of the word's averaged rows;
    the columns of the draft's own words are divided by the row's total (``+ 1e-10``), as
    the ETC code divides them in place before reading the query's weights.

    Args:
        rows: Head-averaged attention rows of the draft's tokens, ``(T, P + T)``.
        words: The draft's words.
        columns: Token ranges ``(start, end)`` of the column words, in ``rows``' columns.
        draft: Whether each column is a draft word.

    Returns:
        Shape ``(len(words), len(columns))``.
    """
    if not words or not columns:
        return np.zeros((len(words), len(columns)), dtype=np.float64)
    averaged = word_rows(rows, words)
    weights = np.stack([averaged[:, s:e].sum(axis=1) for s, e in columns], axis=1)
    divided = np.asarray(draft, dtype=bool)
    weights[:, divided] /= averaged.sum(axis=1, keepdims=True) + 1e-10
    return weights


def select_query_words(
    weights: Sequence[float] | np.ndarray,
    candidates: Sequence[int],
    content: Sequence[bool],
    top_n: int,
) -> list[int]:
    """The ``top_n`` content candidates by weight, in text order (ties: the earlier).

    Args:
        weights: Each column's weight (the triggering rows' sum).
        candidates: Column indexes the query may take, in text order.
        content: Each candidate's content flag.
        top_n: How many to keep (``retrieve_keep_top_k``).

    Returns:
        The chosen column indexes, in text order.
    """
    values = np.asarray(weights, dtype=np.float64)
    kept = [i for i, flag in zip(candidates, content, strict=True) if flag]
    ranked = sorted(kept, key=lambda i: -float(values[i]))[:top_n]
    return sorted(ranked)
