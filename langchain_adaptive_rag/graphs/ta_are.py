"""Vanilla and TA-ARE prompting: ask the model whether it needs retrieval (Zhang et al., 2024).

Algorithm (short-form QA):

1. draft: ask "do you need to retrieve external resources?" (TA-ARE: prefixed with today's
   date and followed by four demonstrations, two [Yes] and two [No]);
2. score_need: "[Yes]" (also "Yes", "**Yes**", "yes.") retrieves; "[No]" does not; an
   answer that is neither retrieves, and the retrieval event says so;
3. formulate_query: the question; 4. retrieve the top 5 documents;
5. continue_generation: answer from own knowledge, or over a ``Paragraph:`` of the
   documents; 6. finalize: the answer is the generated text.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
from langchain_core.embeddings import Embeddings
from langgraph.types import Checkpointer

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs._builder import AdaptiveRAGGraph, build_adaptive_rag_graph
from langchain_adaptive_rag.graphs._streaming import token_stream
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
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.retrieving import Retriever, RetrieverOptions
from langchain_adaptive_rag.state import AdaptiveRAGState

__all__ = [
    "DECISION_INSTRUCTION",
    "TAAREConfig",
    "TAAREPolicy",
    "VanillaPolicy",
    "create_ta_are_graph",
    "create_vanilla_graph",
    "parse_decision",
]

DECISION_INSTRUCTION = (
    "Given a question, determine whether you need to retrieve external resources, such as "
    "real-time search engines, Wikipedia, or databases, to answer the question correctly. "
    'Only answer "[Yes]" or "[No]".'
)
"""The retrieval-decision instruction of the RetrievalQA paper."""

DEFAULT_DEMONSTRATIONS: tuple[tuple[str, str], ...] = (
    ("Who won the most recent men's football World Cup?", "[Yes]"),
    ("What is the population of the smallest village in Estonia?", "[Yes]"),
    ("What is the chemical symbol of gold?", "[No]"),
    ("Who wrote the play Romeo and Juliet?", "[No]"),
)
"""Two questions that need retrieval (recent or long-tail facts) and two that do not."""

_ANSWER_OWN = (
    "Please use your own knowledge to answer the question. If you do not know the answer, "
    'just say "I don\'t know".\nQuestion: {question}\nAnswer:'
)
_ANSWER_WITH_DOCS = (
    "Please use the paragraph and your own knowledge to answer the question. If you do not "
    'know the answer, just say "I don\'t know".\nParagraph: {paragraph}\n'
    "Question: {question}\nAnswer:"
)


def parse_decision(text: str) -> bool | None:
    """``True`` for a yes ("[Yes]", "Yes", "**Yes**", "yes."), ``False`` for a no, else ``None``."""
    match = re.search(r"\b(yes|no)\b", text.lower())
    if match is None:
        return None
    return match.group(1) == "yes"


@dataclass(frozen=True)
class TAAREConfig(MethodConfig):
    """Vanilla / TA-ARE settings (short-form QA: greedy, 100 tokens, top-5 documents)."""

    count_ranges: ClassVar[dict[str, CountRange]] = {
        "decision_max_tokens": (1, TOKENS_CAP, "tokens, more than any model's context"),
        "nearest_yes": (0, 64, "demonstrations, more than any prompt holds"),
    }
    token_budgets: ClassVar[tuple[str, ...]] = ("decision_max_tokens",)

    generate_max_length: int = 100
    """Answer budget (the paper: 100 tokens)."""
    retrieve_topk: int = 5
    """Documents in the answer's paragraph (the paper: top 5)."""
    decision_max_tokens: int = 8
    """Tokens for the "[Yes]"/"[No]" decision."""
    today: str | None = None
    """TA-ARE's date, e.g. "November 21, 2026"; ``None``: the date the graph runs."""
    demonstrations: tuple[tuple[str, str], ...] = DEFAULT_DEMONSTRATIONS
    """TA-ARE's (question, "[Yes]"/"[No]") demonstrations."""
    yes_pool: tuple[str, ...] = ()
    """Questions that need retrieval; with an ``embeddings`` model given to the graph, the
    ``nearest_yes`` of them closest to the question replace the fixed [Yes] demonstrations
    (the paper's optional nearest-neighbour demonstrations)."""
    nearest_yes: int = 2
    """[Yes] demonstrations taken from ``yes_pool`` (the paper: 2)."""
    answer_prompt: Literal["short_form", "qa"] = "short_form"
    """The answer step's prompt. ``short_form`` (the paper): "Please use your own
    knowledge ..." over a ``Paragraph:`` of the documents, the answer being the generated
    line. ``qa``: the graph's [`QAPrompts`][] (few-shot ``Question:``/``Answer:`` with a
    numbered ``Context:`` block), the answer extracted after "So the answer is" as for the
    other methods: for a model tuned to that format (the toy model), so the decision is
    compared on answers the model can give."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.nearest_yes < 0:
            msg = f"TAAREConfig.nearest_yes must be >= 0, got {self.nearest_yes}."
            raise AdaptiveRAGError(msg)
        if self.answer_prompt not in ("short_form", "qa"):
            msg = (
                f"TAAREConfig.answer_prompt must be 'short_form' or 'qa', got "
                f"{self.answer_prompt!r}."
            )
            raise AdaptiveRAGError(msg)


class VanillaPolicy(Policy):
    """Ask the model whether it needs retrieval; answer with or without documents."""

    name = "vanilla"
    display_name = "Vanilla"
    config_class = TAAREConfig
    colour = "#9467bd"
    config: TAAREConfig

    def decision_prompt(self, question: str) -> str:
        """The instruction and the question."""
        return f"{DECISION_INSTRUCTION}\nQuestion: {question}\nAnswer:"

    def draft(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Generate the retrieval decision."""
        prompt = self.decision_prompt(state["question"])
        with token_stream(prompt, self.name) as sink:
            trace = ctx.model.generate_trace(
                prompt,
                decoding=self.decoding(ctx, self.config.decision_max_tokens, ("\n",)),
                on_token=sink,
            )[0]
        return {
            "draft": trace.text,
            "draft_tokens": list(trace.tokens),
            "counts": bump(state.get("counts"), **model_call(trace), rounds=1),
        }

    def score_need(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Retrieve on "[Yes]" and on an unparseable decision; answer directly on "[No]"."""
        said = parse_decision(state.get("draft", ""))
        answer = state.get("draft", "").strip()
        if said is False:
            decision = retrieval_decision(1, retrieve=False, trigger_word=answer)
            return {"route": "continue_generation", "step": 1, "docs": [], "decision": decision}
        note = "" if said else f"unparseable decision {state.get('draft', '')!r}: retrieved"
        decision = retrieval_decision(1, retrieve=True, trigger_word=answer, note=note)
        return {"route": "formulate_query", "step": 1, "decision": decision}

    def continue_generation(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Answer, over a paragraph of the documents when there are any."""
        docs = state.get("docs", [])
        if self.config.answer_prompt == "qa":  # the graph's QA prompt, as the other methods
            trace = self.generate(ctx, state, docs)
            update = self.accept(ctx, state, trace.text, trace.num_tokens)
            update["finished"] = True
            update["counts"] = bump(state.get("counts"), **model_call(trace))
            return update
        if docs:
            paragraph = " ".join(d["text"] for d in docs)
            prompt = _ANSWER_WITH_DOCS.format(paragraph=paragraph, question=state["question"])
        else:
            prompt = _ANSWER_OWN.format(question=state["question"])
        with token_stream(prompt, self.name) as sink:
            trace = ctx.model.generate_trace(
                prompt,
                decoding=self.decoding(ctx, self.config.generate_max_length, ("\n",)),
                on_token=sink,
            )[0]
        return {
            "text": trace.text,
            "answer_tokens": trace.num_tokens,
            "finished": True,
            "counts": bump(state.get("counts"), **model_call(trace)),
        }

    def finalize(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """The answer is the generated text (``qa``: extracted, forced when missing)."""
        if self.config.answer_prompt == "qa":
            return super().finalize(ctx, state)
        text = state.get("text", "")
        return {"answer": text.strip(), "text": text, "counts": bump(state.get("counts"))}


class TAAREPolicy(VanillaPolicy):
    """TA-ARE: the decision prompt adds today's date and four demonstrations."""

    name = "ta_are"
    display_name = "TA-ARE"
    colour = "#e377c2"

    def __init__(self, config: MethodConfig, embeddings: Embeddings | None = None) -> None:
        """Keep the configuration and, optionally, the embeddings that pick [Yes] demos.

        Args:
            config: TA-ARE settings.
            embeddings: Embeds ``config.yes_pool`` and the question; ``None`` keeps the
                fixed demonstrations.

        Raises:
            AdaptiveRAGError: ``embeddings`` is given with an empty ``yes_pool``.
        """
        super().__init__(config)
        if embeddings is not None and not self.config.yes_pool:
            msg = (
                "Received embeddings for TA-ARE but TAAREConfig.yes_pool is empty. Expected "
                "questions that need retrieval to choose the nearest [Yes] demonstrations "
                "from: pass TAAREConfig(yes_pool=(...)), or no embeddings."
            )
            raise AdaptiveRAGError(msg)
        self.embeddings = embeddings
        self._pool_vectors: np.ndarray | None = None

    def demonstrations(self, question: str) -> tuple[tuple[str, str], ...]:
        """The fixed demonstrations, or the nearest [Yes] ones plus the fixed [No] ones."""
        demos = self.config.demonstrations
        if self.embeddings is None:
            return demos
        if self._pool_vectors is None:
            self._pool_vectors = _unit(
                np.asarray(self.embeddings.embed_documents(list(self.config.yes_pool)))
            )
        query = _unit(np.asarray([self.embeddings.embed_query(question)]))[0]
        order = np.argsort(-(self._pool_vectors @ query), kind="stable")
        nearest = [(self.config.yes_pool[i], "[Yes]") for i in order[: self.config.nearest_yes]]
        return (*nearest, *(d for d in demos if parse_decision(d[1]) is False))

    def decision_prompt(self, question: str) -> str:
        """Date, instruction, demonstrations, question."""
        today = self.config.today or datetime.date.today().strftime("%B %d, %Y")
        demos = "".join(f"Question: {q}\nAnswer: {a}\n" for q, a in self.demonstrations(question))
        return f"Today is {today}. {DECISION_INSTRUCTION}\n{demos}Question: {question}\nAnswer:"


def _unit(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def create_vanilla_graph(
    model: GraphModel,
    retriever: Retriever,
    *,
    config: TAAREConfig | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    retriever_options: RetrieverOptions | None = None,
    name: str | None = None,
) -> AdaptiveRAGGraph:
    """Vanilla prompting graph: the model says whether it needs retrieval."""
    policy = VanillaPolicy(config or TAAREConfig())
    return build_adaptive_rag_graph(
        policy,
        model,
        retriever,
        prompts=prompts,
        checkpointer=checkpointer,
        retriever_options=retriever_options,
        name=name,
    )


def create_ta_are_graph(
    model: GraphModel,
    retriever: Retriever,
    *,
    config: TAAREConfig | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    retriever_options: RetrieverOptions | None = None,
    name: str | None = None,
    embeddings: Embeddings | None = None,
) -> AdaptiveRAGGraph:
    """TA-ARE graph: time-aware decision prompt with demonstrations.

    With ``embeddings``, the ``nearest_yes`` questions of ``config.yes_pool`` closest to
    each question (cosine) are its [Yes] demonstrations.
    """
    policy = TAAREPolicy(config or TAAREConfig(), embeddings)
    return build_adaptive_rag_graph(
        policy,
        model,
        retriever,
        prompts=prompts,
        checkpointer=checkpointer,
        retriever_options=retriever_options,
        name=name,
    )
