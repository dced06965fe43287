"""Every method on toy questions: answers, efficiency and a readable DRAGIN trace.

This is the main job of the package's demo: the same model, retriever and questions go
through each method's graph, and the comparison table shows what adaptive retrieval buys
(answers to questions whose facts the model never saw) and what it costs (retrievals,
LLM calls, generated tokens, seconds).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from langchain_core.retrievers import BaseRetriever

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation.metrics import exact_match, f1_score
from langchain_adaptive_rag.graphs import (
    AVAILABLE_METHODS,
    Method,
    config_class,
    create_adaptive_rag_graph,
    display_name,
    policy_class,
)
from langchain_adaptive_rag.graphs.adaptive_rag import AdaptiveRAGConfig
from langchain_adaptive_rag.graphs.dragin import DRAGINConfig
from langchain_adaptive_rag.graphs.etc import ETCConfig
from langchain_adaptive_rag.graphs.fixed import FixLengthConfig, FixSentenceConfig
from langchain_adaptive_rag.graphs.flare import FLAREConfig
from langchain_adaptive_rag.graphs.ircot import IRCoTConfig
from langchain_adaptive_rag.graphs.policy import MethodConfig
from langchain_adaptive_rag.graphs.seakr import SeaKRConfig
from langchain_adaptive_rag.graphs.search_agent import SearchAgentConfig
from langchain_adaptive_rag.graphs.search_tool_calls import SearchToolCalls
from langchain_adaptive_rag.graphs.ta_are import TAAREConfig
from langchain_adaptive_rag.graphs.tool_agent import ToolAgentConfig
from langchain_adaptive_rag.graphs.uncertainty_gate import UncertaintyGateConfig
from langchain_adaptive_rag.options import TraceModel
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.state import RetrievalEvent
from langchain_adaptive_rag.toyworld.prompts import TOY_PROMPTS, TOY_SEARCH_PROTOCOL
from langchain_adaptive_rag.toyworld.questions import ToyQuestion

__all__ = [
    "TOY_CONFIGS",
    "TOY_METHODS",
    "TOY_SEARCH_BUDGET",
    "MethodSummary",
    "QuestionResult",
    "demo_questions",
    "format_comparison",
    "format_trace",
    "run_comparison",
    "run_method",
    "summarize",
    "toy_config",
]

_TRAINED_INTO_THE_TOY_MODEL = ("search_agent", "tool_agent")
"""Methods that need a trained model and that the toy model was trained for: its training
mix holds search traces in ``TOY_SEARCH_PROTOCOL`` (``toyworld_training --search-traces``),
which the tool agent reads as tool calls (``SearchToolCalls``)."""

TOY_METHODS: tuple[str, ...] = tuple(
    method
    for method in AVAILABLE_METHODS
    if policy_class(method).trained_model is None or method in _TRAINED_INTO_THE_TOY_MODEL
)
"""The methods the toy model runs: those any causal LM runs, and the search agent and the
tool agent, whose protocol (as text, or as tool calls) the toy model was trained on.
Self-RAG needs a model trained with its reflection tokens."""

TOY_SEARCH_BUDGET = 128
"""The search agent's token budget on the toy world: its turns take at most 48 tokens
each (``TOY_SEARCH_PROTOCOL.turn_max_tokens``), and a trace of two searches and the answer
takes about 100."""

TOY_CONFIGS: dict[str, MethodConfig] = {
    "no_retrieval": MethodConfig(generate_max_length=48),
    "single_round": MethodConfig(generate_max_length=48),
    "fix_length": FixLengthConfig(generate_max_length=48, fix_length=8),
    "fix_sentence": FixSentenceConfig(generate_max_length=48),
    "ircot": IRCoTConfig(generate_max_length=48, retrieve_topk=3, max_paragraphs=6),
    "adaptive_rag": AdaptiveRAGConfig(generate_max_length=48, retrieve_topk=3, max_paragraphs=6),
    "flare": FLAREConfig(generate_max_length=48, theta=0.95, beta=0.4),
    "dragin": DRAGINConfig(generate_max_length=48, theta=0.5, query_top_n=6, mode="paper"),
    "seakr": SeaKRConfig(
        generate_max_length=48,
        num_samples=8,
        hidden_layer=1,
        delta=-4.0,
        rerank_margin=0.3,
        mode="paper",
    ),
    "etc": ETCConfig(generate_max_length=48, theta=0.3, query_top_n=6),
    "uncertainty_gate": UncertaintyGateConfig(generate_max_length=48, threshold=11.5),
    "vanilla": TAAREConfig(generate_max_length=48, answer_prompt="qa"),
    "ta_are": TAAREConfig(generate_max_length=48, today="November 21, 2026", answer_prompt="qa"),
    "search_agent": SearchAgentConfig(
        generate_max_length=TOY_SEARCH_BUDGET, protocol=TOY_SEARCH_PROTOCOL
    ),
    # the same turns as calls of the search tool: 48 tokens a call, the protocol's limits
    "tool_agent": ToolAgentConfig(
        generate_max_length=TOY_SEARCH_PROTOCOL.turn_max_tokens,
        tool_format=SearchToolCalls(TOY_SEARCH_PROTOCOL),
        max_searches=TOY_SEARCH_PROTOCOL.max_searches or 4,
        max_rounds=TOY_SEARCH_PROTOCOL.max_turns or 5,
    ),
}
"""Each method's configuration for the toy model: the answer budget fits the toy answers
(at most about 40 tokens), FL-RAG retrieves every 8 tokens (a toy sentence is about that
long), and the thresholds (FLARE ``theta``, DRAGIN ``theta``, SeaKR ``delta``, ETC
``theta``, the margin gate's ``threshold``) are the values ``benchmarks/toy_methods.py``
chooses on the dev questions for the shipped model (best F1, ties to fewer retrievals;
the toy model's top-two margins lie between 11 and 13 nats, and the gate's 11.5 retrieves
for about three questions in four).
ETC's query keeps 6 words, as DRAGIN's.
Vanilla and TA-ARE answer with the QA prompt the toy model was trained on
(``answer_prompt="qa"``; their decision prompt is the paper's).
The search agent follows the protocol of the toy model's search traces
(``TOY_SEARCH_PROTOCOL``: Search-R1's tags, 48 tokens a turn) within ``TOY_SEARCH_BUDGET``;
the tool agent runs ``create_agent`` on the same turns, read as calls of its search tool
(``SearchToolCalls``), within the protocol's limits (4 searches, 5 model calls).
DRAGIN runs the paper reading (``mode="paper"``): its ``theta`` was calibrated under it
(in reference mode stop words may trigger too; not recalibrated).
SeaKR's ``rerank_margin`` (0.3) is the smallest margin of best dev EM in
``benchmarks/toy_seakr_rerank.py`` on the model before its search traces (on the shipped
model it ties with the best, 0.2): the toy model's confident candidates all sit at the
``U`` floor (about -4.8 for ``k = 8``), where they differ by 0.01-0.1. With it, every
``delta`` from -8 (below the floor: a retrieval at every step) to -4 (a step retrieves
when its ``U`` is above the floor) ties on dev, and the rule takes -4, which retrieves
half as often. SeaKR runs the paper reading too
(``mode="paper"``, ``U`` in float64), under which ``delta`` and the margin were calibrated:
at that floor the reference code's float32 ``U`` is decided by the last bits of the
hidden states, which batching moves (by about 1e-5), so the same question would re-rank
differently alone and in a batch (``--concurrency``)."""


TOY_ANSWER_TOKENS = 48
"""The answer budget on the toy world (the toy answers take at most about 40 tokens)."""


def toy_config(method: str) -> MethodConfig:
    """A method's configuration on the toy world.

    Its [`TOY_CONFIGS`][] entry, else its defaults with the toy answer budget
    (``generate_max_length=48``).

    Args:
        method: One of [`TOY_METHODS`][].

    Returns:
        The configuration the demo, the comparisons and the LangGraph server run.

    Raises:
        AdaptiveRAGError: The method is unknown.
    """
    if method in TOY_CONFIGS:
        return TOY_CONFIGS[method]
    return config_class(method)(generate_max_length=TOY_ANSWER_TOKENS)


@dataclass(frozen=True)
class QuestionResult:
    """One method's outcome on one question."""

    method: str
    question_id: str
    category: str
    question_type: str
    answer: str
    gold: str
    em: float
    f1: float
    retrievals: int
    llm_calls: int
    generated_tokens: int
    seconds: float
    text: str
    events: tuple[RetrievalEvent, ...] = field(default=())


@dataclass(frozen=True)
class MethodSummary:
    """Means over the questions a method answered."""

    method: str
    questions: int
    em: float
    f1: float
    retrievals: float
    llm_calls: float
    generated_tokens: float
    seconds: float


def demo_questions(questions: Sequence[ToyQuestion], per_category: int = 4) -> list[ToyQuestion]:
    """A small balanced subset: ``per_category`` questions of each category, types mixed.

    Args:
        questions: The evaluation questions (in their fixed order).
        per_category: Questions per category.

    Returns:
        The subset, in the original order.
    """
    chosen: list[ToyQuestion] = []
    for category in ("known", "known_first_unknown_second", "unknown"):
        pool = [q for q in questions if q.category == category]
        by_type: dict[str, list[ToyQuestion]] = {}
        for q in pool:
            by_type.setdefault(q.type, []).append(q)
        picked: list[ToyQuestion] = []
        while len(picked) < per_category and any(by_type.values()):
            for items in by_type.values():
                if items and len(picked) < per_category:
                    picked.append(items.pop(0))
        chosen.extend(picked)
    order = {q.id: i for i, q in enumerate(questions)}
    return sorted(chosen, key=lambda q: order[q.id])


def run_method(
    model: TraceModel,
    retriever: BaseRetriever,
    method: Method,
    questions: Sequence[ToyQuestion],
    *,
    config: MethodConfig | None = None,
    prompts: QAPrompts = TOY_PROMPTS,
    on_result: Callable[[QuestionResult], None] | None = None,
    concurrency: int = 1,
) -> list[QuestionResult]:
    """Answer every question with one method's graph.

    Args:
        model: The model (the toy model for the toy world).
        retriever: The retriever (the toy corpus for the toy world).
        method: The method name.
        questions: The questions.
        config: The method's config (default: [`TOY_CONFIGS`][]).
        prompts: Prompt templates.
        on_result: Called with each result as soon as it is ready (in question order).
        concurrency: Questions answered at once, in threads; with a model that batches
            concurrent calls (``ChatTransformers(batch_concurrent_calls=True)``) their
            generations decode together. Each result's ``seconds`` is then its own wall
            time among the others'.

    Returns:
        One result per question, in order.
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        msg = (
            f"run_method received concurrency={concurrency!r}; expected a whole number of "
            "questions at once, 1 or more. Fix: pass concurrency=1 to answer them one by one."
        )
        raise AdaptiveRAGError(msg)
    chosen = config if config is not None else toy_config(method)
    graph = create_adaptive_rag_graph(model, retriever, method, config=chosen, prompts=prompts)

    def run_one(question: ToyQuestion) -> tuple[dict[str, Any], float]:
        start = time.perf_counter()
        state: dict[str, Any] = graph.invoke({"question": question.question})
        return state, time.perf_counter() - start

    results: list[QuestionResult] = []
    with ThreadPoolExecutor(concurrency, thread_name_prefix="toy-comparison") as pool:
        # questions at once, their calls sharing the batched decoding loop; results are
        # taken in question order as soon as each is ready
        answered = pool.map(run_one, questions) if concurrency > 1 else map(run_one, questions)
        for question, (state, seconds) in zip(questions, answered, strict=True):
            results.append(_result(method, question, state, seconds))
            if on_result is not None:
                on_result(results[-1])
    return results


def _result(
    method: str, question: ToyQuestion, state: dict[str, Any], seconds: float
) -> QuestionResult:
    """One question's result from the graph's final state."""
    counts = state["counts"]
    answer = str(state.get("answer") or "")
    return QuestionResult(
        method=method,
        question_id=question.id,
        category=question.category,
        question_type=question.type,
        answer=answer,
        gold=question.answer,
        em=exact_match(answer, question.answer),
        f1=f1_score(answer, question.answer),
        retrievals=int(counts["retrievals"]),
        llm_calls=int(counts["llm_calls"]),
        generated_tokens=int(counts["generated_tokens"]),
        seconds=seconds,
        text=str(state.get("text", "")),
        events=tuple(state.get("retrievals", [])),
    )


def run_comparison(
    model: TraceModel,
    retriever: BaseRetriever,
    questions: Sequence[ToyQuestion],
    *,
    methods: Sequence[Method] | None = None,
    configs: Mapping[str, MethodConfig] | None = None,
    prompts: QAPrompts = TOY_PROMPTS,
    concurrency: int = 1,
) -> dict[str, list[QuestionResult]]:
    """Answer the questions with every method.

    Args:
        model: The model.
        retriever: The retriever.
        questions: The questions.
        methods: Methods to run (default: [`TOY_METHODS`][]).
        configs: Per-method configs (default: [`TOY_CONFIGS`][]).
        prompts: Prompt templates.
        concurrency: Questions answered at once per method (see [`run_method`][]).

    Returns:
        Results by method name, in the order run.
    """
    chosen = configs if configs is not None else {m: toy_config(m) for m in TOY_METHODS}
    names: Sequence[Method] = methods if methods is not None else TOY_METHODS
    return {
        name: run_method(
            model,
            retriever,
            name,
            questions,
            config=chosen.get(name),
            prompts=prompts,
            concurrency=concurrency,
        )
        for name in names
    }


def summarize(results: Sequence[QuestionResult], category: str | None = None) -> MethodSummary:
    """Means over one method's results (optionally one question category).

    Args:
        results: One method's results.
        category: Keep only this category (``known``, ``known_first_unknown_second``,
            ``unknown``).

    Returns:
        The summary (zeros when no result is left).
    """
    kept = [r for r in results if category is None or r.category == category]
    n = len(kept)

    def mean(values: Sequence[float]) -> float:
        return sum(values) / n if n else 0.0

    return MethodSummary(
        method=results[0].method if results else "",
        questions=n,
        em=mean([r.em for r in kept]),
        f1=mean([r.f1 for r in kept]),
        retrievals=mean([r.retrievals for r in kept]),
        llm_calls=mean([r.llm_calls for r in kept]),
        generated_tokens=mean([r.generated_tokens for r in kept]),
        seconds=mean([r.seconds for r in kept]),
    )


def format_comparison(
    results: Mapping[str, Sequence[QuestionResult]],
    wall_seconds: Mapping[str, float] | None = None,
) -> str:
    """A markdown table: EM and F1 overall and per category, then the costs.

    Args:
        results: Results by method.
        wall_seconds: Each method's wall time for all its questions. When given, ``s/q``
            is that time over the questions (the throughput of a run answering several
            questions at once); otherwise the mean of the questions' own times.

    Returns:
        The table.
    """
    header = (
        "| method | EM | F1 | EM known | EM known-then-unknown | EM unknown "
        "| retrievals/q | LLM calls/q | tokens/q | s/q |"
    )
    lines = [header, "|" + "---|" * 10]
    for name, items in results.items():
        overall = summarize(items)
        per = [summarize(items, c).em for c in ("known", "known_first_unknown_second", "unknown")]
        seconds = overall.seconds
        if wall_seconds is not None and name in wall_seconds and items:
            seconds = wall_seconds[name] / len(items)
        lines.append(
            f"| {display_name(name)} | {overall.em:.2f} | {overall.f1:.2f} | {per[0]:.2f} "
            f"| {per[1]:.2f} | {per[2]:.2f} | {overall.retrievals:.2f} | {overall.llm_calls:.1f} "
            f"| {overall.generated_tokens:.0f} | {seconds:.2f} |"
        )
    return "\n".join(lines)


def format_trace(question: ToyQuestion, result: QuestionResult) -> str:
    """A readable account of one run: text, each retrieval's trigger, query and passages.

    Args:
        question: The question.
        result: A method's result on it.

    Returns:
        Several lines of text.
    """
    lines = [
        f"Question: {question.question}  [{question.category}, {question.type}]",
        f"Gold: {question.gold_text}",
        f"Generated: {result.text.strip()}",
    ]
    if not result.events:
        lines.append("No retrieval: the model answered from memory.")
    for event in result.events:
        score, threshold = event["score"], event["threshold"]
        why = (
            f"score {score:.2f} > threshold {threshold:.2f}"
            if isinstance(score, float) and isinstance(threshold, float)
            else "scheduled"
        )
        lines.append(
            f"Retrieval at step {event['step']}: fired on {event['trigger_word']!r} ({why})"
        )
        lines.append(f"  query: {event['query']!r}")
        kept = event["rerank_order"]
        for rank, (doc_id, text) in enumerate(
            zip(event["doc_ids"], event["doc_texts"], strict=True)
        ):
            mark = "*" if kept is not None and rank in kept else " "
            lines.append(f"  {mark}[{doc_id}] {text}")
        if event["note"]:
            lines.append(f"  note: {event['note']}")
    verdict = "correct" if result.em == 1.0 else f"wrong (gold {result.gold!r})"
    lines.append(f"Answer: {result.answer!r}: {verdict}")
    return "\n".join(lines)
