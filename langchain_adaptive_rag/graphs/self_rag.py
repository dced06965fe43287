"""Self-RAG: retrieve, generate and critique through reflection tokens (Asai et al., ICLR 2024).

Algorithm (short-form inference, the paper's Algorithm 1 with its segment scoring):

1. generate the answer without passages; at its first position the model gives
   ``[Retrieval]`` and ``[No Retrieval]`` probabilities;
2. retrieve when ``p([Retrieval]) / (p([Retrieval]) + p([No Retrieval])) > δ``
   (``threshold=None``: when the model wrote ``[Retrieval]`` itself);
3. without retrieval, the answer is generated after ``[No Retrieval]``;
4. with retrieval, for each of the top ``K`` passages ``d`` generate a segment after
   ``[Retrieval]<paragraph>d</paragraph>`` and score it,
   ``S = p(y) + w_rel s_rel + w_sup s_sup + w_use s_use`` (see
   [`reflection`](#langchain_adaptive_rag.graphs.reflection));
5. the answer is the segment of the highest ``S``, without its reflection tokens.

In graph terms: ``draft`` is step 1, ``score_need`` step 2, ``rerank`` generates and
scores the ``K`` segments (``rerank_order``: the passages by ``S``, best first; the state's
``segments`` keep every score), ``continue_generation`` accepts the best segment or
generates after ``[No Retrieval]``, ``finalize`` strips the reflection tokens.

The scores need a model trained to write reflection tokens: the released
``selfrag/selfrag_llama2_7b`` and ``_13b``. On [`ChatTransformers`][] their
log-probabilities are read exactly at every position, by token id; building the graph
for a model whose tokenizer lacks them fails with an error naming the fix. On a served
model they are read by text from the server's top log-probabilities
(``ServedModel(llm, top_logprobs=20)`` reads more of them), which needs the server to
keep the reflection tokens in its text (vLLM: ``extra_body={"skip_special_tokens":
False}``); a token outside the alternatives counts as log-probability -100.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

from langgraph.types import Checkpointer
from typing_extensions import NotRequired

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs._builder import AdaptiveRAGGraph, build_adaptive_rag_graph
from langchain_adaptive_rag.graphs._streaming import token_stream
from langchain_adaptive_rag.graphs.policy import (
    GraphModel,
    MethodConfig,
    Policy,
    RunContext,
    TraceModel,
    bump,
    model_call,
    retrieval_decision,
)
from langchain_adaptive_rag.graphs.reflection import (
    RETRIEVAL_TOKENS,
    ReflectionVocabulary,
    logprobs_at,
    reflection_vocabulary,
    retrieval_score,
    segment_score,
    short_form_answer,
    strip_reflection,
)
from langchain_adaptive_rag.options import CaptureOptions, GenerationTrace
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.retrieving import Retriever, RetrieverOptions
from langchain_adaptive_rag.served.model import ServedModel
from langchain_adaptive_rag.state import AdaptiveRAGState, RetrievedDoc

__all__ = [
    "SELF_RAG_PROMPT",
    "SelfRAGConfig",
    "SelfRAGPolicy",
    "create_self_rag_graph",
]

SELF_RAG_PROMPT = "### Instruction:\n{instruction}\n\n### Response:\n"
"""The prompt the released Self-RAG models were trained on (the question as the
instruction)."""


@dataclass(frozen=True)
class SelfRAGConfig(MethodConfig):
    """Self-RAG settings (the paper's symbols; the official short-form command's values)."""

    generate_max_length: int = 100
    """Tokens of each generation (``--max_new_tokens 100``)."""
    retrieve_topk: int = 10
    """Passages, one segment each (``K``; ``--ndocs 10``)."""
    threshold: float | None = 0.2
    """``δ``: retrieve when the retrieval score exceeds it; ``None``: when the first token
    the model generates is ``[Retrieval]`` (the paper's own decision, as FlashRAG reads
    it; the official short-form code's path for it names an undefined variable)."""
    retrieval: Literal["adaptive", "always", "never"] = "adaptive"
    """``adaptive`` decides as above; ``always`` and ``never`` are the official
    ``always_retrieve`` and ``no_retrieval`` modes."""
    w_rel: float = 1.0
    """Weight of ``s_rel`` (``ISREL``)."""
    w_sup: float = 1.0
    """Weight of ``s_sup`` (``ISSUP``)."""
    w_use: float = 0.5
    """Weight of ``s_use`` (``ISUSE``): 0.5, the weight the official short-form code
    scores with (its ``generate`` passes ``w_use=0.5`` whatever ``--w_use``, whose
    default of 1.0 never reaches the score)."""
    use_sequence_score: bool = True
    """Add the segment's probability ``p(y)`` (``--use_seqscore``)."""
    use_support: bool = True
    """Read the support tokens (``--use_groundness``)."""
    use_utility: bool = True
    """Read the utility tokens (``--use_utility``)."""
    mode: Literal["paper", "reference"] = "paper"
    """How the retrieval score is read: ``paper``, from the two tokens' probabilities;
    ``reference``, the official code's ratio of their log-probabilities, which rises as
    ``[Retrieval]`` becomes less likely (FlashRAG's Self-RAG uses probabilities)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.threshold is not None and not 0.0 <= self.threshold <= 1.0:
            msg = f"SelfRAGConfig.threshold must be in [0, 1] or None, got {self.threshold}."
            raise AdaptiveRAGError(msg)


class SelfRAGState(AdaptiveRAGState):
    """The graph state of Self-RAG: the shared channels and its own."""

    draft_token_ids: NotRequired[list[int]]
    """Their token ids, where a method reads tokens by id (Self-RAG's reflection tokens)."""
    reflection_logprobs: NotRequired[dict[str, float]]
    """Self-RAG: ``log p`` of ``[Retrieval]`` and ``[No Retrieval]`` at the draft's first
    position."""
    segments: NotRequired[list[dict[str, Any]]]
    """Self-RAG: one segment per retrieved passage, with its text and scores (``doc_id``,
    ``text``, ``score``, ``sequence``, ``relevance``, ``support``, ``utility``)."""


def _own(state: AdaptiveRAGState) -> SelfRAGState:
    """``state`` read with Self-RAG's own channels."""
    return cast(SelfRAGState, state)


class SelfRAGPolicy(Policy):
    """Self-RAG: the reflection tokens' probabilities decide and pick the best segment."""

    name = "self_rag"
    display_name = "Self-RAG"
    config_class = SelfRAGConfig
    colour = "#843c39"
    trained_model = "a model trained with Self-RAG's reflection tokens (selfrag/selfrag_llama2_7b)"
    config: SelfRAGConfig
    state_schema = SelfRAGState

    def fresh_channels(self) -> dict[str, object]:
        """Self-RAG's own channels at a run's start."""
        return {"draft_token_ids": [], "reflection_logprobs": {}, "segments": []}

    def check_model(self, model: TraceModel) -> None:
        """Fail unless the model's tokenizer has the reflection tokens (or it is served).

        Raises:
            AdaptiveRAGError: A model whose tokenizer lacks them.
        """
        self.vocabulary_of(model)

    @staticmethod
    def vocabulary_of(model: TraceModel) -> ReflectionVocabulary:
        """Where ``model``'s reflection tokens are read: by id, or by text when served.

        Raises:
            AdaptiveRAGError: A local model whose tokenizer lacks them.
        """
        if isinstance(model, ServedModel):  # its API gives tokens as text, no ids
            return ReflectionVocabulary({})
        return reflection_vocabulary(getattr(model, "hf_tokenizer", None))

    def vocabulary(self, ctx: RunContext) -> ReflectionVocabulary:
        """Where the run's model's reflection tokens are read."""
        return self.vocabulary_of(ctx.model)

    @staticmethod
    def prompt(state: AdaptiveRAGState) -> str:
        """[`SELF_RAG_PROMPT`][] with the question."""
        return SELF_RAG_PROMPT.format(instruction=state["question"])

    def _generate(
        self, ctx: RunContext, prompt: str, vocabulary: ReflectionVocabulary
    ) -> GenerationTrace:
        """One greedy generation with every reflection token's log-probability recorded."""
        decoding = replace(
            self.decoding(ctx, self.config.generate_max_length, ()),
            token_logprobs=vocabulary.watched,
        )
        with token_stream(prompt, self.name) as sink:
            return ctx.model.generate_trace(
                prompt, decoding=decoding, capture=CaptureOptions(logprobs=True), on_token=sink
            )[0]

    def draft(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Generate without passages; keep the retrieval tokens' log-probabilities."""
        if self.config.retrieval == "always":  # the official always_retrieve: no first pass
            return {}
        vocabulary = self.vocabulary(ctx)
        trace = self._generate(ctx, self.prompt(state), vocabulary)
        first = (
            logprobs_at(trace, 0, RETRIEVAL_TOKENS, vocabulary)
            if trace.tokens
            else [float("nan")] * len(RETRIEVAL_TOKENS)
        )
        return {
            "draft": trace.text,
            "draft_tokens": list(trace.tokens),
            "draft_token_ids": [int(i) for i in trace.token_ids],
            "draft_logprobs": [float(x) for x in trace.logprobs],
            "reflection_logprobs": dict(zip(RETRIEVAL_TOKENS, first, strict=True)),
            "counts": bump(state.get("counts"), **model_call(trace), rounds=1),
        }

    def score_need(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Retrieve when the retrieval score exceeds ``δ`` (or the model wrote it)."""
        settings = self.config
        if settings.retrieval != "adaptive":
            retrieve = settings.retrieval == "always"
            note = f"retrieval={settings.retrieval!r}"
            decision = retrieval_decision(1, retrieve=retrieve, note=note)
        elif settings.threshold is None:
            vocabulary = self.vocabulary(ctx)
            # the first token the model generates is its decision
            first_tokens = state.get("draft_tokens", [])[:1]
            first_ids = _own(state).get("draft_token_ids", [])[:1]
            wrote = (
                [t.strip() for t in first_tokens] == ["[Retrieval]"]
                if vocabulary.by_text
                else first_ids == [vocabulary.ids["[Retrieval]"]]
            )
            decision = retrieval_decision(
                1,
                retrieve=wrote,
                trigger_word="[Retrieval]" if wrote else None,
                note="the model's own decision: its first token (threshold=None)",
            )
        else:
            logprobs = _own(state).get("reflection_logprobs", {})
            retrieve_lp = logprobs.get("[Retrieval]", float("nan"))
            no_retrieve_lp = logprobs.get("[No Retrieval]", float("nan"))
            if math.isnan(retrieve_lp) or math.isnan(no_retrieve_lp):  # an empty draft
                decision = retrieval_decision(
                    1, retrieve=True, note="nothing generated to read the decision from: retrieved"
                )
            else:
                score = retrieval_score(retrieve_lp, no_retrieve_lp, settings.mode)
                decision = retrieval_decision(
                    1,
                    retrieve=score > settings.threshold,
                    score=score,
                    threshold=settings.threshold,
                    trigger_word="[Retrieval]",
                )
        route = "formulate_query" if decision["retrieve"] else "continue_generation"
        return {"route": route, "step": 1, "decision": decision, "docs": []}

    def rerank(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Generate and score one segment per passage; order the passages by ``S``.

        Returns:
            The best passage as ``docs``, the passages' retriever ranks by score (best
            first) as ``rerank_order``, and every segment with its scores as ``segments``.
        """
        docs: list[RetrievedDoc] = list(state.get("docs", []))
        if not docs:
            return {"docs": [], "rerank_order": None, "segments": []}
        vocabulary = self.vocabulary(ctx)
        settings = self.config
        segments: list[dict[str, Any]] = []
        counts = state.get("counts")
        for doc in docs:
            title = str(doc.get("metadata", {}).get("title", ""))
            prompt = (
                self.prompt(state) + f"[Retrieval]<paragraph>{title}\n{doc['text']}</paragraph>"
            )
            trace = self._generate(ctx, prompt, vocabulary)
            counts = bump(counts, **model_call(trace))
            score = segment_score(
                trace,
                vocabulary,
                w_rel=settings.w_rel,
                w_sup=settings.w_sup,
                w_use=settings.w_use,
                use_sequence=settings.use_sequence_score,
                use_support=settings.use_support,
                use_utility=settings.use_utility,
            )
            segments.append(
                {
                    "doc_id": doc["id"],
                    "text": trace.text,
                    "score": score.total,
                    "sequence": score.sequence,
                    "relevance": score.relevance,
                    "support": score.support,
                    "utility": score.utility,
                }
            )
        order = sorted(range(len(docs)), key=lambda i: segments[i]["score"], reverse=True)
        return {
            "docs": [docs[order[0]]],
            "rerank_order": order,
            "segments": segments,
            "counts": bump(counts, rounds=1),
        }

    def continue_generation(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Accept the best segment; without passages, generate after ``[No Retrieval]``."""
        segments = _own(state).get("segments") or []
        order = state.get("rerank_order")
        counts = state.get("counts")
        if segments and order:
            text = strip_reflection(str(segments[order[0]]["text"]))
            tokens = 0
        else:
            prompt = self.prompt(state) + "[No Retrieval]"
            with token_stream(prompt, self.name) as sink:
                trace = ctx.model.generate_trace(
                    prompt,
                    decoding=self.decoding(ctx, self.config.generate_max_length, ()),
                    on_token=sink,
                )[0]
            text, tokens = strip_reflection(trace.text), trace.num_tokens
            counts = bump(counts, **model_call(trace), rounds=1)
        return {"text": text, "answer_tokens": tokens, "finished": True, "counts": counts}

    def finalize(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """The answer is the accepted text, post-processed as the official evaluation does."""
        text = state.get("text", "")
        return {
            "answer": short_form_answer(text),
            "text": text,
            "counts": bump(state.get("counts")),
        }


def create_self_rag_graph(
    model: GraphModel,
    retriever: Retriever,
    *,
    config: SelfRAGConfig | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    retriever_options: RetrieverOptions | None = None,
    name: str | None = None,
) -> AdaptiveRAGGraph:
    """Self-RAG graph: reflection tokens decide retrieval and pick the best segment.

    Needs a model trained with Self-RAG's reflection tokens (``selfrag/selfrag_llama2_7b``
    or ``_13b``), on [`ChatTransformers`][] or served with log-probabilities; its prompt
    is [`SELF_RAG_PROMPT`][] (``prompts`` is not read).

    Raises:
        AdaptiveRAGError: A local model's tokenizer lacks the reflection tokens.
    """
    policy = SelfRAGPolicy(config or SelfRAGConfig())
    return build_adaptive_rag_graph(
        policy,
        model,
        retriever,
        prompts=prompts,
        checkpointer=checkpointer,
        retriever_options=retriever_options,
        name=name,
    )
