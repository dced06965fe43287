"""Self-RAG on scripted reflection-token probabilities: each formula against hand values."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from langchain_adaptive_rag import (
    SelfRAGConfig,
    create_adaptive_rag_graph,
    create_bm25_retriever,
    create_self_rag_graph,
)
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs.reflection import (
    ReflectionVocabulary,
    logprobs_at,
    relevance_score,
    retrieval_score,
    segment_score,
    strip_reflection,
    support_score,
    utility_score,
)
from langchain_adaptive_rag.options import GenerationTrace
from langchain_adaptive_rag.testing import FakeTraceModel, ScriptedResponse
from tests.helpers.self_rag_script import IDS
from tests.helpers.self_rag_script import draft as _draft

QUESTION = "Who directed Blue Harbour?"
PASSAGES = [
    "Blue Harbour is a 1962 film directed by Anna Berg.",
    "Blue Harbour is a song by Carl Lind.",
]
VOCABULARY = ReflectionVocabulary(IDS)
PROMPT = f"### Instruction:\n{QUESTION}\n\n### Response:\n"
ln = math.log


# -- the formulas, by hand -----------------------------------------------------------------


def test_the_retrieval_score_in_the_papers_reading_and_the_codes() -> None:
    assert retrieval_score(ln(0.6), ln(0.2), "paper") == pytest.approx(0.6 / 0.8)
    # the official code divides the log-probabilities themselves
    assert retrieval_score(ln(0.6), ln(0.2), "reference") == pytest.approx(
        -0.5108256 / (-0.5108256 - 1.6094379)
    )
    # ... which rises as [Retrieval] becomes less likely: the two readings disagree
    assert retrieval_score(ln(0.05), ln(0.95), "paper") == pytest.approx(0.05)
    assert retrieval_score(ln(0.05), ln(0.95), "reference") == pytest.approx(0.98316, abs=1e-5)


def test_relevance_support_and_utility_scores() -> None:
    assert relevance_score([ln(0.3), ln(0.1)]) == pytest.approx(0.75)
    assert support_score([ln(0.25), ln(0.15), ln(0.1)]) == pytest.approx(0.5 + 0.5 * 0.3)
    assert support_score(None) == 0.0
    utility = [ln(0.1), ln(0.1), ln(0.2), ln(0.2), ln(0.4)]
    assert utility_score(utility) == pytest.approx(-0.1 - 0.05 + 0.0 + 0.1 + 0.4)
    assert utility_score(None) == 0.0
    assert relevance_score([-100.0, -100.0]) == pytest.approx(0.5)  # neither known


def _segment(
    ids: list[int], rows: list[dict[int, float]], logprobs: list[float]
) -> GenerationTrace:
    watched = VOCABULARY.watched
    count = len(ids)
    return GenerationTrace(
        prompt_ids=np.zeros(0, dtype=np.int64),
        token_ids=np.asarray(ids, dtype=np.int64),
        tokens=["x"] * count,
        text="x" * count,
        logprobs=np.asarray(logprobs, dtype=np.float32),
        entropies=np.zeros(count, dtype=np.float32),
        finish_reason="stop",
        token_logprobs=np.asarray(
            [[row.get(i, -100.0) for i in watched] for row in rows], dtype=np.float32
        ),
    )


def test_a_segment_is_scored_where_its_reflection_tokens_were_written() -> None:
    support = {105: ln(0.25), 106: ln(0.15), 107: ln(0.1)}
    utility = {108: ln(0.1), 109: ln(0.1), 110: ln(0.2), 111: ln(0.2), 112: ln(0.4)}
    trace = _segment(
        # [Relevant] answer [Fully supported] [Utility:5]; a later support token is ignored
        [103, 7, 105, 112, 106],
        [{103: ln(0.3), 104: ln(0.1)}, {}, support, utility, {105: 0.0, 106: 0.0, 107: 0.0}],
        [-0.2, -0.4, -0.6, -0.2, -0.6],
    )
    score = segment_score(trace, VOCABULARY, w_rel=1.0, w_sup=1.0, w_use=0.5)
    assert score.sequence == pytest.approx(math.exp(-0.4))
    assert (score.relevance, score.support, score.utility) == pytest.approx((0.75, 0.65, 0.35))
    assert score.total == pytest.approx(math.exp(-0.4) + 0.75 + 0.65 + 0.5 * 0.35)
    bare = segment_score(
        trace, VOCABULARY, w_rel=2.0, w_sup=1.0, w_use=1.0, use_sequence=False, use_utility=False
    )
    assert bare.total == pytest.approx(2 * 0.75 + 0.65)


def test_a_segment_without_support_or_utility_tokens_scores_them_zero() -> None:
    trace = _segment([7, 8], [{103: ln(0.5), 104: ln(0.5)}, {}], [0.0, 0.0])
    score = segment_score(trace, VOCABULARY, w_rel=1.0, w_sup=1.0, w_use=0.5)
    assert (score.sequence, score.relevance, score.support, score.utility) == (1.0, 0.5, 0.0, 0.0)


def test_log_probabilities_come_from_the_watched_ids_or_the_top_alternatives() -> None:
    trace = _segment([7], [{103: -1.5}], [0.0])
    trace = GenerationTrace(
        **{
            **trace.__dict__,
            "top_token_ids": np.asarray([[104, 7]]),
            "top_logprobs": np.asarray([[-0.7, -0.1]]),
            "token_logprobs": None,
        }
    )
    assert logprobs_at(trace, 0, ["[Irrelevant]", "[Relevant]"], VOCABULARY) == [
        pytest.approx(-0.7),
        -100.0,
    ]


def test_reflection_tokens_are_removed_from_the_answer() -> None:
    text = " Anna Berg[Fully supported][Utility:5]</s>"
    assert strip_reflection(text) == "Anna Berg"


# -- the graph on a scripted model ---------------------------------------------------------


def _segment_reply(text: str, relevant: float) -> ScriptedResponse:
    # "[Relevant]" text "[Fully supported]" "[Utility:5]": four tokens, certain ones
    return ScriptedResponse(
        f"[Relevant]{text}[Fully supported][Utility:5]",
        tokens=("[Relevant]", text, "[Fully supported]", "[Utility:5]"),
        token_ids=(103, 9, 105, 112),
        token_logprobs=(
            {103: ln(relevant), 104: ln(1 - relevant)},
            {},
            {105: ln(0.5), 106: ln(0.5), 107: ln(1e-9)},
            {112: 0.0, 111: -100.0, 110: -100.0, 109: -100.0, 108: -100.0},
        ),
    )


def _graph(model: FakeTraceModel, **settings: object):
    config = SelfRAGConfig(retrieve_topk=2, **settings)  # type: ignore[arg-type]
    return create_self_rag_graph(model, create_bm25_retriever(PASSAGES), config=config)


def test_it_retrieves_over_delta_and_keeps_the_best_segment() -> None:
    model = FakeTraceModel(
        [_draft(0.6, 0.2), _segment_reply(" Carl Lind", 0.2), _segment_reply(" Anna Berg", 0.9)],
        vocabulary=IDS,
    )
    result = _graph(model).invoke({"question": QUESTION})
    assert model.prompts[0] == PROMPT
    assert model.prompts[1] == f"{PROMPT}[Retrieval]<paragraph>\n{PASSAGES[0]}</paragraph>"
    assert model.prompts[2] == f"{PROMPT}[Retrieval]<paragraph>\n{PASSAGES[1]}</paragraph>"
    assert result["answer"] == "Anna Berg"  # the second passage's segment scored higher
    event = result["retrievals"][0]
    assert event["score"] == pytest.approx(0.75) and event["threshold"] == 0.2
    assert event["rerank_order"] == [1, 0]
    assert result["counts"]["llm_calls"] == 3 and result["counts"]["retrievals"] == 1
    # S = p(y) + s_rel + s_sup + 0.5 s_use, p(y) = 1 (certain tokens), s_sup = 0.75, s_use = 1
    state = _graph(
        FakeTraceModel(
            [_draft(0.6, 0.2), _segment_reply(" a", 0.2), _segment_reply(" b", 0.9)],
            vocabulary=IDS,
        )
    )
    segments = list(state.stream({"question": QUESTION}, stream_mode="updates"))
    scored = next(u["rerank"]["segments"] for u in segments if "rerank" in u)
    assert [s["score"] for s in scored] == pytest.approx(
        [1 + 0.2 + 0.75 + 0.5, 1 + 0.9 + 0.75 + 0.5]
    )
    assert [s["relevance"] for s in scored] == pytest.approx([0.2, 0.9])


def test_under_delta_it_answers_after_no_retrieval() -> None:
    model = FakeTraceModel([_draft(0.05, 0.95), " Anna Berg[Utility:4]"], vocabulary=IDS)
    result = _graph(model).invoke({"question": QUESTION})
    assert model.prompts[1] == PROMPT + "[No Retrieval]"
    assert result["answer"] == "Anna Berg"
    assert result["retrievals"] == [] and result["counts"]["llm_calls"] == 2


def test_the_reference_reading_retrieves_where_the_papers_does_not() -> None:
    model = FakeTraceModel(
        [_draft(0.05, 0.95), _segment_reply(" a", 0.5), _segment_reply(" b", 0.5)],
        vocabulary=IDS,
    )
    result = _graph(model, mode="reference").invoke({"question": QUESTION})
    assert result["retrievals"][0]["score"] == pytest.approx(0.98316, abs=1e-5)


def test_without_a_threshold_the_model_decides_by_writing_retrieval() -> None:
    wrote = _draft(0.01, 0.99, ids=(101, 8))  # [Retrieval] generated, though unlikely
    model = FakeTraceModel(
        [wrote, _segment_reply(" a", 0.5), _segment_reply(" b", 0.6)], vocabulary=IDS
    )
    result = _graph(model, threshold=None).invoke({"question": QUESTION})
    assert result["counts"]["retrievals"] == 1 and result["answer"] == "b"


@pytest.mark.parametrize(("retrieval", "calls"), [("always", 2), ("never", 2)])
def test_always_and_never_are_the_codes_modes(retrieval: str, calls: int) -> None:
    replies = (
        [_segment_reply(" a", 0.5), _segment_reply(" b", 0.6)]
        if retrieval == "always"
        else [_draft(0.9, 0.1), " Anna Berg"]
    )
    model = FakeTraceModel(replies, vocabulary=IDS)
    result = _graph(model, retrieval=retrieval).invoke({"question": QUESTION})
    assert result["counts"]["llm_calls"] == calls
    assert result["counts"]["retrievals"] == (1 if retrieval == "always" else 0)


def test_a_model_without_reflection_tokens_is_refused_when_the_graph_is_built() -> None:
    retriever = create_bm25_retriever(PASSAGES)
    with pytest.raises(AdaptiveRAGError, match="needs the model's tokenizer"):
        create_adaptive_rag_graph(FakeTraceModel([]), retriever, "self_rag")  # type: ignore[arg-type]
    lacking = {k: v for k, v in IDS.items() if k != "[Utility:3]"}
    with pytest.raises(AdaptiveRAGError, match=r"this tokenizer lacks \[Utility:3\]"):
        create_adaptive_rag_graph(FakeTraceModel([], vocabulary=lacking), retriever, "self_rag")


def test_delta_must_be_a_probability() -> None:
    with pytest.raises(AdaptiveRAGError, match=r"threshold must be in \[0, 1\] or None, got 1.5"):
        SelfRAGConfig(threshold=1.5)


def test_a_recorded_run_shows_the_decision_and_the_passages_by_score() -> None:
    from langchain_adaptive_rag.visualize import record_run

    model = FakeTraceModel(
        [_draft(0.6, 0.2), _segment_reply(" a", 0.2), _segment_reply(" b", 0.9)],
        vocabulary=IDS,
    )
    record = record_run(_graph(model), QUESTION)
    decided = [r for r in record.rounds if r.decision is not None]
    assert decided[0].decision.score == pytest.approx(0.75)  # type: ignore[union-attr]
    retrieval = next(r.retrieval for r in record.rounds if r.retrieval is not None)
    assert retrieval.rerank_order == [1, 0] and record.answer == "b"


# -- a served model: the reflection tokens read by their text ------------------------------


class ReflectingServer(BaseChatModel):
    """Replies as an OpenAI-compatible server with reflection tokens in its text: each
    reply is a list of (token, log-probability, alternatives) entries."""

    replies: list[list[tuple[str, float, dict[str, float]]]]
    prompts: list[str] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "reflecting-server"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.prompts.append(str(messages[-1].content))
        entries = self.replies[len(self.prompts) - 1]
        content = [
            {
                "token": token,
                "logprob": logprob,
                "top_logprobs": [{"token": t, "logprob": v} for t, v in alternatives.items()],
            }
            for token, logprob, alternatives in entries
        ]
        message = AIMessage(
            "".join(token for token, _, _ in entries),
            response_metadata={"finish_reason": "stop", "logprobs": {"content": content}},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


def _served_segment(text: str, relevant: float) -> list[tuple[str, float, dict[str, float]]]:
    return [
        (
            "[Relevant]",
            ln(relevant),
            {"[Relevant]": ln(relevant), "[Irrelevant]": ln(1 - relevant)},
        ),
        (text, 0.0, {}),
        (
            "[Fully supported]",
            ln(0.5),
            {"[Fully supported]": ln(0.5), "[Partially supported]": ln(0.5)},
        ),
        ("[Utility:5]", 0.0, {"[Utility:5]": 0.0}),
    ]


def test_on_a_served_model_the_tokens_are_read_by_their_text() -> None:
    draft = [(" Anna", ln(0.1), {"[Retrieval]": ln(0.6), "[No Retrieval]": ln(0.2)})]
    server = ReflectingServer(
        replies=[draft, _served_segment(" a", 0.2), _served_segment(" b", 0.9)]
    )
    graph = create_self_rag_graph(
        server, create_bm25_retriever(PASSAGES), config=SelfRAGConfig(retrieve_topk=2)
    )
    updates = {
        node: update
        for part in graph.stream({"question": QUESTION}, stream_mode="updates")
        for node, update in part.items()
    }
    assert updates["score_need"]["decision"]["score"] == pytest.approx(0.75)
    segments = updates["rerank"]["segments"]
    for segment, relevant in zip(segments, (0.2, 0.9), strict=True):
        sequence = math.exp((ln(relevant) + ln(0.5)) / 4)  # the mean of the four tokens'
        assert segment["relevance"] == pytest.approx(relevant)
        assert (segment["support"], segment["utility"]) == pytest.approx((0.75, 1.0))
        assert segment["score"] == pytest.approx(sequence + relevant + 0.75 + 0.5)
    assert updates["finalize"]["answer"] == "b"
    assert server.prompts[1].endswith(f"[Retrieval]<paragraph>\n{PASSAGES[0]}</paragraph>")


def test_a_served_model_without_log_probabilities_is_refused_at_the_first_call() -> None:
    from langchain_core.language_models import GenericFakeChatModel

    chat = GenericFakeChatModel(messages=iter([AIMessage(" Anna Berg")]))
    graph = create_self_rag_graph(chat, create_bm25_retriever(PASSAGES))
    with pytest.raises(AdaptiveRAGError, match="returned no token log-probabilities"):
        graph.invoke({"question": QUESTION})


def test_the_harness_evaluates_it_and_records_its_counts(tmp_path: Path) -> None:
    from langchain_adaptive_rag.evaluation import Example, evaluate_method

    model = FakeTraceModel(
        [_draft(0.6, 0.2), _segment_reply(" Carl Lind", 0.2), _segment_reply(" Anna Berg", 0.9)],
        vocabulary=IDS,
    )
    report = evaluate_method(
        model,  # type: ignore[arg-type]
        create_bm25_retriever(PASSAGES),
        "self_rag",
        [Example(id="q1", question=QUESTION, answers=("Anna Berg",), dataset="hotpotqa")],
        tmp_path,
        config=SelfRAGConfig(retrieve_topk=2),
        progress=False,
    )
    assert (report.new, report.errors) == (1, 0)
    (line,) = (tmp_path / "results.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record["metrics"]["em"] == 1.0 and record["counts"]["llm_calls"] == 3
    assert record["retrievals"][0]["rerank_order"] == [1, 0]
