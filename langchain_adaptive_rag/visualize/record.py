"""A recorded graph run as plain data: every round's draft, signals, decision and retrieval.

A [`RunRecord`][] holds strings, numbers and lists only, so it round-trips through JSON
(``RunRecord.to_json``, ``RunRecord.from_json``) and can be audited or drawn later
without the model. [`record_run`][] makes one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Self

from langchain_adaptive_rag.errors import AdaptiveRAGError

__all__ = ["Decision", "RecordedRun", "Retrieval", "Round", "TokenRecord", "WordRecord"]

_RECORD_VERSION = 1
"""Version of the JSON layout written by ``RunRecord.to_json``."""


@dataclass(frozen=True)
class TokenRecord:
    """One draft token and its signals (``None``: the method did not report it)."""

    text: str
    """The token's text piece."""
    probability: float | None
    """``exp(logprob)`` of the token."""
    entropy: float | None
    """Entropy (nats) of the next-token distribution it was drawn from."""
    rind: float | None
    """DRAGIN's RIND score ``s(w)`` of the word the token belongs to."""
    attention: float | None
    """Attention the token receives from the draft's tokens, ``a(i)`` (DRAGIN)."""
    uncertainty: float | None
    """SeaKR's step uncertainty ``U`` (the same for every token of the step)."""
    word: int | None
    """Index of the token's word in ``Round.words`` (``None``: no word scores)."""


@dataclass(frozen=True)
class WordRecord:
    """A draft word with its method score (DRAGIN: RIND ``s(w)``)."""

    start: int
    """First token index."""
    end: int
    """One past the last token index."""
    text: str
    """The word."""
    score: float
    """Its score."""


@dataclass(frozen=True)
class Decision:
    """What ``score_need`` decided in a round."""

    route: str
    """The node the decision went to: ``formulate_query`` (retrieve),
    ``continue_generation``, ``draft`` or ``finalize`` (records saved by earlier versions:
    ``retrieve`` and ``continue``)."""
    trigger_position: int | None
    """Draft token index of the trigger (``None``: no trigger or a fixed schedule)."""
    trigger_word: str | None
    """The triggering word, token or step."""
    trigger_words: list[str]
    """All triggering words of the sentence (DRAGIN), else ``[]``."""
    score: float | None
    """The need score the policy reported (``None``: not reported)."""
    threshold: float | None
    """The threshold it was compared with (``None``: not reported)."""
    note: str
    """``""``, or what the policy or the retriever noted."""
    signal: str | None = None
    """The token signal the threshold applies to, as the policy declared it (``None``:
    a score of no single token, or a record saved before decisions said it)."""
    direction: str | None = None
    """``"above"`` or ``"below"``: which side of the threshold retrieves (``None``: not
    reported)."""

    @property
    def retrieves(self) -> bool:
        """Whether the round retrieved."""
        return self.route in ("formulate_query", "retrieve")


@dataclass(frozen=True)
class Retrieval:
    """One retrieval: the query, the passages in retriever order and what was kept."""

    step: int
    """Generation round the graph recorded for it."""
    query: str
    """The query sent to the retriever."""
    doc_ids: list[str]
    """Passage ids in retriever order."""
    doc_texts: list[str]
    """Their texts."""
    rerank_order: list[int] | None
    """Retriever ranks kept by the re-ranker, best first (``None``: all, unchanged)."""
    note: str
    """``""``, or what went wrong."""
    doc_metadata: list[dict[str, Any]] = field(default_factory=list)
    """Their metadata (``title``, ``source``, ``url``...; empty in older records)."""


@dataclass(frozen=True)
class Round:
    """One round: a draft, a decision and, when it retrieved, the retrieval."""

    index: int
    """0-based round number."""
    context: str
    """Answer text accepted before this round."""
    draft: str
    """The look-ahead text (``""`` for methods that draft nothing)."""
    tokens: list[TokenRecord]
    """The draft's tokens with their signals."""
    words: list[WordRecord]
    """The draft's scored words (``[]`` when the method scores none)."""
    sentences: list[list[int]]
    """Word ranges ``[start, end)`` of the draft's sentences."""
    uncertainty: float | None
    """SeaKR's step uncertainty ``U`` of the draft (``None`` for other methods)."""
    accepted: str
    """Draft text accepted by ``score_need``."""
    decision: Decision | None
    """The decision (``None`` when ``score_need`` did not run)."""
    retrieval: Retrieval | None
    """The retrieval of this round, if any."""
    continuation: str
    """Text generated with the passages and accepted by ``continue_generation``."""


@dataclass(frozen=True)
class RecordedRun:
    """A whole run as plain data: question, method, answer, counts and rounds.

    [`RunRecord`][langchain_adaptive_rag.visualize.RunRecord] is this with its notebook
    display; the views read this one.
    """

    question: str
    """The question."""
    method: str
    """The graph's name (the method: ``dragin``, ``flare``, ``seakr``, ...)."""
    answer: str
    """The extracted short answer."""
    text: str
    """The whole generated answer text."""
    counts: dict[str, int]
    """Retrievals, LLM calls, generated tokens and rounds."""
    rounds: list[Round]
    """Every round, in order."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """The custom stream events (``{"event": "retrieval", ...}``), in order."""
    standalone_question: str = ""
    """A follow-up as its retrievals read it, made to stand on its own from the thread's
    earlier turns (``QAPrompts.followup_query``); ``""``: read as asked."""

    @property
    def retrievals(self) -> list[Retrieval]:
        """Every retrieval of the run, in order."""
        return [r.retrieval for r in self.rounds if r.retrieval is not None]

    @property
    def threshold(self) -> float | None:
        """The threshold of the run's decisions, when they all report the same one."""
        seen = {
            r.decision.threshold
            for r in self.rounds
            if r.decision is not None and r.decision.threshold is not None
        }
        return seen.pop() if len(seen) == 1 else None

    def to_dict(self) -> dict[str, Any]:
        """The record as nested dicts and lists."""
        return {"version": _RECORD_VERSION, **asdict(self)}

    def to_json(self, *, indent: int | None = None) -> str:
        """The record as JSON text.

        Args:
            indent: Indentation, as ``json.dumps`` (``None``: one line).

        Returns:
            JSON text; an infinite uncertainty is written as ``Infinity``.
        """
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Rebuild a record from ``to_dict`` output.

        Raises:
            AdaptiveRAGError: ``data`` is not a record's dict.
        """
        try:
            return cls(
                question=str(data["question"]),
                method=str(data["method"]),
                answer=str(data["answer"]),
                text=str(data["text"]),
                counts={str(k): int(v) for k, v in data["counts"].items()},
                rounds=[_round_from_dict(r) for r in data["rounds"]],
                events=[dict(e) for e in data.get("events", [])],
                standalone_question=str(data.get("standalone_question", "")),
            )
        except (KeyError, TypeError, AttributeError, ValueError) as error:
            keys = sorted(data) if isinstance(data, Mapping) else type(data).__name__
            msg = (
                f"RunRecord.from_dict could not read the record ({type(error).__name__}: "
                f"{error}); received keys {keys}. Expected the output of RunRecord.to_dict() "
                "or RunRecord.to_json(). Fix: record the run again with record_run(graph, "
                "question)."
            )
            raise AdaptiveRAGError(msg) from error

    @classmethod
    def from_json(cls, text: str) -> Self:
        """Rebuild a record from ``to_json`` output.

        Raises:
            AdaptiveRAGError: ``text`` is not a record's JSON.
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            msg = (
                f"RunRecord.from_json received text that is not JSON ({error}; it starts "
                f"{text[:40]!r}). Expected the output of RunRecord.to_json()."
            )
            raise AdaptiveRAGError(msg) from error
        if not isinstance(data, Mapping):
            msg = (
                f"RunRecord.from_json received JSON of type {type(data).__name__}. Expected "
                "an object, the output of RunRecord.to_json()."
            )
            raise AdaptiveRAGError(msg)
        return cls.from_dict(data)


def _opt_float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def _round_from_dict(data: Mapping[str, Any]) -> Round:
    decision = data.get("decision")
    retrieval = data.get("retrieval")
    return Round(
        index=int(data["index"]),
        context=str(data["context"]),
        draft=str(data["draft"]),
        tokens=[
            TokenRecord(
                text=str(t["text"]),
                probability=_opt_float(t["probability"]),
                entropy=_opt_float(t["entropy"]),
                rind=_opt_float(t["rind"]),
                attention=_opt_float(t["attention"]),
                uncertainty=_opt_float(t["uncertainty"]),
                word=None if t["word"] is None else int(t["word"]),
            )
            for t in data["tokens"]
        ],
        words=[
            WordRecord(
                start=int(w["start"]), end=int(w["end"]), text=str(w["text"]), score=w["score"]
            )
            for w in data["words"]
        ],
        sentences=[[int(i) for i in s] for s in data["sentences"]],
        uncertainty=_opt_float(data["uncertainty"]),
        accepted=str(data["accepted"]),
        decision=None
        if decision is None
        else Decision(
            route=str(decision["route"]),
            trigger_position=None
            if decision["trigger_position"] is None
            else int(decision["trigger_position"]),
            trigger_word=None
            if decision["trigger_word"] is None
            else str(decision["trigger_word"]),
            trigger_words=[str(w) for w in decision["trigger_words"]],
            score=_opt_float(decision["score"]),
            threshold=_opt_float(decision["threshold"]),
            note=str(decision["note"]),
            signal=None if decision.get("signal") is None else str(decision["signal"]),
            direction=None if decision.get("direction") is None else str(decision["direction"]),
        ),
        retrieval=None
        if retrieval is None
        else Retrieval(
            step=int(retrieval["step"]),
            query=str(retrieval["query"]),
            doc_ids=[str(i) for i in retrieval["doc_ids"]],
            doc_texts=[str(t) for t in retrieval["doc_texts"]],
            rerank_order=None
            if retrieval["rerank_order"] is None
            else [int(i) for i in retrieval["rerank_order"]],
            note=str(retrieval["note"]),
            doc_metadata=[
                dict(m) if isinstance(m, Mapping) else {}
                for m in retrieval.get("doc_metadata") or []
            ],
        ),
        continuation=str(data["continuation"]),
    )
