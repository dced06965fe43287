"""Adaptive-RAG on a scripted model: the class picks the route, the counts add up per route."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.messages import AIMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from langchain_adaptive_rag import (
    AdaptiveRAGConfig,
    IRCoTConfig,
    create_adaptive_rag_graph,
    create_adaptive_rag_router_graph,
    create_bm25_retriever,
)
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs import display_name, policy_class
from langchain_adaptive_rag.graphs.adaptive_rag import ROUTES
from langchain_adaptive_rag.graphs.compiled import AdaptiveRAGGraph
from langchain_adaptive_rag.graphs.fixed import create_no_retrieval_graph, create_single_round_graph
from langchain_adaptive_rag.graphs.ircot import create_ircot_graph
from langchain_adaptive_rag.graphs.policy import MethodConfig
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.testing import FakeTraceModel

QUESTION = "When was the director of film Blue Harbour born?"
PASSAGES = [
    "Blue Harbour is a 1962 film directed by Anna Berg.",
    "Anna Berg (born 1931) is a Swedish film director.",
    "Carl Lind was born in Oslo in 1902.",
]
ANSWER = " So the answer is 1931."
STEP = " The film Blue Harbour was directed by Anna Berg."
SCRIPTS: dict[str, list[str]] = {
    "A": [ANSWER],  # wo-RAG: one draft that answers
    "B": [ANSWER],  # SR-RAG: retrieve with the question, one generation
    "C": [STEP, ANSWER, ANSWER],  # IRCoT: two steps, then its reader
}
NO_SHOTS = QAPrompts(exemplars=())
CONFIG = AdaptiveRAGConfig(generate_max_length=48, retrieve_topk=2, max_steps=4)
STANDALONE: dict[str, Callable[..., AdaptiveRAGGraph]] = {
    "A": create_no_retrieval_graph,
    "B": create_single_round_graph,
    "C": create_ircot_graph,
}


def _standalone(label: str) -> dict[str, Any]:
    """The route's method run on its own (paper mode), on the same script."""
    config: MethodConfig = (
        IRCoTConfig(generate_max_length=48, retrieve_topk=2, max_steps=4, mode="paper")
        if label == "C"
        else MethodConfig(generate_max_length=48, retrieve_topk=2)
    )
    graph = STANDALONE[label](
        FakeTraceModel(SCRIPTS[label]),
        create_bm25_retriever(PASSAGES),
        config=config,
        prompts=NO_SHOTS,
    )
    return graph.invoke({"question": QUESTION})


def _router(model: FakeTraceModel, classifier: Any = None, **options: Any) -> AdaptiveRAGGraph:
    return create_adaptive_rag_router_graph(
        model,
        create_bm25_retriever(PASSAGES),
        config=options.pop("config", CONFIG),
        classifier=classifier,
        prompts=NO_SHOTS,
        **options,
    )


@pytest.mark.parametrize("label", ["A", "B", "C"])
def test_each_class_runs_its_route_as_that_method_runs_alone(label: str) -> None:
    # paper mode: the routes are wo-RAG, SR-RAG and IRCoT as the papers read (the
    # reference mode's official retriever rules: test_adaptive_rag_official.py)
    model = FakeTraceModel(SCRIPTS[label])
    paper = dataclasses.replace(CONFIG, mode="paper")
    result = _router(model, classifier=lambda question: label, config=paper).invoke(
        {"question": QUESTION}
    )
    alone = _standalone(label)
    assert result["complexity"] == label
    assert result["answer"] == alone["answer"] == "1931"
    assert result["text"] == alone["text"]
    assert result["counts"] == alone["counts"]  # a classifier of your own costs no call
    assert result["retrievals"] == alone["retrievals"]
    assert [m.type for m in result["messages"]] == ["human", "ai"]
    assert len(model.prompts) == len(SCRIPTS[label])  # every scripted reply was used


def test_the_llm_classifier_adds_its_call_to_the_routes_counts() -> None:
    reply = " C"
    spent = FakeTraceModel([reply]).generate_trace("x")[0].num_tokens
    model = FakeTraceModel([reply, *SCRIPTS["C"]])
    config = AdaptiveRAGConfig(
        generate_max_length=48, retrieve_topk=2, max_steps=4, classifier="llm"
    )
    result = _router(model, config=config).invoke({"question": QUESTION})
    alone = _standalone("C")["counts"]
    assert result["complexity"] == "C"
    assert model.prompts[0].endswith(f"Question: {QUESTION}\nClass:")
    assert model.calls[0]["max_new_tokens"] == config.classifier_max_tokens
    assert result["counts"] == {
        **alone,
        "llm_calls": alone["llm_calls"] + 1,
        "generated_tokens": alone["generated_tokens"] + spent,
    }


def test_a_reply_without_a_class_takes_the_single_step_route_and_says_so() -> None:
    model = FakeTraceModel([" maybe", *SCRIPTS["B"]])
    graph = _router(model, config=AdaptiveRAGConfig(classifier="llm"))
    parts = list(graph.stream({"question": QUESTION}, stream_mode="custom"))
    assert parts[0] == {
        "event": "complexity",
        "complexity": "B",
        "route": "single_round",
        "classifier": "llm",
        "note": "the classifier's reply ' maybe' names no class; B (single-step) taken",
    }


def test_the_rule_is_the_default_classifier() -> None:
    model = FakeTraceModel(SCRIPTS["C"])
    result = _router(model).invoke({"question": QUESTION})  # a relation chain: C
    assert result["complexity"] == "C" and result["counts"] == _standalone("C")["counts"]


@pytest.mark.parametrize(
    "classifier",
    [
        RunnableLambda(lambda question: "A"),
        lambda question: AIMessage(" A"),
        lambda question: "a",
    ],
    ids=["runnable", "message", "lower-case"],
)
def test_a_classifier_of_your_own_may_be_a_runnable_or_return_a_message(classifier: Any) -> None:
    result = _router(FakeTraceModel(SCRIPTS["A"]), classifier).invoke({"question": QUESTION})
    assert result["complexity"] == "A" and result["counts"]["retrievals"] == 0


@pytest.mark.parametrize(
    ("returned", "message"),
    [("D", r"returned 'D' for 'When was"), (3, r"returned 3 \(int\)")],
)
def test_a_classifier_that_returns_no_class_is_an_error(returned: object, message: str) -> None:
    graph = _router(FakeTraceModel([]), classifier=lambda question: returned)
    with pytest.raises(AdaptiveRAGError, match=message):
        graph.invoke({"question": QUESTION})


def test_a_classifier_that_cannot_be_called_is_refused_when_the_graph_is_built() -> None:
    with pytest.raises(AdaptiveRAGError, match="classifier must be a callable or a Runnable"):
        _router(FakeTraceModel([]), classifier="C")


def test_by_name_it_takes_an_adaptive_rag_config_only() -> None:
    retriever = create_bm25_retriever(PASSAGES)
    graph = create_adaptive_rag_graph(FakeTraceModel([]), retriever, "adaptive_rag")
    assert graph.name == "adaptive_rag"
    with pytest.raises(AdaptiveRAGError, match="takes a AdaptiveRAGConfig, got IRCoTConfig"):
        create_adaptive_rag_graph(
            FakeTraceModel([]), retriever, "adaptive_rag", config=IRCoTConfig()
        )
    assert display_name("adaptive_rag") == "Adaptive-RAG"
    assert policy_class("adaptive_rag").threshold_field is None


def test_one_call_may_change_the_classifier_and_the_routes_settings() -> None:
    model = FakeTraceModel([" C", STEP, ANSWER])
    graph = _router(model)  # built with the rule and max_steps=4
    result = graph.invoke({"question": QUESTION}, context={"classifier": "llm", "max_steps": 1})
    assert result["complexity"] == "C"
    assert result["counts"]["retrievals"] == 1  # IRCoT stopped after its one step
    assert result["counts"]["llm_calls"] == 3  # the classifier, the step, the reader
    with pytest.raises(AdaptiveRAGError, match="'theta', which AdaptiveRAGConfig does not"):
        graph.invoke({"question": QUESTION}, context={"theta": 1.0})


def test_a_thread_keeps_the_conversation_and_each_run_its_own_retrievals() -> None:
    rewrite = " Who was born in Oslo?"  # the second turn's question, standing on its own
    model = FakeTraceModel([*SCRIPTS["B"], rewrite, *SCRIPTS["B"]])
    graph = _router(model, classifier=lambda question: "B", checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t"}}
    first = graph.invoke({"question": QUESTION}, thread)
    second = graph.invoke({"messages": [("user", "Who was born in Oslo?")]}, thread)
    assert len(first["retrievals"]) == len(second["retrievals"]) == 1
    # the standalone rewrite, as the official retriever sends it (without "Who")
    assert second["retrievals"][0]["query"] == "was born in Oslo?"
    assert [m.type for m in second["messages"]] == ["human", "ai", "human", "ai"]
    assert "Question: " + QUESTION in model.prompts[1]  # the first turn is shown again


def test_the_routes_stream_their_events_with_subgraphs() -> None:
    graph = _router(FakeTraceModel(SCRIPTS["B"]), classifier=lambda question: "B")
    parts = list(graph.stream({"question": QUESTION}, stream_mode="custom", subgraphs=True))
    events = [(bool(namespace), part["event"]) for namespace, part in parts]
    assert events[:3] == [(False, "complexity"), (True, "decision"), (True, "retrieval")]


def test_the_picture_shows_the_three_routes_as_subgraphs() -> None:
    drawn = _router(FakeTraceModel([])).get_graph(xray=True)
    nodes = set(drawn.nodes)
    assert {"classify", "tally"} <= nodes
    for route in ROUTES.values():
        assert {f"{route}:draft", f"{route}:retrieve", f"{route}:finalize"} <= nodes


def test_a_recorded_run_holds_the_routes_rounds_and_the_class() -> None:
    from langchain_adaptive_rag.visualize import record_run

    paper = dataclasses.replace(CONFIG, mode="paper")  # as _standalone runs IRCoT
    graph = _router(FakeTraceModel(SCRIPTS["C"]), classifier=lambda question: "C", config=paper)
    record = record_run(graph, QUESTION)
    alone = _standalone("C")
    assert record.method == "adaptive_rag" and record.answer == "1931"
    assert record.counts == alone["counts"]
    assert record.events[0]["event"] == "complexity" and record.events[0]["complexity"] == "C"
    queries = [r.retrieval.query for r in record.rounds if r.retrieval is not None]
    assert queries == [e["query"] for e in alone["retrievals"]]
    from langchain_adaptive_rag.visualize import report_html

    page = report_html([record], title="routes", graphs={"adaptive_rag": graph})
    assert "Adaptive-RAG: When was the director" in page and "Anna Berg" in page


class CountRecorder(BaseRetriever):
    """Returns the passages; records the ``k`` of every call."""

    ks: list[int] = Field(default_factory=list)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int = 4
    ) -> list[Document]:
        self.ks.append(k)
        return [Document(id=f"p{i}", page_content=t) for i, t in enumerate(PASSAGES)]


@pytest.mark.parametrize(("setup", "single", "multi"), [("flan_t5", 15, 6), ("gpt", 6, 3)])
@pytest.mark.parametrize("label", ["B", "C"])
def test_each_route_reads_the_official_runs_paragraph_count(
    setup: str, single: int, multi: int, label: str
) -> None:
    official = AdaptiveRAGConfig.official_setup(setup)  # type: ignore[arg-type]
    config = dataclasses.replace(official, generate_max_length=48, max_steps=4)
    retriever = CountRecorder()
    graph = create_adaptive_rag_router_graph(
        FakeTraceModel(SCRIPTS[label]),
        retriever,
        config=config,
        classifier=lambda question: label,
        prompts=NO_SHOTS,
    )
    graph.invoke({"question": QUESTION})
    expected = single if label == "B" else multi
    assert retriever.ks and set(retriever.ks) == {expected}


def test_an_unknown_official_setup_is_named() -> None:
    with pytest.raises(AdaptiveRAGError, match=r"setup='llama'\. Expected one of"):
        AdaptiveRAGConfig.official_setup("llama")  # type: ignore[arg-type]


# -- the training-free uncertainty classifiers -------------------------------------------


def test_uncertainty_thresholds_give_the_class_by_hand() -> None:
    from langchain_adaptive_rag.graphs.complexity import uncertainty_complexity
    from langchain_adaptive_rag.graphs.complexity_estimates import CLASSIFIER_THRESHOLDS

    assert [uncertainty_complexity(v, (0.5, 1.0), "above") for v in (0.0, 0.5, 0.7, 1.0, 1.05)] == [
        "A",
        "A",
        "B",
        "B",
        "C",
    ]
    # the margin: more is surer
    assert [uncertainty_complexity(v, (3.0, 1.0), "below") for v in (3.5, 3.0, 2.0, 1.0, 0.4)] == [
        "A",
        "A",
        "B",
        "B",
        "C",
    ]
    assert uncertainty_complexity(float("nan"), (0.5, 1.0), "above") == "C"
    assert CLASSIFIER_THRESHOLDS["semantic_entropy"] == (0.6, 1.0)


@pytest.mark.parametrize(
    ("answers", "label", "entropy"),
    [
        # 4 of 5 agree (after normalisation): -(0.8 ln 0.8 + 0.2 ln 0.2) = 0.5004 <= 0.6: A
        (
            [
                " So the answer is 1931.",
                " So the answer is the 1931",
                " 1931",
                " So the answer is 1931!",
                " So the answer is 1930.",
            ],
            "A",
            0.5004,
        ),
        # all agree: 0 nats, A (no retrieval); 3-2: 0.673, B
        ([" So the answer is 1931."] * 5, "A", 0.0),
        ([" So the answer is 1931."] * 3 + [" So the answer is 1930."] * 2, "B", 0.673),
        # 2-2-1: 1.0549 > 1.0, C
        (
            [
                " So the answer is 1931.",
                " So the answer is 1931.",
                " So the answer is 1930.",
                " So the answer is 1930.",
                " So the answer is 1929.",
            ],
            "C",
            1.0549,
        ),
    ],
)
def test_semantic_entropy_clusters_the_sampled_answers(
    answers: list[str], label: str, entropy: float
) -> None:
    model = FakeTraceModel([*answers, *SCRIPTS[label]])
    config = AdaptiveRAGConfig(
        generate_max_length=48, retrieve_topk=2, max_steps=4, classifier="semantic_entropy"
    )
    graph = _router(model, config=config)
    parts = list(graph.stream({"question": QUESTION}, stream_mode="custom"))
    event = parts[0]
    assert event["complexity"] == label and event["classifier"] == "semantic_entropy"
    assert f"semantic entropy {entropy:.3g} nats over 5 sampled answers" in event["note"]
    assert model.calls[0]["n"] == 5 and model.calls[0]["do_sample"] is True
    assert model.prompts[0].endswith(f"Question: {QUESTION}\nAnswer:")


def test_the_gate_classifier_reads_the_margin_and_counts_its_call() -> None:
    from langchain_adaptive_rag.testing import ScriptedResponse

    draft = ScriptedResponse(
        " So the answer is 1931.",
        top_logprobs=((-0.1, -2.1),) * 5,  # margin 2.0: between τ_C = 1.0 and τ_A = 3.0
    )
    model = FakeTraceModel([draft, *SCRIPTS["B"]])
    config = AdaptiveRAGConfig(generate_max_length=48, retrieve_topk=2, classifier="gate")
    result = _router(model, config=config).invoke({"question": QUESTION})
    assert result["complexity"] == "B"
    alone = _standalone("B")["counts"]
    assert result["counts"]["llm_calls"] == alone["llm_calls"] + 1


def test_uncertainty_thresholds_are_checked() -> None:
    with pytest.raises(AdaptiveRAGError, match="out of order"):
        AdaptiveRAGConfig(classifier="semantic_entropy", classifier_thresholds=(1.0, 0.5))
    with pytest.raises(AdaptiveRAGError, match="out of order"):
        AdaptiveRAGConfig(classifier="gate", classifier_thresholds=(1.0, 3.0))  # margin
    with pytest.raises(AdaptiveRAGError, match=r"no default thresholds.*classifier_thresholds"):
        AdaptiveRAGConfig(classifier="gate", classifier_estimator="energy")
    with pytest.raises(AdaptiveRAGError, match="classifier_samples must be >= 2"):
        AdaptiveRAGConfig(classifier_samples=1)
