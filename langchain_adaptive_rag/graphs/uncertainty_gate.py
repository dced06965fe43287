"""Uncertainty gates: answer once without documents, retrieve only when the answer is unsure.

The training-free gates of AdaRAGUE (Moskvoretskii et al., ACL 2025: uncertainty
estimators as the retrieval decision, at under one retrieval and two LLM calls a
question) and TARG (2026: a gate on the draft's top-1/top-2 margin).

Algorithm:

1. draft: the whole answer without documents (greedy; with ``k`` samples besides it
   for the sample estimators);
2. score_need: the estimator's value ``u`` of the draft; retrieve when ``u`` passes
   ``threshold`` (above it for entropy, perplexity and the sample estimators; below it for
   the margin, where a small gap means doubt); otherwise the draft is the answer;
3. formulate_query: the question; 4. retrieve;
5. continue_generation: the whole answer again, with the documents;
6. finalize reads the answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import ClassVar, Literal, cast

from langgraph.types import Checkpointer
from typing_extensions import NotRequired

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs._builder import AdaptiveRAGGraph, build_adaptive_rag_graph
from langchain_adaptive_rag.graphs._streaming import token_stream
from langchain_adaptive_rag.graphs.policy import (
    CountRange,
    GraphModel,
    MethodConfig,
    Policy,
    RunContext,
    bump,
    model_call,
    retrieval_decision,
)
from langchain_adaptive_rag.options import CaptureOptions, GenerationTrace
from langchain_adaptive_rag.prompts import QAPrompts, build_prompt
from langchain_adaptive_rag.retrieving import Retriever, RetrieverOptions
from langchain_adaptive_rag.signals import (
    energy_score,
    length_normalised_entropy,
    mean_entropy,
    multi_sample_perplexity,
    perplexity,
    sample_logprob_variance,
    top_two_margin,
)
from langchain_adaptive_rag.state import AdaptiveRAGState

__all__ = [
    "GATE_DIRECTIONS",
    "GATE_THRESHOLDS",
    "SAMPLE_ESTIMATORS",
    "GateEstimator",
    "UncertaintyGateConfig",
    "UncertaintyGatePolicy",
    "create_uncertainty_gate_graph",
    "gate_uncertainty",
]

GateEstimator = Literal[
    "margin",
    "entropy",
    "perplexity",
    "energy",
    "sample_variance",
    "multi_sample_perplexity",
    "ln_entropy",
]
"""What the gate reads from the draft: ``margin``, the mean gap between the top two
log-probabilities of each token (TARG's robust default; needs the top 2 log-probabilities,
which served models give); ``entropy``, the mean token entropy (on a served model the
lower bound from its top-k log-probabilities); ``perplexity``; ``energy``, minus the mean
logsumexp of the raw logits (local models only); and over ``num_samples`` sampled answers,
``sample_variance`` (the variance of their mean token log-probability),
``multi_sample_perplexity`` and ``ln_entropy`` (length-normalised entropy), SeaKR's
ablations."""

SAMPLE_ESTIMATORS: frozenset[str] = frozenset(
    {"sample_variance", "multi_sample_perplexity", "ln_entropy"}
)
"""The estimators that read sampled answers."""

GATE_DIRECTIONS: dict[str, Literal["above", "below"]] = {
    "margin": "below",
    "entropy": "above",
    "perplexity": "above",
    "energy": "above",
    "sample_variance": "above",
    "multi_sample_perplexity": "above",
    "ln_entropy": "above",
}
"""Which side of the threshold retrieves, per estimator."""

GATE_THRESHOLDS: dict[str, float] = {
    "margin": 2.0,
    "entropy": 1.0,
    "perplexity": 2.0,
    "energy": -20.0,
    "sample_variance": 0.05,
    "multi_sample_perplexity": 2.0,
    "ln_entropy": 0.7,
}
"""Each estimator's threshold when ``threshold`` is ``None``: starting points on each
estimator's scale, not tuned for any model. Calibrate with ``adaptive-rag calibrate``."""


@dataclass(frozen=True)
class UncertaintyGateConfig(MethodConfig):
    """Uncertainty-gate settings."""

    count_ranges: ClassVar[dict[str, CountRange]] = {
        "num_samples": (1, 256, "samples, decoded with the greedy answer in one call"),
    }

    estimator: GateEstimator = "margin"
    """The uncertainty estimator (see [`GateEstimator`][])."""
    threshold: float | None = None
    """Threshold ``τ`` on the estimator's value; ``None``: [`GATE_THRESHOLDS`][]."""
    num_samples: int = 5
    """Sampled answers besides the greedy one, for the sample estimators (``k``)."""
    temperature: float = 1.0
    """Sampling temperature of the samples."""
    top_k: int = 50
    """Top-k of the samples."""
    top_p: float = 0.9
    """Top-p of the samples."""
    seed: int = 0
    """Seed of the first sample (sample ``i`` uses ``seed + i``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.threshold is not None and not math.isfinite(self.threshold):
            msg = f"UncertaintyGateConfig.threshold must be finite, got {self.threshold}."
            raise AdaptiveRAGError(msg)
        if self.estimator in SAMPLE_ESTIMATORS and self.num_samples < 2:
            msg = (
                f"UncertaintyGateConfig.num_samples must be >= 2 for estimator="
                f"{self.estimator!r}, got {self.num_samples}."
            )
            raise AdaptiveRAGError(msg)
        if self.temperature <= 0 or not 0 < self.top_p <= 1 or self.top_k < 0:
            msg = (
                "UncertaintyGateConfig needs temperature > 0, 0 < top_p <= 1 and top_k >= 0; "
                f"got temperature={self.temperature}, top_p={self.top_p}, top_k={self.top_k}."
            )
            raise AdaptiveRAGError(msg)

    @property
    def gate_threshold(self) -> float:
        """``threshold``, or the estimator's starting point when it is ``None``."""
        return GATE_THRESHOLDS[self.estimator] if self.threshold is None else self.threshold

    @property
    def rows_per_call(self) -> int:
        """The greedy answer and its samples decode in one call."""
        return 1 + self.num_samples if self.estimator in SAMPLE_ESTIMATORS else 1


def gate_uncertainty(
    estimator: GateEstimator, greedy: GenerationTrace, samples: list[GenerationTrace]
) -> float:
    """The estimator's value for a draft (and its samples).

    Args:
        estimator: The estimator.
        greedy: The greedy draft's trace.
        samples: The sampled answers (empty unless a sample estimator).

    Returns:
        ``u``; an empty draft gives the value that retrieves (``inf``, or a margin of 0).

    Raises:
        AdaptiveRAGError: The model did not give what the estimator reads.
    """
    if estimator == "margin":
        if greedy.top_logprobs is None:
            msg = (
                "The margin gate reads each token's top 2 log-probabilities; the model "
                "returned none. Fix: use ChatTransformers or a served model that returns "
                "top log-probabilities (ChatOpenAI(logprobs=True, top_logprobs=2))."
            )
            raise AdaptiveRAGError(msg)
        return top_two_margin(greedy.top_logprobs)
    if estimator == "entropy":
        return mean_entropy(greedy.entropies)
    if estimator == "perplexity":
        return perplexity(greedy.logprobs)
    if estimator == "energy":
        if greedy.logsumexp is None:
            msg = (
                "The energy gate reads the logsumexp of the model's raw logits, which a "
                "served model does not return. Fix: run it on ChatTransformers, or choose "
                "estimator='margin', 'entropy' or 'perplexity'."
            )
            raise AdaptiveRAGError(msg)
        return energy_score(greedy.logsumexp)
    logprobs = [t.logprobs for t in samples]
    if estimator == "sample_variance":
        return sample_logprob_variance(logprobs)
    if estimator == "multi_sample_perplexity":
        return multi_sample_perplexity(logprobs)
    return length_normalised_entropy(logprobs)


class UncertaintyGateState(AdaptiveRAGState):
    """The gate's state: the shared channels and its own."""

    draft_uncertainty: NotRequired[float]
    """The estimator's value ``u`` of the draft."""
    draft_bound: NotRequired[bool]
    """Whether ``u`` is an entropy computed from a served model's top-k log-probabilities
    (a lower bound of the true entropy)."""


def _own(state: AdaptiveRAGState) -> UncertaintyGateState:
    return cast(UncertaintyGateState, state)


class UncertaintyGatePolicy(Policy):
    """One closed-book answer; its uncertainty decides whether to answer again with documents."""

    name = "uncertainty_gate"
    display_name = "Uncertainty gate"
    config_class = UncertaintyGateConfig
    threshold_field = "threshold"
    threshold_symbol = "τ"
    threshold_signal = "uncertainty"
    threshold_direction = "below"
    decision_rule = (
        "the gate retrieves when the closed-book answer's uncertainty passes τ (the "
        "margin: below it; the other estimators: above it)"
    )
    colour = "#c49c94"
    signal_names: ClassVar[dict[str, tuple[str, str]]] = {
        "uncertainty": ("closed-book answer's uncertainty u", "u")
    }
    config: UncertaintyGateConfig
    state_schema = UncertaintyGateState

    def threshold_reading(self) -> tuple[str | None, Literal["above", "below"]]:
        """The draft's uncertainty, read in the estimator's direction."""
        return "uncertainty", GATE_DIRECTIONS[self.config.estimator]

    @property
    def reads_logprobs(self) -> bool:
        """Every estimator reads the draft's log-probabilities."""
        return True

    def draft(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """The closed-book answer (and its samples) and the estimator's value."""
        config = self.config
        prompt = build_prompt(ctx.prompts, state["question"], "", (), state.get("history", []))
        decoding = self.decoding(ctx, config.generate_max_length, ctx.prompts.stop)
        if config.estimator == "margin":
            decoding = replace(decoding, top_logprobs=max(2, decoding.top_logprobs))
        sampled = config.estimator in SAMPLE_ESTIMATORS
        if sampled:
            decoding = replace(
                decoding,
                do_sample=True,
                temperature=config.temperature,
                top_k=config.top_k,
                top_p=config.top_p,
                seed=config.seed,
            )
        with token_stream(prompt, self.name) as sink:
            traces = ctx.model.generate_trace(
                prompt,
                decoding=decoding,
                capture=CaptureOptions(logprobs=True),
                n=config.num_samples if sampled else 1,
                include_greedy=sampled,
                on_token=sink,
            )
        greedy, samples = traces[0], list(traces[1:])
        uncertainty = gate_uncertainty(config.estimator, greedy, samples)
        return {
            "draft": greedy.text,
            "draft_ended": self.answer_ended(ctx, greedy),
            "draft_tokens": list(greedy.tokens),
            "draft_logprobs": [float(x) for x in greedy.logprobs],
            "draft_entropies": [float(x) for x in greedy.entropies],
            "draft_uncertainty": float(uncertainty),
            "draft_bound": config.estimator == "entropy"
            and greedy.entropy_outside_mass is not None,
            "counts": bump(state.get("counts"), **model_call(*traces), rounds=1),
        }

    def score_need(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """Retrieve when the draft's uncertainty passes the threshold; else keep it."""
        own = _own(state)
        value = float(own.get("draft_uncertainty", math.inf))
        threshold = self.config.gate_threshold
        below = GATE_DIRECTIONS[self.config.estimator] == "below"
        retrieve = value < threshold if below else value > threshold
        note = (
            "the entropy is a lower bound from the served model's top-k log-probabilities"
            if own.get("draft_bound")
            else ""
        )
        step = state.get("step", 0) + 1
        decision = retrieval_decision(
            step, retrieve=retrieve, score=value, threshold=threshold, note=note
        )
        if not retrieve:
            update = self.accept_draft(ctx, state)
            update["finished"] = True  # the closed-book answer is the answer
            return self.without_retrieval(update, step, decision)
        return self.with_retrieval({}, step, decision, {})

    def continue_generation(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """The whole answer again, with the documents; it is the answer."""
        update = super().continue_generation(ctx, state)
        update["finished"] = True
        return update


def create_uncertainty_gate_graph(
    model: GraphModel,
    retriever: Retriever,
    *,
    config: UncertaintyGateConfig | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    retriever_options: RetrieverOptions | None = None,
    name: str | None = None,
) -> AdaptiveRAGGraph:
    """Uncertainty-gate graph: one closed-book answer, retrieval only when it is unsure.

    Runs on [`ChatTransformers`][] and on served chat models that return log-probabilities
    (the margin: the top 2 of each token; ``energy``: local models only).

    Args:
        model: [`ChatTransformers`][] or a served chat model.
        retriever: Any LangChain retriever.
        config: Gate settings (``estimator``, ``threshold``, ``num_samples``, ...).
        prompts: Prompt templates.
        checkpointer: Passed to ``compile``.
        retriever_options: Retries, time limit and failure handling of the retriever
            calls (default: [`RetrieverOptions`][]).
        name: Graph name.

    Returns:
        The compiled graph.
    """
    return build_adaptive_rag_graph(
        UncertaintyGatePolicy(config or UncertaintyGateConfig()),
        model,
        retriever,
        prompts=prompts,
        checkpointer=checkpointer,
        retriever_options=retriever_options,
        name=name,
    )
