"""Adaptive-RAG: route each question by its complexity (Jeong et al., NAACL 2024).

Algorithm (the paper's section 3):

1. classify the question's complexity: ``A`` simple, ``B`` moderate, ``C`` complex;
2. ``A``: answer without retrieval (wo-RAG);
   ``B``: retrieve once with the question, then answer (single-step: SR-RAG);
   ``C``: interleave retrieval with reasoning (multi-step: IRCoT);
3. the route's answer is the answer; the run's counts are the route's plus the
   classifier's model call.

The paper trains a small classifier (T5) on labels from the methods' outcomes. The
classifiers here need no training: ``"rule"`` (default) reads the question's form
([`rule_complexity`][]: single-hop ``B`` or multi-hop ``C``), ``"llm"`` asks the chat model
([`complexity_prompt`][]), ``"semantic_entropy"`` and ``"gate"`` read the model's own
uncertainty about its closed-book answer
([`complexity_estimates`][langchain_adaptive_rag.graphs.complexity_estimates]); a trained
one of your own is any callable or Runnable from the question to ``"A"``, ``"B"`` or
``"C"``.

In graph terms: a ``classify`` node, then the three routes as subgraphs (the compiled
wo-RAG, SR-RAG and IRCoT graphs; ``get_graph(xray=True)`` draws them nested), then
``tally``. ``classify`` streams a ``"complexity"`` event; the routes' own ``"decision"``
and ``"retrieval"`` events come with ``stream(..., subgraphs=True)``, as LangGraph streams
any subgraph's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.types import Checkpointer, Overwrite
from typing_extensions import NotRequired

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs._builder import (
    AdaptiveRAGGraph,
    build_adaptive_rag_graph,
    graph_node,
)
from langchain_adaptive_rag.graphs._nodes import run_usage, start_of_run
from langchain_adaptive_rag.graphs.call_config import call_overrides, context_schema
from langchain_adaptive_rag.graphs.complexity import (
    Complexity,
    complexity_prompt,
    read_complexity,
    rule_complexity,
)
from langchain_adaptive_rag.graphs.complexity_estimates import (
    CLASSIFIER_THRESHOLDS,
    gate_complexity,
    semantic_entropy_complexity,
)
from langchain_adaptive_rag.graphs.fixed import NoRetrievalPolicy, SingleRoundPolicy
from langchain_adaptive_rag.graphs.ircot import IRCoTConfig, IRCoTPolicy, IRCoTReader
from langchain_adaptive_rag.graphs.ircot_official import (
    collect_paragraphs,
    without_question_words,
)
from langchain_adaptive_rag.graphs.policy import (
    TOKENS_CAP,
    CountRange,
    GraphModel,
    MethodConfig,
    MethodFacts,
    Policy,
    RunContext,
    TraceModel,
    bump,
    model_call,
)
from langchain_adaptive_rag.graphs.uncertainty_gate import GATE_DIRECTIONS, GateEstimator
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.retrieving import Retriever, RetrieverOptions
from langchain_adaptive_rag.served.model import as_trace_model
from langchain_adaptive_rag.state import (
    AdaptiveRAGInput,
    AdaptiveRAGOutput,
    AdaptiveRAGState,
    Counts,
)

__all__ = [
    "OFFICIAL_READER",
    "OFFICIAL_ROUTE_TOPK",
    "OFFICIAL_STEP_MAX_TOKENS",
    "ROUTES",
    "AdaptiveRAGConfig",
    "AdaptiveRAGRouter",
    "AdaptiveRAGRouterOutput",
    "AdaptiveRAGRouterState",
    "ComplexityClassifier",
    "SingleStepConfig",
    "SingleStepPolicy",
    "create_adaptive_rag_router_graph",
]

ComplexityClassifier = Callable[[str], Any] | Runnable[str, Any]
"""A classifier of your own: from the question to ``"A"``, ``"B"`` or ``"C"`` (a string,
or a message whose text is one)."""

ROUTES: dict[Complexity, str] = {"A": "no_retrieval", "B": "single_round", "C": "ircot"}
"""The method each class runs: no retrieval, single-step, multi-step."""


OFFICIAL_ROUTE_TOPK: dict[str, tuple[int, int]] = {"flan_t5": (15, 6), "gpt": (6, 3)}
"""Paragraphs of the single-step and of each multi-step retrieval in the official
Adaptive-RAG runs, by model family."""

OFFICIAL_READER: dict[str, IRCoTReader] = {"flan_t5": "direct", "gpt": "cot"}
"""The multi-step route's reader in the official Adaptive-RAG configs (``rc_qa_type``)."""

OFFICIAL_STEP_MAX_TOKENS: dict[str, int] = {"flan_t5": 200, "gpt": 300}
"""Tokens a generation call may take in the official configs (FLAN-T5's ``max_length``,
the GPT generator's ``max_tokens``)."""


@dataclass(frozen=True)
class SingleStepConfig(MethodConfig):
    """The single-step route's settings: SR-RAG's, with the official retriever's rules."""

    max_paragraphs: int = 15
    """Paragraphs kept at most (the official ``global_max_num_paras``)."""
    mode: Literal["reference", "paper"] = "reference"
    """``reference``: the query is the question without wh-words and "is"/"does", and
    long or near-repeated paragraphs are skipped, as the official retriever
    ([`ircot_official`][langchain_adaptive_rag.graphs.ircot_official]); ``paper``: the
    question as asked and every paragraph the retriever returns (SR-RAG)."""


class SingleStepPolicy(SingleRoundPolicy):
    """Adaptive-RAG's single-step route: one retrieval with the question, then the answer."""

    config_class = SingleStepConfig
    config: SingleStepConfig

    def formulate_query(self, ctx: RunContext, state: AdaptiveRAGState) -> str:
        """The question; in reference mode without its wh-words."""
        question = super().formulate_query(ctx, state)
        return without_question_words(question) if self.config.mode == "reference" else question

    def rerank(self, ctx: RunContext, state: AdaptiveRAGState) -> dict[str, object]:
        """In reference mode, the paragraphs the official retriever keeps; else all."""
        if self.config.mode == "paper":
            return super().rerank(ctx, state)
        kept, added = collect_paragraphs([], state.get("docs", []), self.config.max_paragraphs)
        return {"docs": kept, "rerank_order": added}


@dataclass(frozen=True)
class AdaptiveRAGConfig(MethodConfig):
    """Adaptive-RAG settings: the classifier, and the routes' shared and IRCoT settings.

    The shared fields (``generate_max_length``, ``retrieve_topk``, ...) hold for every
    route; ``max_steps``, ``max_paragraphs`` and ``reader`` are the multi-step route's
    ([`IRCoTConfig`][]).
    """

    count_ranges: ClassVar[dict[str, CountRange]] = {
        "classifier_max_tokens": (1, TOKENS_CAP, "tokens, more than any model's context"),
        "classifier_samples": (2, 256, "sampled answers, decoded in one call"),
        "max_steps": (1, 1000, "reasoning steps, each one LLM call"),
        "max_paragraphs": (1, 1000, "paragraphs, more than any prompt holds"),
        "single_step_topk": (1, 1000, "passages, more than any prompt holds"),
        "multi_step_topk": (1, 1000, "passages, more than any prompt holds"),
        "step_max_tokens": (1, TOKENS_CAP, "tokens, more than any model's context"),
    }
    token_budgets: ClassVar[tuple[str, ...]] = ("classifier_max_tokens", "step_max_tokens")

    classifier: Literal["rule", "llm", "semantic_entropy", "gate"] = "rule"
    """The built-in classifier: ``"rule"`` ([`rule_complexity`][]; never ``A``),
    ``"llm"`` (the chat model answers [`complexity_prompt`][]), or one from the model's
    uncertainty about its closed-book answer and ``classifier_thresholds``:
    ``"semantic_entropy"`` over ``classifier_samples`` sampled answers, or ``"gate"``, an
    uncertainty gate's ``classifier_estimator`` (see
    [`complexity_estimates`][langchain_adaptive_rag.graphs.complexity_estimates]). A
    classifier passed to [`create_adaptive_rag_router_graph`][] takes its place."""
    classifier_max_tokens: int = 4
    """Tokens the ``"llm"`` classifier generates (its reply is one letter)."""
    classifier_samples: int = 5
    """Answers the ``"semantic_entropy"`` classifier samples (``k``), and a sample
    estimator's samples for ``"gate"``."""
    classifier_estimator: GateEstimator = "margin"
    """The ``"gate"`` classifier's estimator ([`GateEstimator`][])."""
    classifier_thresholds: tuple[float, float] | None = None
    """``(τ_A, τ_C)`` of the uncertainty classifiers: sure answers up to ``τ_A`` are A,
    unsure ones past ``τ_C`` are C (for the margin, where more is surer: A from ``τ_A``
    up, C below ``τ_C``); ``None``: [`CLASSIFIER_THRESHOLDS`][]."""
    max_steps: int | None = None
    """The multi-step route's reasoning steps at most (IRCoT's limit; ``None``: 10 in
    reference mode, 8 in paper mode)."""
    max_paragraphs: int = 15
    """The multi-step route's paragraphs collected at most (IRCoT's cap)."""
    reader: IRCoTReader = "cot"
    """The multi-step route's answer step (see [`IRCoTReader`][])."""
    single_step_topk: int | None = None
    """Paragraphs the single-step route (B) retrieves; ``None``: ``retrieve_topk``. The
    official runs read 15 with FLAN-T5 and 6 with GPT (``official_setup``)."""
    multi_step_topk: int | None = None
    """Paragraphs each multi-step (C) retrieval returns; ``None``: ``retrieve_topk``.
    The official runs read 6 with FLAN-T5 and 3 with GPT (``official_setup``)."""
    step_max_tokens: int = 300
    """Tokens each multi-step generation may take in reference mode (IRCoT's
    ``step_max_tokens``; ``official_setup`` sets the family's)."""
    spacy_model: str | None = "en_core_web_sm"
    """The spaCy pipeline of the multi-step route's sentences (IRCoT's)."""
    mode: Literal["reference", "paper"] = "reference"
    """``reference``: both retrieving routes follow the official code (IRCoT's
    reference mode on the multi-step route; the question without wh-words and the
    official paragraph filters on the single-step route); ``paper``: as the paper reads."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.classifier_samples < 2:
            msg = (
                f"AdaptiveRAGConfig.classifier_samples must be >= 2, got {self.classifier_samples}."
            )
            raise AdaptiveRAGError(msg)
        if self.classifier in ("semantic_entropy", "gate"):
            to_a, to_c = self.uncertainty_thresholds
            surer_above = (
                self.classifier == "gate" and GATE_DIRECTIONS[self.classifier_estimator] == "below"
            )
            if (to_a < to_c) if surer_above else (to_a > to_c):
                order = "τ_A >= τ_C" if surer_above else "τ_A <= τ_C"
                msg = (
                    f"AdaptiveRAGConfig.classifier_thresholds={self.classifier_thresholds} are "
                    f"out of order for classifier={self.classifier!r}: expected {order}."
                )
                raise AdaptiveRAGError(msg)
        for name in ("classifier_max_tokens", "max_steps", "max_paragraphs", "step_max_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                msg = f"AdaptiveRAGConfig.{name} must be >= 1, got {value}."
                raise AdaptiveRAGError(msg)
        for name in ("single_step_topk", "multi_step_topk"):
            value = getattr(self, name)
            if value is not None and value < 1:
                msg = f"AdaptiveRAGConfig.{name} must be >= 1 or None, got {value}."
                raise AdaptiveRAGError(msg)

    @property
    def uncertainty_thresholds(self) -> tuple[float, float]:
        """``(τ_A, τ_C)`` of the uncertainty classifiers (given, or the defaults).

        Raises:
            AdaptiveRAGError: The ``"gate"`` classifier's estimator has no default and
                none were given.
        """
        if self.classifier_thresholds is not None:
            return self.classifier_thresholds
        key = self.classifier_estimator if self.classifier == "gate" else "semantic_entropy"
        if key not in CLASSIFIER_THRESHOLDS:
            msg = (
                f"AdaptiveRAGConfig(classifier='gate', classifier_estimator={key!r}) has no "
                f"default thresholds (defaults exist for {sorted(CLASSIFIER_THRESHOLDS)}). "
                "Fix: classifier_thresholds=(tau_a, tau_c) on that estimator's scale."
            )
            raise AdaptiveRAGError(msg)
        return CLASSIFIER_THRESHOLDS[key]

    @classmethod
    def official_setup(cls, setup: Literal["flan_t5", "gpt"]) -> AdaptiveRAGConfig:
        """The official runs' setup: paragraphs per route, reader and generation budget.

        FLAN-T5: 15 and 6 paragraphs, the direct reader, 200 tokens a call; GPT: 6 and 3,
        the chain-of-thought reader, 300 tokens.

        Args:
            setup: ``"flan_t5"`` or ``"gpt"``, the two model families of the paper.

        Returns:
            A config with ``single_step_topk``, ``multi_step_topk``, ``reader`` and
            ``step_max_tokens`` set (change any other field with ``dataclasses.replace``).

        Raises:
            AdaptiveRAGError: An unknown setup.
        """
        if setup not in OFFICIAL_ROUTE_TOPK:
            msg = (
                f"AdaptiveRAGConfig.official_setup received setup={setup!r}. Expected one of "
                f"{sorted(OFFICIAL_ROUTE_TOPK)}."
            )
            raise AdaptiveRAGError(msg)
        single, multi = OFFICIAL_ROUTE_TOPK[setup]
        return cls(
            single_step_topk=single,
            multi_step_topk=multi,
            reader=OFFICIAL_READER[setup],
            step_max_tokens=OFFICIAL_STEP_MAX_TOKENS[setup],
        )

    def route_config(self, complexity: Complexity) -> MethodConfig:
        """The config of the method that answers questions of class ``complexity``."""
        shared = {item.name: getattr(self, item.name) for item in dataclasses.fields(MethodConfig)}
        if complexity == "C":
            shared["retrieve_topk"] = self.multi_step_topk or self.retrieve_topk
            return IRCoTConfig(
                **shared,
                max_steps=self.max_steps,
                max_paragraphs=self.max_paragraphs,
                reader=self.reader,
                mode=self.mode,
                step_max_tokens=self.step_max_tokens,
                spacy_model=self.spacy_model,
            )
        if complexity == "B":
            shared["retrieve_topk"] = self.single_step_topk or self.retrieve_topk
            return SingleStepConfig(**shared, max_paragraphs=self.max_paragraphs, mode=self.mode)
        return MethodConfig(**shared)


class AdaptiveRAGRouterOutput(AdaptiveRAGOutput):
    """What an Adaptive-RAG graph returns: the route's output and the class."""

    complexity: Complexity
    """The question's class: ``A`` (no retrieval), ``B`` (single-step), ``C``
    (multi-step)."""


class AdaptiveRAGRouterState(AdaptiveRAGInput, AdaptiveRAGRouterOutput):
    """The router's channels: input, output and the classifier's counts."""

    classifier_counts: NotRequired[Counts]
    """The classifier's model calls and tokens, added to the route's counts by ``tally``."""


class AdaptiveRAGRouter(MethodFacts):
    """Adaptive-RAG's classifier and routes: what ``classify`` and ``tally`` do."""

    name = "adaptive_rag"
    display_name = "Adaptive-RAG"
    config_class = AdaptiveRAGConfig
    colour = "#637939"

    def __init__(
        self,
        config: AdaptiveRAGConfig,
        model: TraceModel,
        classifier: ComplexityClassifier | None = None,
        prompts: QAPrompts | None = None,
    ) -> None:
        """Keep the settings, the model the classifiers ask, and your classifier.

        Args:
            config: The build-time settings.
            model: The chat model.
            classifier: A classifier of your own, used instead of ``config.classifier``.
            prompts: The QA prompts the uncertainty classifiers answer with.

        Raises:
            AdaptiveRAGError: ``classifier`` is neither callable nor a Runnable.
        """
        if classifier is not None and not (
            isinstance(classifier, Runnable) or callable(classifier)
        ):
            msg = (
                f"classifier must be a callable or a Runnable from the question to 'A', 'B' "
                f"or 'C', got {type(classifier).__name__}. Fix: classifier=lambda q: 'C', or "
                "leave it out for AdaptiveRAGConfig.classifier ('rule' or 'llm')."
            )
            raise AdaptiveRAGError(msg)
        self.config = config
        self.model = model
        self.classifier = classifier
        self.prompts = prompts or QAPrompts()

    @classmethod
    def create_graph(
        cls,
        model: GraphModel,
        retriever: Retriever,
        *,
        config: MethodConfig,
        prompts: QAPrompts | None = None,
        checkpointer: Checkpointer = None,
        retriever_options: RetrieverOptions | None = None,
        name: str | None = None,
    ) -> AdaptiveRAGGraph:
        """The router's graph by name (``create_adaptive_rag_graph(..., "adaptive_rag")``).

        Raises:
            AdaptiveRAGError: ``config`` is not an [`AdaptiveRAGConfig`][].
        """
        if not isinstance(config, AdaptiveRAGConfig):
            msg = f"adaptive_rag takes an AdaptiveRAGConfig, got {type(config).__name__}."
            raise AdaptiveRAGError(msg)
        return create_adaptive_rag_router_graph(
            model,
            retriever,
            config=config,
            prompts=prompts,
            checkpointer=checkpointer,
            retriever_options=retriever_options,
            name=name,
        )

    def classify(self, question: str, config: AdaptiveRAGConfig) -> tuple[Complexity, Counts, str]:
        """The question's class, the classifier's counts, and a note.

        Args:
            question: The question.
            config: This run's settings.

        Returns:
            The class, the model calls and tokens the classifier spent (the ``"llm"``
            classifier's one call; none for the rule or a classifier of your own), and
            ``""`` or what the run should know (a reply without a class).

        Raises:
            AdaptiveRAGError: A classifier of your own returned something other than a
                class.
        """
        if self.classifier is not None:
            found = (
                self.classifier.invoke(question)
                if isinstance(self.classifier, Runnable)
                else self.classifier(question)
            )
            label = read_complexity(found, source="The classifier")
            if label is None:
                msg = (
                    f"The classifier returned {found!r} for {question!r}. Expected 'A', 'B' "
                    "or 'C'. Fix: return the class letter: A no retrieval, B single-step, C "
                    "multi-step."
                )
                raise AdaptiveRAGError(msg)
            return label, bump(None), ""
        if config.classifier == "rule":
            return rule_complexity(question), bump(None), ""
        if config.classifier == "semantic_entropy":
            return semantic_entropy_complexity(
                self.model,
                self.prompts,
                question,
                samples=config.classifier_samples,
                thresholds=config.uncertainty_thresholds,
                budget=config.generate_max_length,
            )
        if config.classifier == "gate":
            return gate_complexity(
                self.model,
                self.prompts,
                question,
                estimator=config.classifier_estimator,
                samples=config.classifier_samples,
                thresholds=config.uncertainty_thresholds,
                budget=config.generate_max_length,
            )
        budget = config.classifier_max_tokens
        base = self.model.decoding  # the model's sampling settings, a reply of one line
        decoding = replace(
            base,
            max_new_tokens=budget,
            min_new_tokens=min(base.min_new_tokens, budget),
            stop=("\n",),
        )
        trace = self.model.generate_trace(complexity_prompt(question), decoding=decoding)[0]
        counts = bump(None, **model_call(trace))
        label = read_complexity(trace.text, source="The chat model")
        if label is None:
            note = f"the classifier's reply {trace.text!r} names no class; B (single-step) taken"
            return "B", counts, note
        return label, counts, ""

    def for_this_call(self) -> AdaptiveRAGConfig:
        """The settings of this run (its ``context`` or ``configurable`` applied)."""
        overrides = call_overrides(self.config)
        return replace(self.config, **overrides) if overrides else self.config  # type: ignore[arg-type]


def create_adaptive_rag_router_graph(
    model: GraphModel,
    retriever: Retriever,
    *,
    config: AdaptiveRAGConfig | None = None,
    classifier: ComplexityClassifier | None = None,
    prompts: QAPrompts | None = None,
    checkpointer: Checkpointer = None,
    retriever_options: RetrieverOptions | None = None,
    name: str | None = None,
) -> AdaptiveRAGGraph:
    """Adaptive-RAG graph: classify the question, then run wo-RAG, SR-RAG or IRCoT.

    Runs on any chat model (no route reads token signals).

    Args:
        model: [`ChatTransformers`][], or any LangChain chat model or LLM.
        retriever: Any LangChain retriever.
        config: Settings (default: [`AdaptiveRAGConfig`][]).
        classifier: A classifier of your own (a trained one): any callable or Runnable
            from the question to ``"A"``, ``"B"`` or ``"C"``; ``config.classifier`` is
            then not read.
        prompts: The routes' prompt templates.
        checkpointer: Passed to ``compile`` (the routes keep no state of their own
            between runs).
        retriever_options: Retries, time limit and failure handling of the retriever
            calls.
        name: Graph name (default ``"adaptive_rag"``).

    Returns:
        The compiled graph, with input ``{"question"}`` or ``{"messages"}`` and as output
        the route's (``messages``, ``answer``, ``text``, ``retrievals``, ``counts``) and
        ``complexity``.

    Raises:
        AdaptiveRAGError: A config of another class, or a classifier that is neither
            callable nor a Runnable.
    """
    chosen = config if config is not None else AdaptiveRAGConfig()
    if not isinstance(chosen, AdaptiveRAGConfig):
        msg = (
            f"Adaptive-RAG takes an AdaptiveRAGConfig, got {type(chosen).__name__}. "
            "Fix: config=AdaptiveRAGConfig(...)."
        )
        raise AdaptiveRAGError(msg)
    trace_model = as_trace_model(model)
    qa_prompts = prompts or QAPrompts()
    router = AdaptiveRAGRouter(chosen, trace_model, classifier, qa_prompts)
    own_fields = frozenset(item.name for item in dataclasses.fields(AdaptiveRAGConfig))
    policies: dict[Complexity, Policy] = {
        "A": NoRetrievalPolicy(chosen.route_config("A")),
        "B": SingleStepPolicy(chosen.route_config("B")),
        "C": IRCoTPolicy(chosen.route_config("C")),
    }
    graph = StateGraph(
        AdaptiveRAGRouterState,
        context_schema=context_schema(AdaptiveRAGConfig),
        input_schema=AdaptiveRAGInput,
        output_schema=AdaptiveRAGRouterOutput,
    )

    def classify(state: AdaptiveRAGRouterState) -> dict[str, Any]:
        settings = router.for_this_call()
        question = start_of_run(state, qa_prompts)["question"]  # type: ignore[arg-type]
        label, counts, note = router.classify(question, settings)
        classifier_name = "custom" if classifier is not None else settings.classifier
        get_stream_writer()(
            {
                "event": "complexity",
                "complexity": label,
                "route": ROUTES[label],
                "classifier": classifier_name,
                "note": note,
            }
        )
        return {"complexity": label, "classifier_counts": counts, "retrievals": Overwrite([])}

    def tally(state: AdaptiveRAGRouterState) -> dict[str, Any]:
        spent = state.get("classifier_counts") or bump(None)
        counts = bump(state.get("counts"), **spent)
        update: dict[str, Any] = {"counts": counts, "question": ""}  # answered
        messages = state.get("messages") or []
        if messages and isinstance(messages[-1], AIMessage) and messages[-1].id:
            # the reply's usage counts the classifier's call too (same id: replaced)
            usage = run_usage(counts)
            update["messages"] = [messages[-1].model_copy(update={"usage_metadata": usage})]
        return update

    executor = getattr(trace_model, "async_executor", None)
    graph.add_node("classify", graph_node("classify", classify, executor))  # type: ignore[arg-type]
    for label, policy in policies.items():
        route = build_adaptive_rag_graph(
            policy,
            trace_model,  # one model (and, when served, one client) for every route
            retriever,
            prompts=qa_prompts,
            retriever_options=retriever_options,
            name=ROUTES[label],
            enclosing_fields=own_fields,
        )
        graph.add_node(ROUTES[label], route)
        graph.add_edge(ROUTES[label], "tally")
    graph.add_node("tally", tally)
    graph.add_edge(START, "classify")
    graph.add_conditional_edges(
        "classify",
        lambda state: ROUTES[state["complexity"]],
        {route: route for route in ROUTES.values()},
    )
    graph.add_edge("tally", END)
    compiled = graph.compile(checkpointer=checkpointer, name=name or AdaptiveRAGRouter.name)
    compiled.__class__ = AdaptiveRAGGraph  # type: ignore[assignment]
    return compiled  # type: ignore[return-value]
