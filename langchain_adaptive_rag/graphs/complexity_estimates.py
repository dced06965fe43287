"""Training-free classes for Adaptive-RAG's router, from the model's own uncertainty.

The paper's router is a trained T5 classifier whose weights were not released. These
classifiers ask the chat model itself: it answers the question closed-book, and how sure
it is of that answer gives the class through two thresholds
([`uncertainty_complexity`][langchain_adaptive_rag.graphs.complexity.uncertainty_complexity]):

- semantic entropy (Kuhn et al., ICLR 2023; SUGAR applies it to retrieval decisions): ``k``
  sampled answers are clustered by meaning and the entropy of the clusters is the score.
  For short answers, the answer read after "the answer is" and normalised as the
  evaluation does (lower case, no punctuation or articles) stands in for the NLI model
  that decides whether two answers entail each other: for short factoid answers two
  strings equal after normalisation mean the same answer, the case where entailment both
  ways holds trivially, and no NLI model need be loaded. Answers that say the same thing
  in other words fall in different clusters, which raises the score.
- an uncertainty gate's score (``classifier_estimator``: the margin, entropy, perplexity
  or a sample estimator; see
  [`GateEstimator`][langchain_adaptive_rag.graphs.uncertainty_gate.GateEstimator]).
"""

from __future__ import annotations

from dataclasses import replace

from langchain_adaptive_rag.evaluation.metrics import normalize_answer
from langchain_adaptive_rag.graphs.complexity import Complexity, uncertainty_complexity
from langchain_adaptive_rag.graphs.policy import bump, model_call
from langchain_adaptive_rag.graphs.uncertainty_gate import (
    GATE_DIRECTIONS,
    SAMPLE_ESTIMATORS,
    GateEstimator,
    gate_uncertainty,
)
from langchain_adaptive_rag.options import CaptureOptions, DecodingOptions, TraceModel
from langchain_adaptive_rag.prompts import QAPrompts, build_prompt, extract_answer
from langchain_adaptive_rag.signals import semantic_entropy
from langchain_adaptive_rag.state import Counts

__all__ = [
    "CLASSIFIER_SAMPLING",
    "CLASSIFIER_THRESHOLDS",
    "gate_complexity",
    "semantic_entropy_complexity",
]

CLASSIFIER_SAMPLING: dict[str, float | int] = {
    "temperature": 1.0,
    "top_k": 50,
    "top_p": 0.9,
    "seed": 0,
}
"""How the classifiers sample their answers (sample ``i`` is seeded ``seed + i``)."""

CLASSIFIER_THRESHOLDS: dict[str, tuple[float, float]] = {
    "semantic_entropy": (0.6, 1.0),
    "margin": (3.0, 1.0),
    "entropy": (0.5, 1.5),
    "perplexity": (1.5, 3.0),
}
"""``(τ_A, τ_C)`` when ``classifier_thresholds`` is ``None``. Semantic entropy over 5
answers: A when at least 4 agree (4-1: 0.50 nats), B for a 3-2 (0.67) or 3-1-1 split
(0.95), C from a 2-2-1 split (1.05) on; the others are starting points on each score's
scale, not tuned for a model: calibrate them."""


def _closed_book(
    model: TraceModel, prompts: QAPrompts, question: str, budget: int
) -> tuple[str, DecodingOptions]:
    base = model.decoding
    decoding = replace(
        base,
        max_new_tokens=budget,
        min_new_tokens=min(base.min_new_tokens, budget),
        stop=tuple(prompts.stop),
    )
    return build_prompt(prompts, question), decoding


def _sampling(decoding: DecodingOptions) -> DecodingOptions:
    return replace(
        decoding,
        do_sample=True,
        temperature=float(CLASSIFIER_SAMPLING["temperature"]),
        top_k=int(CLASSIFIER_SAMPLING["top_k"]),
        top_p=float(CLASSIFIER_SAMPLING["top_p"]),
        seed=int(CLASSIFIER_SAMPLING["seed"]),
    )


def semantic_entropy_complexity(
    model: TraceModel,
    prompts: QAPrompts,
    question: str,
    *,
    samples: int,
    thresholds: tuple[float, float],
    budget: int,
) -> tuple[Complexity, Counts, str]:
    """The class from the semantic entropy of ``samples`` closed-book answers.

    Args:
        model: The chat model.
        prompts: The QA prompts the answers are sampled with.
        question: The question.
        samples: ``k`` answers sampled.
        thresholds: ``(τ_A, τ_C)`` on the entropy (nats).
        budget: Tokens of each answer.

    Returns:
        The class, the ``k`` calls' counts, and a note with the score.
    """
    prompt, decoding = _closed_book(model, prompts, question, budget)
    traces = model.generate_trace(prompt, decoding=_sampling(decoding), n=samples)
    answers = [
        extract_answer(t.text, prompts.answer_marker, prompts.answer_kind) or t.text.strip()
        for t in traces
    ]
    keys = [normalize_answer(answer) for answer in answers]
    score = semantic_entropy(keys)
    label = uncertainty_complexity(score, thresholds, "above")
    clusters = len(set(keys))
    note = (
        f"semantic entropy {score:.3g} nats over {len(keys)} sampled answers "
        f"({clusters} cluster{'' if clusters == 1 else 's'})"
    )
    return label, bump(None, **model_call(*traces)), note


def gate_complexity(
    model: TraceModel,
    prompts: QAPrompts,
    question: str,
    *,
    estimator: GateEstimator,
    samples: int,
    thresholds: tuple[float, float],
    budget: int,
) -> tuple[Complexity, Counts, str]:
    """The class from an uncertainty gate's score of the closed-book answer.

    Args:
        model: The chat model.
        prompts: The QA prompts.
        question: The question.
        estimator: The gate's estimator.
        samples: Sampled answers for a sample estimator.
        thresholds: ``(τ_A, τ_C)`` on the estimator's scale, read in its direction.
        budget: Tokens of each answer.

    Returns:
        The class, the calls' counts, and a note with the score.
    """
    prompt, decoding = _closed_book(model, prompts, question, budget)
    if estimator == "margin":
        decoding = replace(decoding, top_logprobs=max(2, decoding.top_logprobs))
    sampled = estimator in SAMPLE_ESTIMATORS
    traces = model.generate_trace(
        prompt,
        decoding=_sampling(decoding) if sampled else decoding,
        capture=CaptureOptions(logprobs=True),
        n=samples if sampled else 1,
        include_greedy=sampled,
    )
    score = gate_uncertainty(estimator, traces[0], list(traces[1:]))
    label = uncertainty_complexity(score, thresholds, GATE_DIRECTIONS[estimator])
    note = f"{estimator} {score:.3g} of the closed-book answer"
    return label, bump(None, **model_call(*traces)), note
