"""Pure numpy signal functions over generation traces.

No torch and no model here: every function takes arrays and returns arrays, and each is
tested against values computed by hand.
"""

from __future__ import annotations

import collections
import math
import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = [
    "FlareDecision",
    "RINDTrigger",
    "Word",
    "aggregate_words",
    "attention_received",
    "bare_word",
    "energy_score",
    "first_sentence",
    "flare_sentence_score",
    "folded_word",
    "gram_uncertainty",
    "is_content_word",
    "length_normalised_entropy",
    "log_softmax",
    "masked_query",
    "mean_entropy",
    "merge_tokens_into_words",
    "multi_sample_perplexity",
    "perplexity",
    "qfs_select",
    "reference_flare_windows",
    "reference_masked_query",
    "reference_qfs_weights",
    "reference_sentence_spans",
    "rind_scores",
    "rind_trigger",
    "sample_logprob_variance",
    "semantic_entropy",
    "split_sentences",
    "token_entropy",
    "token_logprobs",
    "token_sentences",
    "tokens_covering",
    "top_k_entropy",
    "top_two_margin",
    "word_sentences",
]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-softmax over the last axis, computed stably in float64.

    Args:
        logits: Shape ``(..., vocab)``; ``-inf`` entries get probability 0.

    Returns:
        Log-probabilities, same shape, float64.
    """
    x = np.asarray(logits, dtype=np.float64)
    peak = np.max(x, axis=-1, keepdims=True)
    shifted = x - peak
    result: np.ndarray = shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))
    return result


def token_entropy(logits: np.ndarray) -> np.ndarray:
    """Entropy in nats, ``H = -sum_v p(v) log p(v)``, of each next-token distribution.

    Args:
        logits: Shape ``(T, vocab)`` (or ``(vocab,)``).

    Returns:
        Shape ``(T,)`` (or a scalar array).
    """
    logp = log_softmax(logits)
    p = np.exp(logp)
    terms = np.where(p > 0, p * np.where(p > 0, logp, 0.0), 0.0)
    result: np.ndarray = -np.sum(terms, axis=-1)
    return result


def top_k_entropy(
    top_logprobs: Sequence[float] | np.ndarray, chosen_logprob: float | None = None
) -> tuple[float, float]:
    """Entropy (nats) of a next-token distribution known only by its top ``k`` entries.

    A served model returns the ``k`` most likely tokens' log-probabilities, not the whole
    distribution. With ``S = -sum p_i log p_i`` over the known entries (the top ``k`` and
    the chosen token), ``m = 1 - sum p_i`` the mass outside them and ``c`` the largest
    probability an unseen token can have (the smallest top-``k`` probability, and at most
    ``m``), the exact entropy ``H`` satisfies ``S + m log(1/c) <= H <= S + m log(V'/m)``
    for the ``V'`` unseen tokens. The estimate is the lower bound: exact when ``m`` is 0,
    and below ``H`` by at most ``m log(V' c / m)``.

    Args:
        top_logprobs: Log-probabilities of the top ``k`` tokens (any order; may be empty).
        chosen_logprob: Log-probability of the generated token, when it is not among
            them (a sampled token); ignored when it is one of them.

    Returns:
        The lower bound and the probability mass outside the known entries, as
        ``(estimate, m)``.
    """
    top = np.exp(np.asarray(top_logprobs, dtype=np.float64))
    known = list(top)
    if chosen_logprob is not None and not np.any(np.isclose(top, math.exp(chosen_logprob))):
        known.append(math.exp(chosen_logprob))
    probs = np.asarray(known, dtype=np.float64)
    probs = probs[probs > 0]
    partial = float(-np.sum(probs * np.log(probs)))
    outside = max(0.0, 1.0 - float(np.sum(probs)))
    if outside <= 1e-12:
        return partial, 0.0
    ceiling = min(float(top.min()), outside) if top.size else outside
    return partial + outside * -math.log(ceiling), outside


def token_logprobs(logits: np.ndarray, token_ids: Sequence[int] | np.ndarray) -> np.ndarray:
    """Log-probability of each chosen token, ``log p_t(x_t)``.

    Args:
        logits: Shape ``(T, vocab)``: row ``t`` is the distribution that chose token ``t``.
        token_ids: Shape ``(T,)``.

    Returns:
        Shape ``(T,)``.
    """
    logp = log_softmax(np.atleast_2d(logits))
    ids = np.asarray(token_ids, dtype=np.int64)
    if ids.shape[0] != logp.shape[0]:
        msg = (
            f"Expected one token id per logits row: got {ids.shape[0]} ids for "
            f"{logp.shape[0]} rows."
        )
        raise ValueError(msg)
    result: np.ndarray = logp[np.arange(ids.shape[0]), ids]
    return result


@dataclass(frozen=True)
class Word:
    """A word made of the tokens ``start .. end - 1``."""

    start: int
    """Index of its first token."""
    end: int
    """One past the index of its last token."""
    text: str
    """Its text with surrounding whitespace removed."""


def merge_tokens_into_words(
    tokens: Sequence[str], *, boundaries: Sequence[int] = (), split_after_newline: bool = True
) -> list[Word]:
    r"""Group sub-word token pieces into words.

    A token starts a new word when it is the first token, when its text begins with
    whitespace (the tokenizer's space marker decodes to a space; a newline token too),
    when the previous token's text ends with a newline (unless ``split_after_newline`` is
    false), or when its index is in ``boundaries`` (for example the token after an
    end-of-sequence token). Pieces without text (special tokens, the first bytes of a
    multi-byte character) stay inside the current word.

    With ``split_after_newline=False`` this is the DRAGIN code's rule: a new word starts at
    a space-marked token, at the newline token, or after an end-of-sequence token, so the
    token after a newline joins the newline's word (``"\nQuestion:"`` is one word).

    Args:
        tokens: Decoded text piece of each token (``GenerationTrace.tokens``).
        boundaries: Extra token indexes that always start a word.
        split_after_newline: Whether the token after a newline starts a word.

    Returns:
        The words in order; together they cover every token exactly once.
    """
    if not tokens:  # an empty step (a generation that stopped at once)
        return []
    forced = set(boundaries)
    starts: list[int] = []
    for i, piece in enumerate(tokens):
        previous = tokens[i - 1] if i > 0 else ""
        after_newline = split_after_newline and previous.endswith("\n")
        if i == 0 or i in forced or (piece[:1].isspace()) or after_newline:
            starts.append(i)
    ends = [*starts[1:], len(tokens)]
    return [
        Word(start=s, end=e, text="".join(tokens[s:e]).strip())
        for s, e in zip(starts, ends, strict=True)
    ]


def aggregate_words(
    values: np.ndarray, words: Sequence[Word], how: Literal["mean", "sum", "max"]
) -> np.ndarray:
    """Combine per-token values into per-word values.

    DRAGIN uses ``mean`` for entropy and ``sum`` for attention.

    Args:
        values: Shape ``(T,)``, one value per token.
        words: Words over those tokens (see [`merge_tokens_into_words`][]).
        how: How a word's token values combine.

    Returns:
        Shape ``(len(words),)``.
    """
    array = np.asarray(values, dtype=np.float64)
    reducers: dict[str, Callable[[np.ndarray], float]] = {
        "mean": lambda x: float(np.mean(x)),
        "sum": lambda x: float(np.sum(x)),
        "max": lambda x: float(np.max(x)),
    }
    reduce = reducers[how]
    return np.array([reduce(array[w.start : w.end]) for w in words], dtype=np.float64)


_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")


def split_sentences(text: str) -> list[str]:
    """Split text after ``.``, ``!`` or ``?`` followed by whitespace or the end.

    The pieces keep their leading whitespace, so ``"".join(split_sentences(t)) == t``.

    Args:
        text: Generated text.

    Returns:
        The sentences (a trailing fragment without an end mark is the last one).
    """
    sentences: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        sentences.append(text[start : match.end()])
        start = match.end()
    if start < len(text):
        sentences.append(text[start:])
    return sentences


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` with its leading whitespace (``""`` for no text)."""
    sentences = split_sentences(text)
    return sentences[0] if sentences else ""


def tokens_covering(tokens: Sequence[str], length: int) -> int:
    """How many leading tokens it takes for their pieces to cover ``length`` characters."""
    covered = 0
    for count, piece in enumerate(tokens, start=1):
        if covered >= length:
            return count - 1
        covered += len(piece)
    return len(tokens)


def token_sentences(tokens: Sequence[str]) -> list[tuple[int, int]]:
    """Token ranges ``(start, end)`` of the sentences of the joined token pieces.

    A token that straddles a sentence end belongs to the earlier sentence; trailing
    whitespace-only tokens join the last sentence.

    Args:
        tokens: Token pieces (``"".join(tokens)`` is the text).

    Returns:
        Consecutive ranges covering every token.
    """
    text = "".join(tokens)
    ranges: list[tuple[int, int]] = []
    start_token = 0
    offset = 0
    for sentence in split_sentences(text):
        offset += len(sentence)
        end_token = tokens_covering(tokens, offset)
        if end_token > start_token:
            ranges.append((start_token, end_token))
            start_token = end_token
    if start_token < len(tokens):
        if ranges:
            ranges[-1] = (ranges[-1][0], len(tokens))
        else:
            ranges.append((0, len(tokens)))
    return ranges


@dataclass(frozen=True)
class FlareDecision:
    """FLARE's verdict on one sentence."""

    uncertain: bool
    """Whether the sentence triggers retrieval."""
    score: float
    """``min p`` (rule ``any_token``) or ``mean(1 - p)`` (rule ``mean``)."""
    position: int
    """Index (within the sentence) of its least probable token."""


def flare_sentence_score(
    probs: Sequence[float] | np.ndarray, theta: float, rule: Literal["any_token", "mean"]
) -> FlareDecision:
    """Whether a sentence is uncertain by FLARE's rule.

    ``any_token`` (the FLARE paper): some token has ``p < theta``. ``mean`` (the DRAGIN
    code's variant): ``mean(1 - p) > theta`` over the sentence's tokens.

    Args:
        probs: Probability of each token of the sentence.
        theta: The threshold.
        rule: Which rule.

    Returns:
        The decision, its score and the least probable token's position.
    """
    p = np.asarray(probs, dtype=np.float64)
    if p.size == 0:
        return FlareDecision(uncertain=False, score=1.0 if rule == "any_token" else 0.0, position=0)
    position = int(np.argmin(p))
    if rule == "any_token":
        return FlareDecision(
            uncertain=bool(p[position] < theta), score=float(p[position]), position=position
        )
    score = float(np.mean(1.0 - p))
    return FlareDecision(uncertain=score > theta, score=score, position=position)


def reference_flare_windows(
    tokens: Sequence[str], sentences: Sequence[str]
) -> list[tuple[int, int]]:
    """The DRAGIN code's token windows of FLARE's sentences (``FLAREConfig.mode="reference"``).

    For each sentence, tokens are matched in order while each is found in the sentence
    from a cursor; the cursor moves to the match's end *relative to the previous cursor*
    (the code's slip, so a token of the next sentence that also occurs in this one is
    absorbed). The window is the matched tokens plus the first unmatched one, and the next
    sentence starts after that token: one token more here, one skipped there.

    Args:
        tokens: Each token's text as decoded alone (Llama-2 drops the leading space).
        sentences: The draft's sentences, stripped.

    Returns:
        One ``(start, end)`` token range per sentence (possibly empty at the end).
    """
    windows: list[tuple[int, int]] = []
    start = 0
    for sentence in sentences:
        cursor, end = 0, start
        while end < len(tokens):
            found = sentence[cursor:].find(tokens[end])
            if found == -1:
                break
            cursor = found + len(tokens[end])
            end += 1
        windows.append((min(start, len(tokens)), min(end + 1, len(tokens))))
        start = end + 1
    return windows


def reference_masked_query(
    sentence: str, tokens: Sequence[str], probs: Sequence[float] | np.ndarray, theta: float
) -> str:
    """The DRAGIN code's FLARE query: the sentence without its tokens of ``1 - p > theta``.

    Each window token is looked up in the sentence from a cursor; a token over the
    threshold is replaced by a placeholder that is removed at the end. A token not found
    (the window's extra token) is placed one character before the cursor, so masking it
    overwrites that character (usually the sentence's final period). No whitespace is
    collapsed; an all-masked sentence leaves blank text (no query).

    Args:
        sentence: The uncertain sentence, stripped.
        tokens: Its window's tokens (see [`reference_flare_windows`][]).
        probs: Their probabilities.
        theta: The trigger threshold, also the mask threshold.

    Returns:
        The query text.
    """
    mark = "[xxx]"
    text, cursor = sentence, 0
    for token, p in zip(tokens, probs, strict=True):
        at = text[cursor:].find(token) + cursor
        if 1.0 - float(p) > theta:
            text = text[:at] + mark + text[at + len(token) :]
            cursor = at + len(mark)
        else:
            cursor = at + len(token)
    return text.replace(mark, "")


def masked_query(tokens: Sequence[str], probs: Sequence[float] | np.ndarray, beta: float) -> str:
    """FLARE's masked query: the sentence without its tokens of probability below ``beta``.

    Args:
        tokens: The sentence's token pieces.
        probs: Their probabilities.
        beta: Tokens with ``p < beta`` are removed.

    Returns:
        The remaining text with whitespace collapsed.
    """
    kept = "".join(t for t, p in zip(tokens, probs, strict=True) if p >= beta)
    return " ".join(kept.split())


def bare_word(text: str) -> str:
    """A word without the punctuation around it (``"Grahn."`` is ``"Grahn"``).

    Inner punctuation stays (``"U.S"`` from ``"U.S."``, ``"1956-57"``); a word of
    punctuation alone is ``""``.
    """
    return text.strip().strip(_SURROUNDING_PUNCTUATION)


def folded_word(text: str) -> str:
    """A word's lower-case letters and digits alone.

    Words match across case and punctuation this way: ``"U.S."`` and ``"us"`` are both
    ``"us"``, ``"1956-57"`` is ``"195657"``.
    """
    return "".join(ch for ch in text.lower() if ch.isalnum())


_SURROUNDING_PUNCTUATION = (
    string.punctuation + "\u201c\u201d\u2018\u2019\u00ab\u00bb\u2026\u2013\u2014"
)
"""What ``bare_word`` strips from a word's ends: ASCII punctuation, typographic quotes,
guillemets, the ellipsis and dashes."""


def is_content_word(text: str, stop_words: frozenset[str] | None = None) -> bool:
    """Whether a word counts for RIND and QFS: it has a letter or digit and is no stop word.

    Args:
        text: The word (surrounding punctuation is ignored).
        stop_words: Lower-case stop words (default: spaCy's English list).

    Returns:
        ``True`` for content words.
    """
    core = re.sub(r"^\W+|\W+$", "", text).lower()
    if not core or not any(ch.isalnum() for ch in core):
        return False
    if stop_words is None:
        from spacy.lang.en.stop_words import STOP_WORDS

        stop_words = frozenset(STOP_WORDS)
    return core not in stop_words


def attention_received(
    attention: np.ndarray, mode: Literal["later_rows", "all_rows_head_mean"]
) -> np.ndarray:
    """Attention each position receives, ``a(i)``.

    ``later_rows`` (the DRAGIN paper, inline mode): ``max_{j > i} A[j, i]`` over a
    head-averaged ``(S, S)`` matrix (0 for the last position). ``all_rows_head_mean``
    (the DRAGIN code, reference mode): ``mean_h max_j A_h[j, i]`` over a per-head
    ``(H, S, S)`` matrix, the diagonal included.

    Args:
        attention: ``(S, S)`` for ``later_rows``, ``(H, S, S)`` for ``all_rows_head_mean``.
        mode: Which definition.

    Returns:
        Shape ``(S,)``.
    """
    a = np.asarray(attention, dtype=np.float64)
    if mode == "all_rows_head_mean":
        result: np.ndarray = a.max(axis=1).mean(axis=0)
        return result
    size = a.shape[0]
    later = np.tril(a, k=-1)  # rows j > i only
    received = later.max(axis=0) if size else np.zeros(0)
    return np.asarray(received, dtype=np.float64)


def word_sentences(words: Sequence[Word], tokens: Sequence[str]) -> list[tuple[int, int]]:
    """Word ranges ``(start, end)`` of the sentences; a word goes with its first token."""
    ranges: list[tuple[int, int]] = []
    first = 0
    for _, token_end in token_sentences(tokens):
        last = first
        while last < len(words) and words[last].start < token_end:
            last += 1
        if last > first:
            ranges.append((first, last))
            first = last
    return ranges


def reference_sentence_spans(
    sentences: Sequence[str], words: Sequence[str]
) -> list[tuple[int, int]]:
    """The DRAGIN code's word range of each sentence of a draft.

    From the first word not yet taken, a sentence (but the last) ends at the first ``i``
    (searched up to the second-to-last word) for which the words up to ``i``, joined by
    single spaces, contain the sentence's text; a sentence never found gets an empty range
    and the next one starts at the same word. The last sentence takes every word left.

    Args:
        sentences: The draft's sentences, stripped (spaCy's, in the DRAGIN code).
        words: The draft's word texts ([`merge_tokens_into_words`][]).

    Returns:
        One ``(start, end)`` word range per sentence (possibly empty).
    """
    spans: list[tuple[int, int]] = []
    first = 0
    for index, sentence in enumerate(sentences):
        if index == len(sentences) - 1:
            spans.append((first, len(words)))
            break
        end = first
        for i in range(first + 1, len(words)):
            if sentence in " ".join(words[first:i]):
                end = i
                break
        spans.append((first, end))
        first = end
    return spans


def rind_scores(
    word_entropy: np.ndarray,
    word_attention: np.ndarray,
    content: Sequence[bool],
    sentences: Sequence[tuple[int, int]],
) -> np.ndarray:
    """DRAGIN's RIND: ``s(w) = |S| * a_w / sum_{u in S} a_u * H_w * content(w)`` per sentence S.

    Args:
        word_entropy: Mean token entropy of each word, ``H_w``.
        word_attention: Summed received attention of each word, ``a_w``.
        content: Content-word indicator of each word.
        sentences: Word ranges of the sentences.

    Returns:
        ``s(w)`` for every word.
    """
    scores = np.zeros(len(content), dtype=np.float64)
    for start, end in sentences:
        a = np.asarray(word_attention[start:end], dtype=np.float64)
        total = a.sum()
        share = (end - start) * a / total if total > 0 else np.zeros_like(a)
        mask = np.asarray(content[start:end], dtype=np.float64)
        scores[start:end] = share * np.asarray(word_entropy[start:end]) * mask
    return scores


@dataclass(frozen=True)
class RINDTrigger:
    """The first sentence whose RIND exceeds the threshold."""

    sentence: tuple[int, int]
    """Its word range."""
    words: tuple[int, ...]
    """Indexes of its words with ``s(w) > theta``."""
    score: float
    """The largest ``s(w)`` in it."""


def rind_trigger(
    scores: np.ndarray, sentences: Sequence[tuple[int, int]], theta: float
) -> RINDTrigger | None:
    """The first sentence with any ``s(w) > theta`` (``None`` when there is none)."""
    for start, end in sentences:
        hot = tuple(i for i in range(start, end) if scores[i] > theta)
        if hot:
            return RINDTrigger(
                sentence=(start, end), words=hot, score=float(scores[start:end].max())
            )
    return None


def reference_qfs_weights(
    attention: np.ndarray, words: Sequence[Word], targets: Sequence[int]
) -> np.ndarray:
    """The DRAGIN code's QFS weight of every word, from the triggering words' tokens.

    For a target word with tokens ``s .. e-1``, each token ``i`` (but position 0) takes
    row ``i - 1`` of the head-averaged attention (the position that predicts it), keeps
    the columns before ``s`` and renormalises them to sum 1; these rows are summed and
    divided by the word's token count. A word's weight is the sum over its columns, and
    the weights are averaged over the targets (``nan`` everywhere for no target).

    Args:
        attention: Head-averaged ``(S, S)`` attention of the QFS pass.
        words: The words of that pass.
        targets: Indexes of the triggering words (after the content filter).

    Returns:
        Shape ``(len(words),)``.
    """
    matrix = np.asarray(attention, dtype=np.float64)
    total = np.zeros(len(words), dtype=np.float64)
    for target in targets:
        start, end = words[target].start, words[target].end
        columns = np.zeros(start, dtype=np.float64)
        for i in range(start, end):
            if i == 0:
                continue
            row = matrix[i - 1, :start]
            mass = row.sum()
            if mass > 0:
                columns += row / mass
        columns /= end - start
        total += np.array(
            [columns[w.start : min(w.end, start)].sum() if w.start < start else 0.0 for w in words]
        )
    if not targets:
        return np.full(len(words), np.nan)
    result: np.ndarray = total / len(targets)
    return result


def qfs_select(
    weights: np.ndarray, content: Sequence[bool], exclude: set[int], top_n: int
) -> list[int]:
    """DRAGIN's QFS: the ``top_n`` content words by attention weight, in original order.

    Args:
        weights: Attention each candidate word gets from the trigger, shape ``(W,)``.
        content: Content-word indicator per word.
        exclude: Word indexes never chosen (the triggering words).
        top_n: How many to keep.

    Returns:
        Sorted word indexes.
    """
    candidates = [i for i in range(len(content)) if content[i] and i not in exclude]
    if np.isnan(np.asarray(weights, dtype=np.float64)).all():  # no target: text order
        return candidates[:top_n]
    ranked = sorted(candidates, key=lambda i: (-float(weights[i]), i))[:top_n]
    return sorted(ranked)


def gram_uncertainty(states: np.ndarray, alpha: float = 1e-3) -> float:
    """SeaKR's self-aware uncertainty of ``k`` sampled end-of-sequence hidden states.

    ``U = (1/k) logdet(Z J_d Z^T + alpha I_k)`` where ``Z`` is ``(k, d)`` and
    ``J_d = I - 11^T/d`` centres each vector over its ``d`` features; computed in float64
    with ``slogdet``. Higher means less consistent samples, i.e. more uncertain. (SeaKR's
    code computes it in float32: see [`graphs.seakr.reference_uncertainty`][].)

    Args:
        states: Shape ``(k, d)``, one row per sample (empty samples already dropped).
        alpha: The ridge ``alpha`` that keeps the Gram matrix invertible.

    Returns:
        ``U``, or ``+inf`` for no samples (treated as uncertain).
    """
    z = np.asarray(states, dtype=np.float64)
    if z.ndim != 2:
        msg = f"Expected hidden states of shape (k, d), got shape {z.shape}."
        raise ValueError(msg)
    k = z.shape[0]
    if k == 0:
        return math.inf
    centred = z - z.mean(axis=1, keepdims=True)  # Z J_d
    gram = centred @ centred.T + alpha * np.eye(k)
    _, logdet = np.linalg.slogdet(gram)
    return float(logdet / k)


def perplexity(logprobs: Sequence[float] | np.ndarray) -> float:
    """``exp(-mean log p)`` of one generated sequence (``inf`` for an empty one)."""
    values = np.asarray(logprobs, dtype=np.float64)
    return float(np.exp(-values.mean())) if values.size else math.inf


def multi_sample_perplexity(samples: Sequence[Sequence[float] | np.ndarray]) -> float:
    """Mean [`perplexity`][] over sampled sequences (empty samples skipped)."""
    values = [perplexity(s) for s in samples if len(s)]
    return float(np.mean(values)) if values else math.inf


def length_normalised_entropy(samples: Sequence[Sequence[float] | np.ndarray]) -> float:
    """Mean over samples of ``-(1/T) sum_t log p_t``: the length-normalised predictive entropy."""
    values = [-float(np.mean(np.asarray(s, dtype=np.float64))) for s in samples if len(s)]
    return float(np.mean(values)) if values else math.inf


def energy_score(logsumexp: Sequence[float] | np.ndarray) -> float:
    """Energy ``-mean_t logsumexp(logits_t)``: higher means less confident."""
    values = np.asarray(logsumexp, dtype=np.float64)
    return float(-values.mean()) if values.size else math.inf


def mean_entropy(entropies: Sequence[float] | np.ndarray) -> float:
    """Mean token entropy (nats) of one generated sequence (``inf`` for an empty one)."""
    values = np.asarray(entropies, dtype=np.float64)
    return float(values.mean()) if values.size else math.inf


def top_two_margin(top_logprobs: np.ndarray) -> float:
    """Mean over tokens of ``log p(top 1) - log p(top 2)``: the logit margin (0 when empty).

    The gap between the two largest log-probabilities equals the gap between their
    logits. A small margin means the model hesitated between two tokens.

    Args:
        top_logprobs: Shape ``(T, k)`` with ``k >= 2``, each row in decreasing order (a
            generation's ``top_logprobs``).

    Returns:
        The mean margin.
    """
    values = np.asarray(top_logprobs, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] == 0:
        return 0.0
    if values.shape[1] < 2:
        msg = (
            f"top_two_margin received top log-probabilities of shape {values.shape}. "
            "Expected at least 2 per token. Fix: decode with top_logprobs >= 2."
        )
        raise ValueError(msg)
    ordered = -np.sort(-values, axis=1)
    return float((ordered[:, 0] - ordered[:, 1]).mean())


def sample_logprob_variance(samples: Sequence[Sequence[float] | np.ndarray]) -> float:
    """Variance over sampled sequences of their mean token log-probability.

    Samples of a confident model score alike; an unsure one's drift apart. Empty samples
    are skipped; with fewer than two left the variance is ``inf`` (unsure).
    """
    means = [float(np.mean(np.asarray(s, dtype=np.float64))) for s in samples if len(s)]
    return float(np.var(means)) if len(means) >= 2 else math.inf


def semantic_entropy(answers: Sequence[str]) -> float:
    """Entropy (nats) of the answers' clusters: answers in one cluster share a key.

    The discrete semantic entropy over ``k`` sampled answers: ``-sum_c (n_c / k) log(n_c /
    k)`` over the clusters ``c`` of equal answers. The caller makes the keys (the package
    clusters short answers by their normalised text).

    Args:
        answers: One cluster key per sampled answer.

    Returns:
        0 when all agree, ``log k`` when all differ (``inf`` for no answer).
    """
    if not answers:
        return math.inf
    counts = np.array(list(collections.Counter(answers).values()), dtype=np.float64)
    shares = counts / counts.sum()
    return float(-(shares * np.log(shares)).sum()) + 0.0  # one cluster: 0, not -0
