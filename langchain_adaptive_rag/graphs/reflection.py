"""Self-RAG's reflection tokens and the scores read from their probabilities.

Self-RAG (Asai et al., ICLR 2024) trains a model to write reflection tokens: whether to
retrieve, whether a passage is relevant, whether the text is supported by it, and how
useful the answer is. Inference reads the probabilities the model gives these tokens:

- retrieve when ``p([Retrieval]) / (p([Retrieval]) + p([No Retrieval])) > δ`` at the
  answer's first position ([`retrieval_score`][]);
- score each passage's segment ``y`` by
  ``S = [p(y)] + w_rel * s_rel + w_sup * s_sup + w_use * s_use`` ([`segment_score`][]):
  ``s_rel = p([Relevant]) / (p([Relevant]) + p([Irrelevant]))`` at the segment's first
  position; ``s_sup = (p([Fully supported]) + 0.5 p([Partially supported])) / Σ`` over the
  three support tokens where the first of them was generated (0 where none was);
  ``s_use = Σ_i w_i p([Utility:i]) / Σ_i p([Utility:i])`` with ``w = (-1, -0.5, 0, 0.5, 1)``
  where the first utility token was generated (0 where none was); ``p(y)`` is
  ``exp`` of the segment's mean token log-probability.

A token whose log-probability is unknown counts as -100, as in the official code (which
reads the 5,000 most likely tokens at a segment's positions).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.options import GenerationTrace

__all__ = [
    "CONTROL_TOKENS",
    "RELEVANCE_TOKENS",
    "RETRIEVAL_TOKENS",
    "SUPPORT_TOKENS",
    "UNKNOWN_LOGPROB",
    "UTILITY_TOKENS",
    "UTILITY_WEIGHTS",
    "ReflectionVocabulary",
    "SegmentScore",
    "TokenIds",
    "first_written",
    "logprobs_at",
    "reflection_vocabulary",
    "relevance_score",
    "retrieval_score",
    "segment_score",
    "short_form_answer",
    "strip_reflection",
    "support_score",
    "utility_score",
]

RETRIEVAL_TOKENS = ("[Retrieval]", "[No Retrieval]")
"""The retrieval decision's tokens (the model may also write ``[Continue to Use
Evidence]``, which the decision does not read)."""
RELEVANCE_TOKENS = ("[Relevant]", "[Irrelevant]")
"""ISREL: whether the passage is relevant."""
SUPPORT_TOKENS = ("[Fully supported]", "[Partially supported]", "[No support / Contradictory]")
"""ISSUP: whether the passage supports the segment."""
UTILITY_TOKENS = tuple(f"[Utility:{i}]" for i in range(1, 6))
"""ISUSE: how useful the answer is, 1 to 5."""
UTILITY_WEIGHTS = (-1.0, -0.5, 0.0, 0.5, 1.0)
"""The weight of each utility level in ``s_use``."""
CONTROL_TOKENS = (
    *SUPPORT_TOKENS,
    "[No Retrieval]",
    "[Retrieval]",
    "[Continue to Use Evidence]",
    "[Irrelevant]",
    "[Relevant]",
    "<paragraph>",
    "</paragraph>",
    *UTILITY_TOKENS,
)
"""Every reflection and paragraph token, removed from an answer's text."""
UNKNOWN_LOGPROB = -100.0
"""The log-probability of a token the model's output does not give (the official code's)."""


class TokenIds(Protocol):
    """A tokenizer's lookup of one token's id (a ``transformers`` tokenizer is one)."""

    def convert_tokens_to_ids(self, tokens: str) -> int | None:
        """The id of ``tokens`` (the unknown token's id, or ``None``, when absent)."""
        ...


@dataclass(frozen=True)
class ReflectionVocabulary:
    """Where one model's reflection tokens are read: by id, or (a served model) by text."""

    ids: Mapping[str, int]
    """Token text to id for every token the decision and the scores read; empty for a
    served model, whose tokens are read by their text."""

    @property
    def by_text(self) -> bool:
        """Whether tokens are matched by text (a served model gives no ids)."""
        return not self.ids

    def of(self, tokens: Sequence[str]) -> tuple[int, ...]:
        """The ids of ``tokens``, in order."""
        return tuple(self.ids[token] for token in tokens)

    @property
    def watched(self) -> tuple[int, ...]:
        """Every id the scores read (empty when read by text)."""
        if self.by_text:
            return ()
        return self.of((*RETRIEVAL_TOKENS, *RELEVANCE_TOKENS, *SUPPORT_TOKENS, *UTILITY_TOKENS))


def reflection_vocabulary(tokenizer: TokenIds | None) -> ReflectionVocabulary:
    """The reflection tokens' ids in ``tokenizer``.

    Args:
        tokenizer: The model's tokenizer (``ChatTransformers.hf_tokenizer``).

    Returns:
        The ids.

    Raises:
        AdaptiveRAGError: There is no tokenizer (a served model), or it lacks a
            reflection token: only a model trained with them (``selfrag/selfrag_llama2_7b``,
            ``selfrag/selfrag_llama2_13b``) writes them.
    """
    if tokenizer is None or not hasattr(tokenizer, "convert_tokens_to_ids"):
        msg = (
            "Self-RAG reads the probabilities of its reflection tokens, which needs the "
            "model's tokenizer (or, for a served model, its log-probabilities by text); "
            "this model has neither. Fix: ChatTransformers(model='selfrag/selfrag_llama2_7b'), "
            "or a LangChain chat model served with log-probabilities."
        )
        raise AdaptiveRAGError(msg)
    unknown = getattr(tokenizer, "unk_token_id", None)
    wanted = (*RETRIEVAL_TOKENS, *RELEVANCE_TOKENS, *SUPPORT_TOKENS, *UTILITY_TOKENS)
    ids: dict[str, int] = {}
    missing: list[str] = []
    for token in wanted:
        found = tokenizer.convert_tokens_to_ids(token)
        if found is None or found == unknown:
            missing.append(token)
        else:
            ids[token] = int(found)
    if missing:
        msg = (
            f"Self-RAG needs a model trained with its reflection tokens; this tokenizer "
            f"lacks {', '.join(missing)}. Expected the released Self-RAG models: "
            "ChatTransformers(model='selfrag/selfrag_llama2_7b') (or _13b)."
        )
        raise AdaptiveRAGError(msg)
    return ReflectionVocabulary(ids)


def logprobs_at(
    trace: GenerationTrace, position: int, tokens: Sequence[str], vocabulary: ReflectionVocabulary
) -> list[float]:
    """Log-probabilities of the reflection ``tokens`` at ``position`` of ``trace``.

    By id: from ``trace.token_logprobs`` (exact, whatever their rank; the generation
    watched ``vocabulary.watched``), else from the top alternatives. By text (a served
    model): from the alternatives' text, or the generated token's own. A token none of
    these gives is [`UNKNOWN_LOGPROB`][].

    Args:
        trace: A generation.
        position: The token index.
        tokens: Reflection tokens, as text.
        vocabulary: Where the model's reflection tokens are read.

    Returns:
        One log-probability per token.
    """
    found = dict.fromkeys(tokens, UNKNOWN_LOGPROB)
    if vocabulary.by_text:
        if trace.top_tokens is not None and trace.top_logprobs is not None:
            for name, value in zip(
                trace.top_tokens[position], trace.top_logprobs[position], strict=False
            ):
                if name in found:
                    found[name] = float(value)
        if trace.tokens[position] in found and not np.isnan(trace.logprobs[position]):
            found[trace.tokens[position]] = float(trace.logprobs[position])
        return [found[token] for token in tokens]
    by_id = {vocabulary.ids[token]: token for token in tokens}
    if trace.top_token_ids is not None and trace.top_logprobs is not None:
        for token_id, value in zip(
            trace.top_token_ids[position], trace.top_logprobs[position], strict=True
        ):
            if int(token_id) in by_id:
                found[by_id[int(token_id)]] = float(value)
    if trace.token_logprobs is not None and vocabulary.watched:
        row = trace.token_logprobs[position]
        for token_id, value in zip(vocabulary.watched, row, strict=True):
            if token_id in by_id:
                found[by_id[token_id]] = float(value)
    return [found[token] for token in tokens]


def first_written(
    trace: GenerationTrace, tokens: Sequence[str], vocabulary: ReflectionVocabulary
) -> int | None:
    """The position of the first of ``tokens`` the generation wrote, or ``None``."""
    if vocabulary.by_text:
        wanted = set(tokens)
        return next((i for i, piece in enumerate(trace.tokens) if piece in wanted), None)
    hits = np.flatnonzero(np.isin(trace.token_ids, np.asarray(vocabulary.of(tokens))))
    return int(hits[0]) if hits.size else None


def retrieval_score(
    retrieve_logprob: float, no_retrieve_logprob: float, mode: Literal["paper", "reference"]
) -> float:
    """The retrieval decision's score, compared with ``δ``.

    Args:
        retrieve_logprob: ``log p([Retrieval])`` at the answer's first position.
        no_retrieve_logprob: ``log p([No Retrieval])`` there.
        mode: ``"paper"``: ``p([Retrieval]) / (p([Retrieval]) + p([No Retrieval]))``.
            ``"reference"``: the official code's ratio of the log-probabilities themselves,
            ``log p([Retrieval]) / (log p([Retrieval]) + log p([No Retrieval]))``, which
            grows as ``[Retrieval]`` becomes less likely.

    Returns:
        The score (0.5 when both are equally likely, in both modes).
    """
    if mode == "reference":
        total = retrieve_logprob + no_retrieve_logprob
        return retrieve_logprob / total if total != 0 else 0.5
    top = max(retrieve_logprob, no_retrieve_logprob)
    retrieve = math.exp(retrieve_logprob - top)
    return retrieve / (retrieve + math.exp(no_retrieve_logprob - top))


def _normalised(logprobs: Sequence[float]) -> np.ndarray:
    given = np.asarray(logprobs, dtype=np.float64)
    values = np.exp(given - given.max())  # the same shares, without underflow
    shares: np.ndarray = values / values.sum()
    return shares


def relevance_score(logprobs: Sequence[float]) -> float:
    """``s_rel``: ``p([Relevant]) / (p([Relevant]) + p([Irrelevant]))``.

    Args:
        logprobs: ``log p`` of [`RELEVANCE_TOKENS`][], in order, at the segment's first
            position.

    Returns:
        The score in ``[0, 1]``.
    """
    return float(_normalised(logprobs)[0])


def support_score(logprobs: Sequence[float] | None) -> float:
    """``s_sup``: ``(p(full) + 0.5 p(partial)) / Σ`` over [`SUPPORT_TOKENS`][].

    Args:
        logprobs: ``log p`` of the three support tokens, in order, where the first of them
            was generated; ``None`` when none was.

    Returns:
        The score in ``[0, 1]``; 0 without a support token.
    """
    if logprobs is None:
        return 0.0
    shares = _normalised(logprobs)
    return float(shares[0] + 0.5 * shares[1])


def utility_score(logprobs: Sequence[float] | None) -> float:
    """``s_use``: ``Σ_i w_i p([Utility:i]) / Σ_i p([Utility:i])``, ``w`` = [`UTILITY_WEIGHTS`][].

    Args:
        logprobs: ``log p`` of the five utility tokens, in order, where the first of them
            was generated; ``None`` when none was.

    Returns:
        The score in ``[-1, 1]``; 0 without a utility token.
    """
    if logprobs is None:
        return 0.0
    return float(np.dot(UTILITY_WEIGHTS, _normalised(logprobs)))


@dataclass(frozen=True)
class SegmentScore:
    """One passage's segment, scored."""

    total: float
    """``S``, the sum below (what the best segment maximises)."""
    sequence: float
    """``p(y)``: ``exp`` of the mean token log-probability (0 when not used)."""
    relevance: float
    """``s_rel``."""
    support: float
    """``s_sup``."""
    utility: float
    """``s_use``."""


def segment_score(
    trace: GenerationTrace,
    vocabulary: ReflectionVocabulary,
    *,
    w_rel: float,
    w_sup: float,
    w_use: float,
    use_sequence: bool = True,
    use_support: bool = True,
    use_utility: bool = True,
) -> SegmentScore:
    """Score a segment generated after ``[Retrieval]<paragraph>...</paragraph>``.

    Args:
        trace: The segment's generation, decoded with
            ``token_logprobs=vocabulary.watched``.
        vocabulary: The reflection tokens' ids.
        w_rel: The weight of ``s_rel``.
        w_sup: The weight of ``s_sup``.
        w_use: The weight of ``s_use``.
        use_sequence: Add ``p(y)`` (the official ``--use_seqscore``).
        use_support: Read the support tokens (``--use_groundness``).
        use_utility: Read the utility tokens (``--use_utility``).

    Returns:
        The total and its parts.
    """
    sequence = 0.0
    if use_sequence:
        known = trace.logprobs[~np.isnan(trace.logprobs)]
        sequence = math.exp(float(np.sum(known)) / max(len(known), 1))
    relevance = 0.0
    if trace.tokens:
        relevance = relevance_score(logprobs_at(trace, 0, RELEVANCE_TOKENS, vocabulary))
    support = utility = 0.0
    if use_support:
        at = first_written(trace, SUPPORT_TOKENS, vocabulary)
        found = None if at is None else logprobs_at(trace, at, SUPPORT_TOKENS, vocabulary)
        support = support_score(found)
    if use_utility:
        at = first_written(trace, UTILITY_TOKENS, vocabulary)
        found = None if at is None else logprobs_at(trace, at, UTILITY_TOKENS, vocabulary)
        utility = utility_score(found)
    total = sequence + w_rel * relevance + w_sup * support + w_use * utility
    return SegmentScore(total, sequence, relevance, support, utility)


def short_form_answer(text: str) -> str:
    """The answer as the official short-form evaluation reads a prediction.

    Reflection and paragraph tokens, ``</s>``, ``<|endoftext|>`` and newlines removed,
    then one leading ``#`` or ``:`` dropped (``run_short_form.py``), and the surrounding
    whitespace stripped. The official code leaves the reflection tokens in a prediction
    read over passages, which its substring match does not mind; here they always go.

    Args:
        text: The generated text.

    Returns:
        The short answer.
    """
    answer = strip_reflection(text).replace("<|endoftext|>", "").replace("\n", "")
    if answer[:1] in ("#", ":"):
        answer = answer[1:]
    return answer.strip()


def strip_reflection(text: str) -> str:
    """``text`` without reflection and paragraph tokens, ``</s>`` or a leading space."""
    for token in (*CONTROL_TOKENS, "</s>"):
        text = text.replace(token, "")
    return text[1:] if text.startswith(" ") else text
