"""Baselines with a fixed retrieval schedule (DRAGIN paper, section 4.2).

- wo-RAG: never retrieve; one generation.
- SR-RAG: retrieve once with the question, then generate.
- FL-RAG: every ``n`` tokens, retrieve with the previous ``n`` tokens (first: the question).
- FS-RAG: every sentence, retrieve with the previous sentence (first: the question).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from langgraph.types import Checkpointer

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs._builder import AdaptiveRAGGraph, build_adaptive_rag_graph
from langchain_adaptive_rag.graphs.policy import (
    TOKENS_CAP,
    CountRange,
    GraphModel,
    MethodConfig,
    Policy,
    RunContext,
    bump,
    model_call,
    retrieval_decision,
)
from langchain_adaptive_rag.graphs.query_formulation import context_before_trigger, context_query
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.retrieving import Retriever, RetrieverOptions
from langchain_adaptive_rag.state import AdaptiveRAGState

__all__ = [
    "FixLengthConfig",
    "FixLengthPolicy",
    "FixSentenceConfig",
    "FixSentencePolicy",
    "NoRetrievalPolicy",
    "RetrieveEveryRound",
    "SingleRoundPolicy",
    "create_fix_length_graph",
    "create_fix_sentence_graph",
    "create_no_retrieval_graph",
    "create_single_round_graph",
]


class NoRetrievalPolicy(Policy):
    """wo-RAG: draft the whole answer, never retrieve."""

    name = "no_retrieval"
    display_name = "wo-RAG"
    colour = "#7f7f7f"


class RetrieveEveryRound(Policy):
    """Skip the look-ahead: every round retrieves, then generates with the documents."""

    def draft(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """No look-ahead: the schedule alone decides."""
        return {}

    def score_need(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Always retrieve (no trigger, score or threshold)."""
        step = state.get("step", 0)  # the round that follows counts the step
        return {"route": "formulate_query", "decision": retrieval_decision(step + 1, retrieve=True)}

    def formulate_query(self, ctx: RunContext, state: AdaptiveRAGState) -> str:
        """The text accepted last round; the question in the first round."""
        previous = state.get("last_accepted", "").strip()
        return previous or self.retrieval_question(state)


class SingleRoundPolicy(RetrieveEveryRound):
    """SR-RAG: one retrieval with the question, before any text."""

    name = "single_round"
    display_name = "SR-RAG"
    colour = "#8c564b"

    def score_need(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Retrieve in the first round only."""
        if state.get("step", 0) == 0:
            return super().score_need(ctx, state)
        decision = retrieval_decision(state.get("step", 0) + 1, retrieve=False)
        return {"route": "continue_generation", "decision": decision}  # the same documents again

    def formulate_query(self, ctx: RunContext, state: AdaptiveRAGState) -> str:
        """The question."""
        return self.retrieval_question(state)


@dataclass(frozen=True)
class FixLengthConfig(MethodConfig):
    """FL-RAG settings."""

    count_ranges: ClassVar[dict[str, CountRange]] = {
        "fix_length": (1, TOKENS_CAP, "tokens, more than any model's context"),
    }
    token_budgets: ClassVar[tuple[str, ...]] = ("fix_length",)

    fix_length: int = 32
    """Tokens generated between retrievals (``n``). The DRAGIN code reads
    ``fix_length`` from its config but its configs never set it; 32 is this package's
    choice: about one sentence of the papers' chain-of-thought answers."""
    query_formulation: Literal["last_chunk", "last_sentence", "full_context"] = "last_chunk"
    """What a retrieval asks: the previous ``n`` tokens (FL-RAG), or, for the DRAGIN
    paper's comparison of timings under one query (its Table 4), the last sentence of the
    question and the accepted text, or all of it."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.fix_length < 1:
            msg = f"FixLengthConfig.fix_length must be >= 1, got {self.fix_length}."
            raise AdaptiveRAGError(msg)


class FixLengthPolicy(RetrieveEveryRound):
    """FL-RAG: retrieve with the previous chunk, generate the next ``n`` tokens."""

    name = "fix_length"
    display_name = "FL-RAG"
    config_class = FixLengthConfig
    colour = "#bcbd22"
    config: FixLengthConfig

    def formulate_query(self, ctx: RunContext, state: AdaptiveRAGState) -> str:
        """The previous chunk (the question first), or the configured context query."""
        if self.config.query_formulation == "last_chunk":
            return super().formulate_query(ctx, state)
        context = context_before_trigger(self.retrieval_question(state), state.get("text", ""))
        return context_query(self.config.query_formulation, context, ctx, last_n=0, reference=False)

    def continue_generation(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Generate the next ``fix_length`` tokens with the documents; accept them all."""
        chunk = min(self.config.fix_length, self.remaining(state))
        trace = self.generate(ctx, state, state.get("docs", []), max_new_tokens=chunk)
        update = self.accept(
            ctx, state, trace.text, trace.num_tokens, ended=self.answer_ended(ctx, trace)
        )
        update["counts"] = bump(state.get("counts"), **model_call(trace), rounds=1)
        update["step"] = state.get("step", 0) + 1
        return update


@dataclass(frozen=True)
class FixSentenceConfig(MethodConfig):
    """FS-RAG settings (sentences end at ``.``, ``!`` or ``?`` before a space)."""


class FixSentencePolicy(RetrieveEveryRound):
    """FS-RAG: retrieve with the previous sentence, keep the next sentence only."""

    name = "fix_sentence"
    display_name = "FS-RAG"
    config_class = FixSentenceConfig
    colour = "#17becf"

    def continue_generation(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Generate with the documents; accept the first sentence only."""
        update = self.continue_first_sentence(ctx, state)
        update["step"] = state.get("step", 0) + 1
        return update


def create_no_retrieval_graph(
    model: GraphModel,
    retriever: Retriever,
    *,
    config: MethodConfig | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    retriever_options: RetrieverOptions | None = None,
    name: str | None = None,
) -> AdaptiveRAGGraph:
    """wo-RAG graph: the model answers from its own knowledge (``retriever`` is unused)."""
    policy = NoRetrievalPolicy(config or MethodConfig())
    return build_adaptive_rag_graph(
        policy,
        model,
        retriever,
        prompts=prompts,
        checkpointer=checkpointer,
        retriever_options=retriever_options,
        name=name,
    )


def create_single_round_graph(
    model: GraphModel,
    retriever: Retriever,
    *,
    config: MethodConfig | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    retriever_options: RetrieverOptions | None = None,
    name: str | None = None,
) -> AdaptiveRAGGraph:
    """SR-RAG graph: retrieve with the question once, then answer with the documents."""
    policy = SingleRoundPolicy(config or MethodConfig())
    return build_adaptive_rag_graph(
        policy,
        model,
        retriever,
        prompts=prompts,
        checkpointer=checkpointer,
        retriever_options=retriever_options,
        name=name,
    )


def create_fix_length_graph(
    model: GraphModel,
    retriever: Retriever,
    *,
    config: FixLengthConfig | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    retriever_options: RetrieverOptions | None = None,
    name: str | None = None,
) -> AdaptiveRAGGraph:
    """FL-RAG graph: retrieve every ``config.fix_length`` tokens."""
    policy = FixLengthPolicy(config or FixLengthConfig())
    return build_adaptive_rag_graph(
        policy,
        model,
        retriever,
        prompts=prompts,
        checkpointer=checkpointer,
        retriever_options=retriever_options,
        name=name,
    )


def create_fix_sentence_graph(
    model: GraphModel,
    retriever: Retriever,
    *,
    config: FixSentenceConfig | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    retriever_options: RetrieverOptions | None = None,
    name: str | None = None,
) -> AdaptiveRAGGraph:
    """FS-RAG graph: retrieve before every sentence."""
    policy = FixSentencePolicy(config or FixSentenceConfig())
    return build_adaptive_rag_graph(
        policy,
        model,
        retriever,
        prompts=prompts,
        checkpointer=checkpointer,
        retriever_options=retriever_options,
        name=name,
    )
