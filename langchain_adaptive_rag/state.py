"""Graph state: the public input and output schemas and the private channels.

Everything here is plain JSON-like data (strings, numbers, lists, dicts), so a graph runs
with any LangGraph checkpointer and a run can be audited without re-running it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from langchain_core.messages import BaseMessage
from typing_extensions import NotRequired, TypedDict

__all__ = [
    "AdaptiveRAGInput",
    "AdaptiveRAGOutput",
    "AdaptiveRAGState",
    "Counts",
    "ResetRetrievals",
    "RetrievalEvent",
    "RetrievedDoc",
    "ScoredWord",
    "add_retrievals",
]


class RetrievedDoc(TypedDict):
    """A retrieved passage as it is kept in state."""

    id: str
    text: str


class ScoredWord(TypedDict):
    """A draft word with its method score."""

    start: int
    end: int
    text: str
    score: float


class RetrievalEvent(TypedDict):
    """One retrieval: why it fired, what was asked and what came back."""

    step: int
    """Generation round in which it fired (0 = before any text)."""
    trigger_position: int | None
    """Token index in the draft where the trigger sits (``None`` for fixed schedules)."""
    trigger_word: str | None
    """The word (or sentence) that triggered retrieval."""
    score: float | None
    """The method's need score at the trigger."""
    threshold: float | None
    """The threshold the score was compared with."""
    query: str
    """The query sent to the retriever."""
    doc_ids: list[str]
    """Ids of the retrieved documents, in retriever order."""
    doc_texts: list[str]
    """Their texts."""
    rerank_order: list[int] | None
    """Retriever ranks of the documents kept after re-ranking (``None``: not re-ranked)."""
    note: str
    """``""``, or what went wrong (a retriever error, no documents)."""


class Counts(TypedDict):
    """Efficiency counters of one run."""

    retrievals: int
    llm_calls: int
    generated_tokens: int
    rounds: int


@dataclass(frozen=True)
class ResetRetrievals:
    """An update of ``retrievals`` that empties it (a new question on the same thread)."""


def add_retrievals(
    current: list[RetrievalEvent] | None, update: list[RetrievalEvent] | ResetRetrievals
) -> list[RetrievalEvent]:
    """Reducer of ``retrievals``: append new events, or start over on :class:`ResetRetrievals`."""
    if isinstance(update, ResetRetrievals):
        return []
    return [*(current or []), *update]


class AdaptiveRAGInput(TypedDict):
    """What a graph is invoked with."""

    question: str
    """The question to answer."""
    chat_history: NotRequired[list[BaseMessage]]
    """Earlier turns; human/AI pairs are shown before the question as solved examples."""


class AdaptiveRAGOutput(TypedDict):
    """What a graph returns."""

    answer: str
    """The extracted short answer."""
    text: str
    """The whole generated answer text (reasoning included)."""
    retrievals: Annotated[list[RetrievalEvent], add_retrievals]
    """Every retrieval of the run, in order."""
    counts: Counts
    """Retrievals, LLM calls, generated tokens and rounds."""


class AdaptiveRAGState(AdaptiveRAGInput, AdaptiveRAGOutput):
    """Input, output and the private channels the nodes share."""

    draft: NotRequired[str]
    """Look-ahead text generated but not yet accepted."""
    draft_tokens: NotRequired[list[str]]
    """Token pieces of the draft."""
    draft_logprobs: NotRequired[list[float]]
    """Their log-probabilities."""
    draft_entropies: NotRequired[list[float]]
    """Their entropies."""
    draft_attention: NotRequired[list[float]]
    """Attention each draft token received (DRAGIN's RIND attention, before word sums)."""
    draft_words: NotRequired[list[ScoredWord]]
    """Words of the draft with a method's score (DRAGIN: RIND ``s(w)``)."""
    draft_sentences: NotRequired[list[list[int]]]
    """Word ranges ``[start, end)`` of the draft's sentences."""
    draft_sentence_texts: NotRequired[list[str]]
    """The draft's sentences as text, where a method splits them so (DRAGIN's reference
    mode: spaCy's sentences, stripped)."""
    pending: NotRequired[dict[str, object]]
    """The retrieval decision being carried out (trigger, score, threshold)."""
    query: NotRequired[str]
    """The query of the retrieval being carried out."""
    docs: NotRequired[list[RetrievedDoc]]
    """Documents for the next generation."""
    kept_docs: NotRequired[list[RetrievedDoc]]
    """Documents a method keeps across rounds (SeaKR accumulates up to ``max_docs``)."""
    rerank_order: NotRequired[list[int] | None]
    """Retriever ranks kept by the re-ranker."""
    last_accepted: NotRequired[str]
    """The text accepted in the latest round (FL-RAG and FS-RAG query with it)."""
    answer_tokens: NotRequired[int]
    """Tokens accepted into ``text`` (the generation budget counts these)."""
    step: NotRequired[int]
    """Generation rounds so far."""
    finished: NotRequired[bool]
    """Whether generation is over."""
    route: NotRequired[str]
    """Where score_need sends the run next."""
