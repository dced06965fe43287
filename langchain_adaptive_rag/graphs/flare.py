"""FLARE: forward-looking active retrieval (Jiang et al., 2023), direct variant.

Algorithm, one round:

1. draft: generate a look-ahead continuation without documents;
2. score_need: split it into sentences; the first sentence with an uncertain token
   (``p < theta``; or ``mean(1 - p) > theta`` in the DRAGIN code's variant) triggers
   retrieval; the sentences before it are accepted;
3. formulate_query: the uncertain sentence without its tokens of ``p < beta`` (masked query);
4. retrieve the top documents;
5. continue_generation: regenerate from the accepted text with the documents and accept
   the first sentence;
6. repeat until the answer is given or the budget is spent; finalize extracts the answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from langchain_core.retrievers import BaseRetriever
from langgraph.types import Checkpointer

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs._builder import AdaptiveRAGGraph, build_adaptive_rag_graph
from langchain_adaptive_rag.policy import (
    GenerationConfig,
    Policy,
    RunContext,
    TraceModel,
    no_retrieval_decision,
)
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.signals import (
    flare_sentence_score,
    masked_query,
    token_sentences,
)
from langchain_adaptive_rag.state import AdaptiveRAGState

__all__ = ["FLAREConfig", "FLAREPolicy", "create_flare_graph"]


@dataclass(frozen=True)
class FLAREConfig(GenerationConfig):
    """FLARE settings."""

    theta: float = 0.4
    """Trigger threshold ``theta``. Rule ``any_token``: a sentence is uncertain if a token has
    ``p < theta`` (the FLARE paper tunes theta per dataset; 0.4 here). Rule ``mean``: if
    ``mean(1 - p) > theta`` (the DRAGIN code's ``hallucination_threshold`` with
    ``sentence_solver="avg"``; its released Llama-2-7b-chat configs use 0.1)."""
    beta: float = 0.4
    """Masked-query threshold ``beta``: tokens with ``p < beta`` are left out of the query."""
    trigger: Literal["any_token", "mean"] = "any_token"
    """``any_token`` (paper, default) or ``mean`` (DRAGIN code's sentence average)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("theta", "beta"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                msg = f"FLAREConfig.{name} must be a probability in [0, 1], got {value}."
                raise AdaptiveRAGError(msg)


class FLAREPolicy(Policy):
    """FLARE's decisions over the shared graph."""

    name = "flare"
    config: FLAREConfig

    def score_need(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Accept the confident sentences before the first uncertain one."""
        tokens = state.get("draft_tokens", [])
        probs = [math.exp(lp) for lp in state.get("draft_logprobs", [])]
        step = state.get("step", 0) + 1
        for start, end in token_sentences(tokens):
            decision = flare_sentence_score(
                probs[start:end], self.config.theta, self.config.trigger
            )
            if not decision.uncertain:
                continue
            keep = "".join(tokens[:start])
            update = self.accept(ctx, state, keep, start) if start else {}
            if update.get("finished"):  # answered or out of budget before the trigger
                update.update({"route": "finalize", "step": step})
                return update
            trigger = start + decision.position
            update.update(
                {
                    "route": "retrieve",
                    "step": step,
                    "finished": False,
                    "pending": {
                        "trigger_position": trigger,
                        "trigger_word": tokens[trigger].strip(),
                        "score": decision.score,
                        "threshold": self.config.theta,
                        "sentence": "".join(tokens[start:end]),
                        "query": masked_query(
                            tokens[start:end], probs[start:end], self.config.beta
                        ),
                    },
                }
            )
            return update
        update = self.accept(ctx, state, state.get("draft", ""), len(tokens))
        update["route"] = "finalize" if update["finished"] else "draft"
        update["step"] = step
        scores = [
            flare_sentence_score(probs[a:b], self.config.theta, self.config.trigger).score
            for a, b in token_sentences(tokens)
        ]
        closest = (min if self.config.trigger == "any_token" else max)(scores, default=None)
        update["pending"] = no_retrieval_decision(closest, self.config.theta)
        return update

    def formulate_query(self, ctx: RunContext, state: AdaptiveRAGState) -> str:
        """The masked uncertain sentence (the question if every token was masked)."""
        query = str(state.get("pending", {}).get("query", ""))
        return query or state["question"]

    def continue_generation(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Regenerate the uncertain sentence with the documents."""
        return self.continue_first_sentence(ctx, state)


def create_flare_graph(
    model: TraceModel,
    retriever: BaseRetriever,
    *,
    config: FLAREConfig | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    name: str | None = None,
) -> AdaptiveRAGGraph:
    """FLARE graph: retrieve when a look-ahead sentence holds low-probability tokens.

    Args:
        model: ``ChatTransformers`` or any object with its ``generate_trace``.
        retriever: Any LangChain retriever.
        config: FLARE settings (``theta``, ``beta``, trigger rule, budget).
        prompts: Prompt templates.
        checkpointer: Passed to ``compile``.
        name: Graph name.

    Returns:
        The compiled graph.
    """
    policy = FLAREPolicy(config or FLAREConfig())
    return build_adaptive_rag_graph(
        policy, model, retriever, prompts=prompts, checkpointer=checkpointer, name=name
    )
