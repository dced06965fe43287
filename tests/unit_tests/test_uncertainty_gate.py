"""Uncertainty gates: the estimators on hand-computed values, the gate on scripted and
served models."""

from __future__ import annotations

import math

import pytest

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs import create_adaptive_rag_graph
from langchain_adaptive_rag.graphs.uncertainty_gate import (
    UncertaintyGateConfig,
    create_uncertainty_gate_graph,
)
from langchain_adaptive_rag.signals import (
    mean_entropy,
    sample_logprob_variance,
    semantic_entropy,
    top_two_margin,
)
from langchain_adaptive_rag.testing import FakeTraceModel, ScriptedResponse
from tests.helpers.scripted import NO_SHOTS, QUESTION, RecordingRetriever
from tests.helpers.served_chat import ServerLikeChatModel

ANSWER = " Anna Berg was born in 1931. So the answer is 1931."


def test_estimators_by_hand() -> None:
    assert mean_entropy([0.5, 1.5, 1.0]) == pytest.approx(1.0)
    assert mean_entropy([]) == math.inf
    # gaps 2.4 and 0.1 (rows given out of order are sorted first)
    assert top_two_margin([[-0.1, -2.5], [-0.8, -0.7]]) == pytest.approx(1.25)
    assert top_two_margin([[-0.1, -2.5, -3.0]]) == pytest.approx(2.4)
    assert top_two_margin([]) == 0.0
    with pytest.raises(ValueError, match="at least 2 per token"):
        top_two_margin([[-0.1]])
    # mean log-probabilities -1 and -3: variance 1; one sample left: inf
    assert sample_logprob_variance([[-1.0, -1.0], [-3.0], []]) == pytest.approx(1.0)
    assert sample_logprob_variance([[-1.0]]) == math.inf
    # clusters of 2, 1, 1 among 4: -(0.5 ln 0.5 + 2 * 0.25 ln 0.25) = 1.0397208
    assert semantic_entropy(["a", "a", "b", "c"]) == pytest.approx(1.0397208, abs=1e-7)
    assert semantic_entropy(["x", "x"]) == 0.0
    assert semantic_entropy(["x", "y", "z"]) == pytest.approx(math.log(3))
    assert semantic_entropy([]) == math.inf


def _draft(gaps: tuple[float, ...]) -> ScriptedResponse:
    tokens = (" So", " the", " answer", " is", " 1931", ".")
    return ScriptedResponse(
        "".join(tokens),
        tokens=tokens,
        logprobs=tuple(-0.1 for _ in tokens),
        top_logprobs=tuple((-0.1, -0.1 - gap) for gap in gaps),
    )


def test_a_confident_draft_is_the_answer_and_an_unsure_one_retrieves() -> None:
    confident = FakeTraceModel([_draft((3.0,) * 6)])
    retriever = RecordingRetriever()
    result = create_uncertainty_gate_graph(confident, retriever, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert result["answer"] == "1931" and retriever.queries == []
    assert result["counts"]["llm_calls"] == 1
    # gaps 0.5 x 3 and 1.0 x 3: margin 0.75 < 2.0 (the margin's starting threshold)
    unsure = FakeTraceModel([_draft((0.5, 0.5, 0.5, 1.0, 1.0, 1.0)), ANSWER])
    graph = create_uncertainty_gate_graph(unsure, retriever, prompts=NO_SHOTS)
    updates = list(graph.stream({"question": QUESTION}, stream_mode="updates"))
    decision = next(u["score_need"] for u in updates if "score_need" in u)["decision"]
    assert decision["retrieve"] is True and decision["score"] == pytest.approx(0.75)
    assert decision["threshold"] == 2.0 and decision["direction"] == "below"
    assert retriever.queries == [QUESTION]  # the question, once
    assert "Context:\n[1]" in unsure.prompts[1] and unsure.prompts[1].endswith("Answer:")
    last = updates[-1]["finalize"]
    assert last["answer"] == "1931" and last["counts"]["llm_calls"] == 2
    assert last["counts"]["retrievals"] == 1


def test_the_sample_variance_reads_the_samples() -> None:
    greedy = ScriptedResponse(" So the answer is 1931.", logprobs=(-0.1,) * 5)
    samples = [
        ScriptedResponse(" So the answer is 1931.", logprobs=(-0.1,) * 5),
        ScriptedResponse(" So the answer is 1930.", logprobs=(-1.0,) * 5),
        ScriptedResponse(" 1932", logprobs=(-2.0,)),
    ]
    chat = FakeTraceModel([greedy, *samples, ANSWER])
    config = UncertaintyGateConfig(estimator="sample_variance", num_samples=3, threshold=0.1)
    result = create_uncertainty_gate_graph(
        chat, RecordingRetriever(), config=config, prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    # means -0.1, -1.0, -2.0 (mean -1.0333): (0.8711 + 0.0011 + 0.9344) / 3 = 0.60222 > 0.1
    (event,) = result["retrievals"]
    assert event["score"] == pytest.approx(0.6022222, abs=1e-6)
    assert chat.calls[0]["n"] == 3 and chat.calls[0]["include_greedy"] is True
    assert chat.calls[0]["do_sample"] is True
    assert result["counts"]["llm_calls"] == 5  # the greedy answer, 3 samples, the answer again


def test_on_a_served_model_the_margin_reads_the_top_two_log_probabilities() -> None:
    sure = ServerLikeChatModel(replies=[ANSWER])  # every word at 0.9: margin log 9 = 2.197
    result = create_adaptive_rag_graph(
        sure, RecordingRetriever(), "uncertainty_gate", prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    assert result["counts"]["retrievals"] == 0 and result["answer"] == "1931"
    assert sure.requests[0]["top_logprobs"] >= 2
    unsure = ServerLikeChatModel(replies=[ANSWER], probability=lambda w: 0.6)  # log 1.5
    updates = list(
        create_adaptive_rag_graph(
            unsure, RecordingRetriever(), "uncertainty_gate", prompts=NO_SHOTS
        ).stream({"question": QUESTION}, stream_mode="updates")
    )
    decision = next(u["score_need"] for u in updates if "score_need" in u)["decision"]
    assert decision["retrieve"] is True
    assert decision["score"] == pytest.approx(math.log(1.5), rel=1e-5)


def test_a_served_entropy_says_it_is_a_lower_bound_and_energy_needs_logits() -> None:
    chat = ServerLikeChatModel(replies=[ANSWER])
    config = UncertaintyGateConfig(estimator="entropy", threshold=0.0)
    updates = list(
        create_uncertainty_gate_graph(chat, RecordingRetriever(), config=config).stream(
            {"question": QUESTION}, stream_mode="updates"
        )
    )
    decision = next(u["score_need"] for u in updates if "score_need" in u)["decision"]
    assert "lower bound" in decision["note"]
    energy = create_uncertainty_gate_graph(
        chat, RecordingRetriever(), config=UncertaintyGateConfig(estimator="energy")
    )
    with pytest.raises(AdaptiveRAGError, match=r"logsumexp.*ChatTransformers"):
        energy.invoke({"question": QUESTION})


def test_the_config_is_checked() -> None:
    with pytest.raises(AdaptiveRAGError, match="num_samples must be >= 2"):
        UncertaintyGateConfig(estimator="ln_entropy", num_samples=1)
    with pytest.raises(AdaptiveRAGError, match="threshold"):
        UncertaintyGateConfig(threshold=math.inf)
    assert UncertaintyGateConfig(estimator="ln_entropy").rows_per_call == 6
    assert UncertaintyGateConfig().gate_threshold == 2.0


def test_the_report_names_the_gate_score_and_its_threshold() -> None:
    from langchain_adaptive_rag.visualize import record_run, tokens_html

    chat = FakeTraceModel([_draft((0.5, 0.5, 0.5, 1.0, 1.0, 1.0)), ANSWER])
    graph = create_uncertainty_gate_graph(chat, RecordingRetriever(), prompts=NO_SHOTS)
    record = record_run(graph, QUESTION)
    assert record.rounds[0].uncertainty == pytest.approx(0.75)
    html = tokens_html(record)
    assert "uncertainty u" in html  # the gate's own name for its score
    assert "τ = 2" in html
