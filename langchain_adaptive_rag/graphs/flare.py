"""FLARE: forward-looking active retrieval (Jiang et al., 2023), direct variant.

Algorithm, one round:

1. draft: generate a look-ahead continuation without documents;
2. score_need: split it into sentences; the first sentence with an uncertain token
   (``p < theta``; or ``mean(1 - p) > theta`` in the DRAGIN code's variant) triggers
   retrieval; the sentences before it are accepted;
3. formulate_query: the uncertain sentence without its tokens of ``p < beta`` (masked query;
   when every token is masked, no query is sent and the sentence is kept, as the FLARE
   code, which issues only non-empty queries);
4. retrieve the top documents;
5. continue_generation: regenerate from the accepted text with the documents and accept
   the first sentence;
6. repeat until the answer is given or the budget is spent; finalize extracts the answer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
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
    retrieval_decision,
)
from langchain_adaptive_rag.graphs.pos import load_sentence_splitter
from langchain_adaptive_rag.graphs.query_formulation import context_before_trigger, context_query
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.retrieving import Retriever, RetrieverOptions
from langchain_adaptive_rag.signals import (
    FlareDecision,
    bare_word,
    flare_sentence_score,
    masked_query,
    reference_flare_windows,
    reference_masked_query,
    token_sentences,
)
from langchain_adaptive_rag.state import AdaptiveRAGState

__all__ = ["FLAREConfig", "FLAREPolicy", "create_flare_graph"]


@dataclass(frozen=True)
class FLAREConfig(MethodConfig):
    """FLARE settings."""

    count_ranges: ClassVar[dict[str, CountRange]] = {
        "query_max_tokens": (1, TOKENS_CAP, "tokens, more than any model's context"),
    }

    theta: float = 0.4
    """Trigger threshold ``theta``. Rule ``any_token``: a sentence is uncertain if a token has
    ``p < theta`` (the FLARE paper tunes theta per dataset; 0.4 here). Rule ``mean``: if
    ``mean(1 - p) > theta`` (the DRAGIN code's ``hallucination_threshold`` with
    ``sentence_solver="avg"``, a key its shipped configs do not set; their values for
    Llama-2-7b-chat: 2WikiMultihopQA 0.1, HotpotQA 0.08, IIRC 0.08, StrategyQA 0.1)."""
    beta: float = 0.4
    """Masked-query threshold ``beta``: tokens with ``p < beta`` are left out of the query
    (not used by ``trigger="mean"`` in reference mode, where the code masks with
    ``theta``)."""
    trigger: Literal["any_token", "mean"] = "any_token"
    """``any_token`` (paper, default) or ``mean`` (DRAGIN code's sentence average)."""
    mode: Literal["reference", "paper"] = "reference"
    """How ``trigger="mean"`` (the DRAGIN code's FLARE) is read. ``reference`` (default):
    exactly as that code, which differs from the plain reading (``paper``) in these ways:

    - Windows: a sentence's tokens are matched in its text from a cursor that slips back
      (it moves relative to the previous match), so a token of the next sentence that
      also occurs in this one is absorbed; the window takes one token more (the first
      unmatched) and the next sentence's window skips it (see
      [`reference_flare_windows`][]). Paper: each
      sentence's own tokens.
    - Masked query: tokens with ``1 - p > theta`` (the trigger's threshold; ``beta`` is not
      used) are cut from the sentence's text; the window's extra token, not found in it,
      overwrites the character before the cursor (usually the final period); whitespace
      is kept. Paper: tokens with ``p < beta`` dropped, whitespace collapsed.
    - An all-masked sentence gives a blank query: nothing is retrieved and the sentence is
      regenerated without documents. Paper: no query is sent and the sentence is kept as
      drafted, as the FLARE code does with ``trigger="any_token"`` too.

    Tokens are compared without their leading space (Llama-2's tokenizer decodes a lone
    token so) and sentences are spaCy's (``spacy_model``, or its rule-based
    ``sentencizer`` when that is not installed). With ``trigger="any_token"`` the mode
    changes nothing."""
    spacy_model: str | None = "en_core_web_sm"
    """spaCy pipeline that splits sentences in reference mode (the DRAGIN code's
    ``en_core_web_sm``), used when installed; otherwise spaCy's ``sentencizer``."""
    query_max_tokens: int = 64
    """Reference mode with ``trigger="mean"``: the query is cut to its last this-many model
    tokens, as the DRAGIN code's retriever does (``max_query_length=64``)."""
    query_formulation: Literal["masked_sentence", "last_sentence", "full_context"] = (
        "masked_sentence"
    )
    """What a retrieval asks: FLARE's masked uncertain sentence, or, for the DRAGIN
    paper's comparison of timings under one query (its Table 4), the last sentence of
    the question and the accepted text, or all of it (see
    [`ContextQuery`][langchain_adaptive_rag.graphs.query_formulation.ContextQuery]). The trigger
    decides when, whichever query is asked."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("theta", "beta"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                msg = f"FLAREConfig.{name} must be a probability in [0, 1], got {value}."
                raise AdaptiveRAGError(msg)
        if self.query_max_tokens < 1:
            msg = f"FLAREConfig.query_max_tokens must be >= 1, got {self.query_max_tokens}."
            raise AdaptiveRAGError(msg)


class FLAREPolicy(Policy):
    """FLARE's decisions over the shared graph."""

    name = "flare"
    display_name = "FLARE"
    config_class = FLAREConfig
    threshold_field = "theta"
    threshold_signal = "probability"
    threshold_direction = "below"
    decision_rule = (
        "FLARE retrieves at the first sentence that has a token with probability under "
        "θ (with the mean rule: whose mean 1 - p is over θ); the trigger is its least "
        "probable token"
    )
    colour = "#1f77b4"

    @property
    def reads_logprobs(self) -> bool:
        """FLARE's rule reads each draft token's probability."""
        return True

    def threshold_reading(self) -> tuple[str | None, Literal["above", "below"]]:
        """A token's probability under ``theta``, or for ``mean`` a sentence's score.

        Returns:
            ``("probability", "below")``, or ``(None, "above")`` under ``trigger="mean"``
            (the sentence's ``mean(1 - p)`` over ``theta``, a score of no single token).
        """
        if self.config.trigger == "mean":
            return None, "above"
        return "probability", "below"

    config: FLAREConfig

    def score_need(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Accept the confident sentences before the first uncertain one."""
        if self.config.trigger == "mean" and self.config.mode == "reference":
            return self._reference_score_need(ctx, state)
        tokens = state.get("draft_tokens", [])
        probs = [math.exp(lp) for lp in state.get("draft_logprobs", [])]
        step = state.get("step", 0) + 1
        for start, end in token_sentences(tokens):
            decision = flare_sentence_score(
                probs[start:end], self.config.theta, self.config.trigger
            )
            if not decision.uncertain:
                continue
            query = masked_query(tokens[start:end], probs[start:end], self.config.beta)
            if not query.strip():
                return self._keep_unqueried(ctx, state, end, start + decision.position, decision)
            under = [
                bare_word(tokens[i])
                for i in range(start, end)
                if self.config.trigger == "any_token" and probs[i] < self.config.theta
            ]
            return self._retrieve_at(
                ctx,
                state,
                start,
                start + decision.position,
                decision.score,
                query,
                trigger_words=[w for w in under if w],
            )
        scores = [
            flare_sentence_score(probs[a:b], self.config.theta, self.config.trigger).score
            for a, b in token_sentences(tokens)
        ]
        closest = (min if self.config.trigger == "any_token" else max)(scores, default=None)
        record = retrieval_decision(
            step, retrieve=False, score=closest, threshold=self.config.theta
        )
        return self.without_retrieval(self.accept_draft(ctx, state), step, record)

    def _keep_unqueried(
        self,
        ctx: RunContext,
        state: AdaptiveRAGState,
        end: int,
        trigger: int,
        decision: FlareDecision,
    ) -> dict[str, object]:
        """Keep the draft through the uncertain sentence: every token was masked.

        The FLARE code sends only non-empty queries; with nothing to ask, the sentence is
        generated on without new documents, which a greedy model writes as drafted.
        """
        tokens = state.get("draft_tokens", [])
        whole = end >= len(tokens)
        update = self.accept(
            ctx,
            state,
            "".join(tokens[:end]),
            end,
            ended=whole and state.get("draft_ended", False),
        )
        step = state.get("step", 0) + 1
        record = retrieval_decision(
            step,
            retrieve=False,
            score=decision.score,
            threshold=self.config.theta,
            trigger_position=trigger,
            trigger_word=bare_word(tokens[trigger]) or tokens[trigger].strip(),
            note="every token of the uncertain sentence was masked: no query, nothing "
            "retrieved (as the FLARE code)",
        )
        return self.without_retrieval(update, step, record)

    def _retrieve_at(
        self,
        ctx: RunContext,
        state: AdaptiveRAGState,
        start: int,
        trigger: int,
        score: float,
        query: str,
        *,
        trigger_words: Sequence[str] = (),
    ) -> dict[str, object]:
        """Accept the draft before token ``start`` and retrieve with ``query``.

        The decision names token ``trigger`` bare of punctuation (whole when it is
        punctuation alone) and lists ``trigger_words``, the sentence's tokens under θ.

        A run the accepted text ends (it gave the answer or spent the budget) finalizes
        instead.
        """
        tokens = state.get("draft_tokens", [])
        step = state.get("step", 0) + 1
        update = self.accept(ctx, state, "".join(tokens[:start]), start) if start else {}
        finished = bool(update.get("finished"))
        note = "the text before the uncertain sentence ended the run" if finished else ""
        decision = retrieval_decision(
            step,
            retrieve=not finished,
            score=score,
            threshold=self.config.theta,
            trigger_position=trigger,
            trigger_word=bare_word(tokens[trigger]) or tokens[trigger].strip(),
            trigger_words=trigger_words,
            note=note,
        )
        return self.with_retrieval(update, step, decision, {"query": query})

    def _reference_score_need(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """``trigger="mean"`` as the DRAGIN code: its token windows and masked query."""
        tokens = state.get("draft_tokens", [])
        probs = [math.exp(lp) for lp in state.get("draft_logprobs", [])]
        step = state.get("step", 0) + 1
        theta = self.config.theta
        text = "".join(tokens)
        sentences = load_sentence_splitter(self.config.spacy_model)(text)
        starts, offset = [], 0  # each sentence's character offset in the draft
        for sentence in sentences:
            found = text.find(sentence, offset)
            starts.append(found if found >= 0 else offset)
            offset = starts[-1] + len(sentence) if found >= 0 else offset
        pieces = [t.lstrip(" ") for t in tokens]
        windows = reference_flare_windows(pieces, sentences)
        scores = []
        for index, (start, end) in enumerate(windows):
            if end <= start:
                continue
            score = float(np.mean([1.0 - p for p in probs[start:end]]))
            scores.append(score)
            if score <= theta:
                continue
            trigger = start + int(np.argmin(probs[start:end]))
            query = reference_masked_query(
                sentences[index], pieces[start:end], probs[start:end], theta
            )
            cut = _tokens_before(tokens, starts[index])
            return self._retrieve_at(ctx, state, cut, trigger, score, query)
        decision = retrieval_decision(
            step, retrieve=False, score=max(scores, default=None), threshold=theta
        )
        return self.without_retrieval(self.accept_draft(ctx, state), step, decision)

    def formulate_query(self, ctx: RunContext, state: AdaptiveRAGState) -> str:
        """The masked uncertain sentence (or the configured ``query_formulation``).

        Reference mode with ``trigger="mean"`` cuts it to ``query_max_tokens`` tokens and
        sends a blank one as it is; a query of the context is cut so in every mode.
        """
        reference = self.config.trigger == "mean" and self.config.mode == "reference"
        if self.config.query_formulation != "masked_sentence":
            context = context_before_trigger(self.retrieval_question(state), state.get("text", ""))
            query = context_query(
                self.config.query_formulation,
                context,
                ctx,
                last_n=0,  # not a choice here
                reference=reference,
                spacy_model=self.config.spacy_model,
            )
            return self.cut_query(ctx, query, self.config.query_max_tokens)
        query = str(state.get("query_inputs", {}).get("query", ""))
        if reference:
            return self.cut_query(ctx, query, self.config.query_max_tokens)
        return query

    def continue_generation(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Regenerate the uncertain sentence with the documents."""
        return self.continue_first_sentence(ctx, state)


def _tokens_before(tokens: list[str], offset: int) -> int:
    """How many leading tokens end at or before character ``offset`` of their text."""
    count = used = 0
    while count < len(tokens) and used + len(tokens[count]) <= offset:
        used += len(tokens[count])
        count += 1
    return count


def create_flare_graph(
    model: GraphModel,
    retriever: Retriever,
    *,
    config: FLAREConfig | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    retriever_options: RetrieverOptions | None = None,
    name: str | None = None,
) -> AdaptiveRAGGraph:
    """FLARE graph: retrieve when a look-ahead sentence holds low-probability tokens.

    Args:
        model: [`ChatTransformers`][] or any object with its ``generate_trace``.
        retriever: Any LangChain retriever.
        config: FLARE settings (``theta``, ``beta``, trigger rule, budget).
        prompts: Prompt templates.
        checkpointer: Passed to ``compile``.
        retriever_options: Retries, time limit and failure handling of the retriever
            calls (default: [`RetrieverOptions`][]).
        name: Graph name.

    Returns:
        The compiled graph.
    """
    policy = FLAREPolicy(config or FLAREConfig())
    return build_adaptive_rag_graph(
        policy,
        model,
        retriever,
        prompts=prompts,
        checkpointer=checkpointer,
        retriever_options=retriever_options,
        name=name,
    )
