"""Graph state: the public input and output schemas and the private channels.

Everything here is plain JSON-like data (strings, numbers, lists, dicts), so a graph runs
with any LangGraph checkpointer and a run can be audited without re-running it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any

from langchain_core.messages import AnyMessage, BaseMessage
from langgraph.graph.message import add_messages
from typing_extensions import NotRequired, TypedDict

__all__ = [
    "AdaptiveRAGInput",
    "AdaptiveRAGOutput",
    "AdaptiveRAGState",
    "Counts",
    "QueryInput",
    "RetrievalDecision",
    "RetrievalEvent",
    "RetrievedDoc",
    "ScoredWord",
    "add_retrievals",
    "plain_data",
]


class RetrievedDoc(TypedDict):
    """A retrieved passage as it is kept in state."""

    id: str
    """The document's ``id`` (else ``metadata["id"]``, else ``result-<n>``)."""
    text: str
    """Its ``page_content``."""
    metadata: dict[str, Any]
    """Its ``metadata`` as plain data (``source``, ``title``, ``url``, the retriever's
    ``score``...): what a citation shows."""


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
    doc_metadata: list[dict[str, Any]]
    """Their metadata, as plain data (``source``, ``title``, ``url``, ``score``...)."""
    rerank_order: list[int] | None
    """Retriever ranks of the documents kept after re-ranking (``None``: not re-ranked)."""
    note: str
    """``""``, or what went wrong (a retriever error, no documents)."""


class Counts(TypedDict):
    """Efficiency counters of one run."""

    retrievals: int
    """Retriever calls (retried attempts of one retrieval count once)."""
    llm_calls: int
    """Generations (each sample of a batched call counts)."""
    generated_tokens: int
    """Tokens generated, all samples."""
    rounds: int
    """Generation rounds."""
    retrieval_errors: int
    """Retrievals that finally failed (the run went on without their documents)."""
    prompt_tokens: int
    """Prompt tokens the model read, all calls (a served model's reported count; ``0``
    where it reports none)."""


class RetrievalDecision(TypedDict):
    """One ``score_need`` decision: whether the draft needs retrieval, and why.

    Every method writes it in the same shape (the graph streams it as a ``"decision"``
    event, retrieval events copy it, the visualisation reads it).
    """

    step: int
    """Generation round of the decision (from 1)."""
    retrieve: bool
    """Whether it retrieves."""
    trigger_position: int | None
    """Token index in the draft of the trigger (``None``: none, or a fixed schedule)."""
    trigger_word: str | None
    """The word (or sentence, or decision text) that triggered, or came closest."""
    trigger_words: list[str]
    """Every word over the threshold (DRAGIN), else empty."""
    score: float | None
    """The need score at the trigger, or the one nearest the threshold when none fired."""
    threshold: float | None
    """The threshold it was compared with (``None`` for methods without one)."""
    signal: NotRequired[str | None]
    """The per-token signal ``score`` is a value of (``"rind"``, ``"probability"``,
    ``"uncertainty"``), as the method declares it; ``None``: a score of no single token."""
    direction: NotRequired[str]
    """``"above"``: a score over the threshold retrieves; ``"below"``: one under it."""
    note: str
    """``""``, or what the run should know (an unparseable decision, a retriever error)."""


def plain_data(value: object) -> Any:
    """``value`` as plain JSON data, safe in any checkpoint and results file.

    Numpy scalars become numbers, tuples lists, non-finite floats ``None``, keys strings,
    and anything else its ``str``.
    """
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(key): plain_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_data(item) for item in value]
    item_method = getattr(value, "item", None)
    if callable(item_method):  # numpy scalars and 0-d arrays
        return plain_data(item_method())
    tolist = getattr(value, "tolist", None)
    if callable(tolist):  # numpy arrays
        return plain_data(tolist())
    return str(value)


QueryInput = str | list[str] | list[int]
"""A value a method's ``score_need`` leaves for its ``formulate_query``."""


def add_retrievals(
    current: list[RetrievalEvent] | None, update: list[RetrievalEvent]
) -> list[RetrievalEvent]:
    """Reducer of ``retrievals``: append new events.

    A new question on a thread whose run finished starts over with LangGraph's
    ``Overwrite([])``, plain data under strict checkpoint serialisation.
    """
    return [*(current or []), *update]


class AdaptiveRAGInput(TypedDict):
    """What a graph is invoked with: ``question``, or ``messages`` ending in the question.

    ``graph.invoke({"question": "..."})`` or, as in a ``MessagesState`` app,
    ``graph.invoke({"messages": [("user", "...")]})``: when the last message is a human
    message it is the question, else ``question`` is.
    """

    question: NotRequired[str]
    """The question to answer."""
    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]
    """The conversation (LangGraph's ``add_messages`` convention): a last human message is
    the question; earlier turns are the thread's memory."""
    chat_history: NotRequired[list[BaseMessage]]
    """Earlier turns given explicitly (shown before the thread's own turns)."""


class AdaptiveRAGOutput(TypedDict):
    """What a graph returns."""

    messages: NotRequired[Annotated[list[AnyMessage], add_messages]]
    """The conversation with this run's answer appended as an ``AIMessage`` (its text;
    ``additional_kwargs`` hold the short ``answer`` and the ``sources``)."""
    answer: str
    """The extracted short answer."""
    text: str
    """The whole generated answer text (reasoning included)."""
    retrievals: Annotated[list[RetrievalEvent], add_retrievals]
    """Every retrieval of the run, in order."""
    counts: Counts
    """Retrievals, LLM calls, generated tokens and rounds."""
    standalone_question: NotRequired[str]
    """A follow-up as the run's retrievals read it, made to stand on its own from the
    earlier turns at its first retrieval (``QAPrompts.followup_query``); ``""``: the
    question as asked (no earlier turns, or no retrieval yet)."""


class AdaptiveRAGState(AdaptiveRAGInput, AdaptiveRAGOutput):
    """Input, output and the private channels every method's nodes share.

    A method with channels of its own declares them in a subclass of this state, which
    its policy names as its ``state_schema`` (DRAGIN's ``DRAGINState``: RIND's words and
    sentences), and resets them for a new run in its ``fresh_channels``.
    """

    history: NotRequired[list[BaseMessage]]
    """The earlier turns this run shows the model: ``chat_history`` and the thread's own
    turns, the last ``QAPrompts.history_turns`` of them."""
    draft: NotRequired[str]
    """Look-ahead text generated but not yet accepted."""
    draft_ended: NotRequired[bool]
    """Whether the draft stopped at the prompts' stop string, ending the answer's line
    (``Policy.answer_ended``): accepted whole, it finishes the run."""
    draft_tokens: NotRequired[list[str]]
    """Token pieces of the draft."""
    draft_logprobs: NotRequired[list[float]]
    """Their log-probabilities."""
    draft_entropies: NotRequired[list[float]]
    """Their entropies."""
    decision: NotRequired[RetrievalDecision]
    """The latest ``score_need`` decision."""
    query_inputs: NotRequired[dict[str, QueryInput]]
    """What the method's ``score_need`` leaves for its ``formulate_query`` (DRAGIN: the
    triggering sentence's words and the text before it; FLARE: the masked sentence)."""
    query: NotRequired[str]
    """The query of the retrieval being carried out."""
    docs: NotRequired[list[RetrievedDoc]]
    """Documents for the next generation."""
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
