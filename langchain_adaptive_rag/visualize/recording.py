"""Record one graph run as plain data: every round's draft, signals, decision and retrieval.

[`record_run`][] streams a compiled adaptive-RAG graph with
``stream_mode=["updates", "custom"]`` (with its subgraphs' updates: Adaptive-RAG's
route) and folds each node's update into a
[`RunRecord`][]. A round starts at each ``draft`` node: its look-ahead tokens with
their signals, the text accepted before the decision, the retrieval decision (trigger,
score, threshold), the query, the retrieved passages with the re-rank order, and the text
generated with the passages. The record holds strings, numbers and lists only, so it
round-trips through JSON (``RunRecord.to_json``, ``RunRecord.from_json``) and can
be audited or drawn later without the model.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.signals import attention_received
from langchain_adaptive_rag.token_signals import AttentionMatrix
from langchain_adaptive_rag.visualize.record import (
    Decision,
    Retrieval,
    Round,
    TokenRecord,
    WordRecord,
)
from langchain_adaptive_rag.visualize.run_record import RunRecord

__all__ = ["AttentionSource", "record_run"]


class AttentionSource(Protocol):
    """A model that runs one forward pass and returns a layer's attention.

    [`ChatTransformers`][] loaded with ``attn_implementation="eager"`` is one.
    """

    def forward_attention(self, text: str, *, layer: int = -1) -> AttentionMatrix:
        """Per-head attention ``(H, S, S)`` of one layer over ``text``."""
        ...


# -- folding the stream into rounds ---------------------------------------------------------


@dataclass
class _RoundBuilder:
    """A round while its nodes' updates arrive."""

    index: int
    context: str
    draft: str = ""
    tokens: list[TokenRecord] = field(default_factory=list)
    words: list[WordRecord] = field(default_factory=list)
    sentences: list[list[int]] = field(default_factory=list)
    uncertainty: float | None = None
    accepted: str = ""
    decision: Decision | None = None
    retrieval: Retrieval | None = None
    continuation: str = ""

    def build(self) -> Round:
        return Round(
            index=self.index,
            context=self.context,
            draft=self.draft,
            tokens=self.tokens,
            words=self.words,
            sentences=self.sentences,
            uncertainty=self.uncertainty,
            accepted=self.accepted,
            decision=self.decision,
            retrieval=self.retrieval,
            continuation=self.continuation,
        )


def _floats(values: object, size: int) -> list[float] | None:
    """``values`` as floats when it is a list of ``size`` numbers, else ``None``."""
    if not isinstance(values, Sequence) or isinstance(values, str) or len(values) != size:
        return None
    return [float(v) for v in values]


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _draft_tokens(update: Mapping[str, Any], uncertainty: float | None) -> list[TokenRecord]:
    """Token records of a ``draft`` update; RIND is mapped from words back to tokens."""
    pieces = [str(t) for t in update.get("draft_tokens") or []]
    size = len(pieces)
    logprobs = _floats(update.get("draft_logprobs"), size)
    entropies = _floats(update.get("draft_entropies"), size)
    attention = _floats(update.get("draft_attention"), size)
    word_of: list[int | None] = [None] * size
    rind: list[float | None] = [None] * size
    for w_index, word in enumerate(update.get("draft_words") or []):
        for t in range(max(0, int(word["start"])), min(size, int(word["end"]))):
            word_of[t] = w_index
            rind[t] = float(word["score"])
    return [
        TokenRecord(
            text=piece,
            probability=math.exp(logprobs[i]) if logprobs is not None else None,
            entropy=entropies[i] if entropies is not None else None,
            rind=rind[i],
            attention=attention[i] if attention is not None else None,
            uncertainty=uncertainty,
            word=word_of[i],
        )
        for i, piece in enumerate(pieces)
    ]


def _added(before: str, after: str) -> str:
    """The text appended to ``before`` to give ``after``."""
    return after[len(before) :] if after.startswith(before) else after


class _Recorder:
    """Folds ``(node, update)`` pairs into rounds."""

    def __init__(self) -> None:
        self.rounds: list[_RoundBuilder] = []
        self.text = ""
        self.answer = ""
        self.counts: dict[str, int] = {}
        self.query = ""
        self.docs_note = ""

    def current(self) -> _RoundBuilder:
        if not self.rounds:
            self.rounds.append(_RoundBuilder(index=0, context=self.text))
        return self.rounds[-1]

    def feed(self, node: str, update: Mapping[str, Any]) -> None:
        if isinstance(update.get("counts"), Mapping):
            self.counts = {str(k): int(v) for k, v in update["counts"].items()}
        handler = getattr(self, f"_on_{node}", None)
        if handler is not None:
            handler(update)
        if isinstance(update.get("text"), str):
            self.text = update["text"]

    def _on_draft(self, update: Mapping[str, Any]) -> None:
        if "text" in update:  # a finished thread starts over
            self.text = str(update["text"])
        score = _number(update.get("draft_uncertainty"))
        words = [
            WordRecord(
                start=int(w["start"]), end=int(w["end"]), text=str(w["text"]), score=w["score"]
            )
            for w in update.get("draft_words") or []
        ]
        self.rounds.append(
            _RoundBuilder(
                index=len(self.rounds),
                context=self.text,
                draft=str(update.get("draft") or ""),
                tokens=_draft_tokens(update, score),
                words=words,
                sentences=[[int(i) for i in s] for s in update.get("draft_sentences") or []],
                uncertainty=score,
            )
        )

    def _on_score_need(self, update: Mapping[str, Any]) -> None:
        current = self.current()
        if isinstance(update.get("text"), str):
            current.accepted = _added(self.text, update["text"])
        route = str(update.get("route", ""))
        given = update.get("decision")
        decision: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        position = decision.get("trigger_position")
        word = decision.get("trigger_word")
        current.decision = Decision(
            route=route,
            trigger_position=int(position) if isinstance(position, int) else None,
            trigger_word=None if word is None else str(word),
            trigger_words=[str(w) for w in decision.get("trigger_words") or []],
            score=_number(decision.get("score")),
            threshold=_number(decision.get("threshold")),
            note=str(decision.get("note", "")),
            signal=None if decision.get("signal") is None else str(decision["signal"]),
            direction=None if decision.get("direction") is None else str(decision["direction"]),
        )

    def _on_retrieve(self, update: Mapping[str, Any]) -> None:
        given = update.get("decision")
        current = self.current()
        if isinstance(given, Mapping) and current.decision is not None:  # the retriever's note
            current.decision = replace(current.decision, note=str(given.get("note", "")))

    def _on_formulate_query(self, update: Mapping[str, Any]) -> None:
        self.query = str(update.get("query", ""))

    def _on_rerank(self, update: Mapping[str, Any]) -> None:
        for event in update.get("retrievals") or []:
            self.current().retrieval = _retrieval(event, self.query)

    def _on_agent(self, update: Mapping[str, Any]) -> None:
        """The tool-calling agent's run: a round for each search, then one for its reply."""
        given = update.get("retrievals")
        for event in getattr(given, "value", given) or []:  # written as Overwrite([...])
            query = str(event.get("query", ""))
            searched = _RoundBuilder(index=len(self.rounds), context=self.text)
            searched.decision = _agent_decision("formulate_query", query, "search tool called")
            searched.retrieval = _retrieval(event, query)
            self.rounds.append(searched)
        reply = update.get("text")
        if isinstance(reply, str):
            final = _RoundBuilder(
                index=len(self.rounds), context=self.text, draft=reply, accepted=reply
            )
            final.decision = _agent_decision("finalize", None, "answer")
            self.rounds.append(final)

    def _on_continue_generation(self, update: Mapping[str, Any]) -> None:
        if isinstance(update.get("text"), str):
            current = self.current()
            current.continuation += _added(self.text, update["text"])

    def _on_finalize(self, update: Mapping[str, Any]) -> None:
        self.answer = str(update.get("answer", ""))


def _retrieval(event: Mapping[str, Any], query: str) -> Retrieval:
    """A retrieval event as the record keeps it."""
    order = event.get("rerank_order")
    return Retrieval(
        step=int(event.get("step", 0)),
        query=str(event.get("query", query)),
        doc_ids=[str(i) for i in event.get("doc_ids", [])],
        doc_texts=[str(t) for t in event.get("doc_texts", [])],
        rerank_order=None if order is None else [int(i) for i in order],
        note=str(event.get("note", "")),
        doc_metadata=[dict(m) for m in event.get("doc_metadata") or []],
    )


def _agent_decision(route: str, query: str | None, note: str) -> Decision:
    """A tool-calling agent's decision: it called the tool (with ``query``) or answered."""
    return Decision(
        route=route,
        trigger_position=None,
        trigger_word=query,
        trigger_words=[],
        score=None,
        threshold=None,
        note=note,
        signal=None,
        direction=None,
    )


def _stream(
    graph: CompiledStateGraph[Any, Any, Any, Any],
    question: str,
    config: RunnableConfig | None,
) -> Iterator[tuple[str, Any]]:
    # subgraphs=True: a router's routes (Adaptive-RAG) stream their nodes' updates too
    for item in graph.stream(
        {"question": question}, config, stream_mode=["updates", "custom"], subgraphs=True
    ):
        _, mode, chunk = item  # (namespace, mode, chunk): rounds are read by node name
        yield str(mode), chunk


def record_run(
    graph: CompiledStateGraph[Any, Any, Any, Any],
    question: str,
    *,
    config: RunnableConfig | None = None,
    attention_model: AttentionSource | None = None,
    attention_layer: int = -1,
) -> RunRecord:
    """Run ``graph`` on ``question`` and record every round's signals and decisions.

    Args:
        graph: A compiled adaptive-RAG graph (``create_dragin_graph(...)`` and friends).
        question: The question.
        config: Passed to ``graph.stream`` (thread id, callbacks, recursion limit).
        attention_model: Optional model ([`ChatTransformers`][] with eager attention) used
            after the run to measure the attention each draft token receives, ``a(i)`` as
            DRAGIN's reference pass (one forward pass over the draft alone, max over rows,
            mean over heads). The graphs' node updates do not carry attention, so without
            it the ``attention`` signal is ``None``.
        attention_layer: Decoder layer read by ``attention_model``.

    Returns:
        The run's record.

    Raises:
        AdaptiveRAGError: ``graph`` is not a compiled graph or ``question`` is empty.
    """
    if not isinstance(graph, CompiledStateGraph):
        msg = (
            f"record_run received graph of type {type(graph).__name__}. Expected a compiled "
            "LangGraph graph. Fix: pass the result of create_adaptive_rag_graph(model, "
            "retriever, method=...) or create_dragin_graph(model, retriever)."
        )
        raise AdaptiveRAGError(msg)
    if not isinstance(question, str) or not question.strip():
        msg = f"record_run received question={question!r}. Expected a non-empty string."
        raise AdaptiveRAGError(msg)
    recorder = _Recorder()
    events: list[dict[str, Any]] = []
    for mode, chunk in _stream(graph, question, config):
        if mode == "custom":
            if isinstance(chunk, Mapping):
                events.append(dict(chunk))
            continue
        if not isinstance(chunk, Mapping):
            continue
        for node, update in chunk.items():
            if isinstance(update, Mapping):
                recorder.feed(str(node), update)
            elif update is None:  # a node that wrote nothing
                recorder.feed(str(node), {})
    rounds = [r.build() for r in recorder.rounds]
    if attention_model is not None:
        rounds = [_with_attention(r, attention_model, attention_layer) for r in rounds]
    return RunRecord(
        question=question,
        method=str(graph.name),
        answer=recorder.answer,
        text=recorder.text,
        counts=recorder.counts,
        rounds=rounds,
        events=events,
        standalone_question=next(
            (
                str(e.get("standalone_question", ""))
                for e in events
                if e.get("event") == "followup" and e.get("how") != "as_asked"
            ),
            "",
        ),
    )


def _with_attention(round_: Round, model: AttentionSource, layer: int) -> Round:
    """``round_`` with each token's received attention from one forward pass."""
    if not round_.draft.strip() or not round_.tokens:
        return round_
    matrix = model.forward_attention(round_.draft, layer=layer)
    received = attention_received(np.asarray(matrix.weights), "all_rows_head_mean")
    values = _align_by_characters(
        matrix.tokens, [float(v) for v in received], [t.text for t in round_.tokens]
    )
    tokens = [
        TokenRecord(
            text=t.text,
            probability=t.probability,
            entropy=t.entropy,
            rind=t.rind,
            attention=values[i],
            uncertainty=t.uncertainty,
            word=t.word,
        )
        for i, t in enumerate(round_.tokens)
    ]
    return Round(**{**_shallow(round_), "tokens": tokens})


def _shallow(round_: Round) -> dict[str, Any]:
    return {name: getattr(round_, name) for name in Round.__dataclass_fields__}


def _align_by_characters(
    source_pieces: Sequence[str], values: Sequence[float], target_pieces: Sequence[str]
) -> list[float | None]:
    """Carry per-token values from one tokenization of a text to another.

    Each source token's value is added to the target token holding the source token's
    first character; source tokens before the target text (a BOS marker) or without text
    are skipped. Target tokens that receive nothing get ``None``.

    Args:
        source_pieces: Text pieces of the tokenization the values belong to.
        values: One value per source piece.
        target_pieces: Text pieces of the tokenization to carry them to.

    Returns:
        One value (or ``None``) per target piece.
    """
    source = "".join(source_pieces)
    target = "".join(target_pieces)
    offset = source.find(target)
    if offset < 0:  # the source may lack the target's trailing whitespace
        offset = source.find(target.rstrip())
    if offset < 0:
        return [None] * len(target_pieces)
    owner: list[int] = []
    for index, piece in enumerate(target_pieces):
        owner.extend([index] * len(piece))
    result: list[float | None] = [None] * len(target_pieces)
    position = 0
    for piece, value in zip(source_pieces, values, strict=False):
        start = position - offset
        position += len(piece)
        if not piece or start < 0 or start >= len(owner):
            continue
        target_index = owner[start]
        result[target_index] = (result[target_index] or 0.0) + float(value)
    return result
