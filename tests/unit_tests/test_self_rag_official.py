"""Self-RAG against the official short-form code, computed independently.

The official side below restates, line by line, what AkariAsai/self-rag's
``retrieval_lm/run_short_form.py`` (commit 1e509176) does: its post-processing of a
prediction, its segment score with the weights its ``generate`` passes, and, where its
``threshold=None`` path fails, the paper's first-token decision. The package's side runs
through the public builder on the same scripted model.
"""

from __future__ import annotations

import math

import pytest

from langchain_adaptive_rag import SelfRAGConfig, create_bm25_retriever, create_self_rag_graph
from langchain_adaptive_rag.graphs.reflection import short_form_answer
from langchain_adaptive_rag.testing import FakeTraceModel, ScriptedResponse
from tests.helpers.self_rag_script import IDS
from tests.helpers.self_rag_script import draft as _draft

QUESTION = "Who directed Blue Harbour?"
PASSAGES = ["Blue Harbour is a 1962 film directed by Anna Berg.", "Blue Harbour is a song."]
OFFICIAL_CONTROL_TOKENS = [  # retrieval_lm/utils.py, control_tokens
    "[Fully supported]",
    "[Partially supported]",
    "[No support / Contradictory]",
    "[No Retrieval]",
    "[Retrieval]",
    "[Irrelevant]",
    "[Relevant]",
    "<paragraph>",
    "</paragraph>",
    "[Utility:1]",
    "[Utility:2]",
    "[Utility:3]",
    "[Utility:4]",
    "[Utility:5]",
]


def official_prediction(generated: str) -> str:
    """A no-retrieval prediction as run_short_form.py reads it.

    ``postprocess_answer_option_conditioned`` (lines 37-49): each control token, ``</s>``,
    newlines and ``<|endoftext|>`` replaced by nothing; then ``main`` (line 265): a
    prediction whose first character is ``#`` or ``:`` loses it.
    """
    answer = generated
    for token in OFFICIAL_CONTROL_TOKENS:
        answer = answer.replace(token, "")
    answer = answer.replace("</s>", "").replace("\n", "").replace("<|endoftext|>", "")
    if answer[0] == "#" or answer[0] == ":":
        answer = answer[1:]
    return answer


@pytest.mark.parametrize(
    "generated",
    [
        "Anna Berg[Utility:5]</s>",
        ": 1931[Utility:4]",
        "#1931",
        "Anna\nBerg[Utility:5]",
        "1931<|endoftext|>",
    ],
)
def test_the_answer_is_post_processed_as_the_official_evaluation(generated: str) -> None:
    # the official prediction keeps surrounding spaces, which no metric reads
    assert short_form_answer(generated) == official_prediction(generated).strip()
    model = FakeTraceModel([_draft(0.05, 0.95), generated], vocabulary=IDS)
    result = _graph(model).invoke({"question": QUESTION})
    assert result["retrievals"] == []  # answered after [No Retrieval]
    assert result["answer"] == official_prediction(generated).strip()


def official_segment_score(
    token_logprobs: list[float],
    relevant: float,
    supports: tuple[float, float, float],
    utility5: float,
) -> float:
    """``call_model_rerank_w_scores_batch`` (lines 51-180) with ``use_seqscore`` and the
    weights ``main``'s ``generate`` passes (line 245: ``w_rel=1.0, w_sup=1.0,
    w_use=0.5``; ``--w_use`` never reaches it).

    The sequence score is ``exp(cumulative logprob / tokens)``; relevance the share of
    ``[Relevant]``; grounding full + 0.5 partial shares; utility the five shares weighted
    -1, -0.5, 0, 0.5, 1 (here all mass on ``[Utility:5]``).
    """
    seq_score = sum(token_logprobs) / max(len(token_logprobs), 1)
    relevance_score = relevant / (relevant + (1 - relevant))
    full, partial, none = supports
    ground_score = full / (full + partial + none) + 0.5 * (partial / (full + partial + none))
    utility_score = 1.0 * utility5 / utility5
    return math.exp(seq_score) + 1.0 * relevance_score + 1.0 * ground_score + 0.5 * utility_score


def _segment(text: str, relevant: float) -> ScriptedResponse:
    return ScriptedResponse(
        f"[Relevant]{text}[Fully supported][Utility:5]",
        tokens=("[Relevant]", text, "[Fully supported]", "[Utility:5]"),
        token_ids=(103, 9, 105, 112),
        token_logprobs=(
            {103: math.log(relevant), 104: math.log(1 - relevant)},
            {},
            {105: math.log(0.6), 106: math.log(0.3), 107: math.log(0.1)},
            {112: 0.0, 111: -100.0, 110: -100.0, 109: -100.0, 108: -100.0},
        ),
    )


def _graph(model: FakeTraceModel, **settings: object):  # type: ignore[no-untyped-def]
    config = SelfRAGConfig(retrieve_topk=2, **settings)  # type: ignore[arg-type]
    return create_self_rag_graph(model, create_bm25_retriever(PASSAGES), config=config)


def test_segments_score_as_the_official_code_with_its_weights() -> None:
    model = FakeTraceModel(
        [_draft(0.6, 0.2), _segment(" Anna Berg", 0.9), _segment(" a song", 0.3)], vocabulary=IDS
    )
    updates = list(_graph(model).stream({"question": QUESTION}, stream_mode="updates"))
    segments = next(u["rerank"]["segments"] for u in updates if "rerank" in u)
    # every scripted token is certain (log-probability 0): the sequence score is 1
    expected = [
        official_segment_score([0.0] * 4, relevant, (0.6, 0.3, 0.1), 1.0) for relevant in (0.9, 0.3)
    ]
    assert [s["score"] for s in segments] == pytest.approx(expected, rel=1e-6)


def paper_decides_to_retrieve(first_token_id: int) -> bool:
    """The paper's decision without a threshold: the model's first token is [Retrieval]."""
    return first_token_id == IDS["[Retrieval]"]


@pytest.mark.parametrize("ids", [(101, 8), (7, 101)])
def test_without_a_threshold_the_first_token_decides(ids: tuple[int, int]) -> None:
    model = FakeTraceModel(
        [_draft(0.01, 0.99, ids=ids), _segment(" a", 0.5), _segment(" b", 0.6), " Anna Berg"],
        vocabulary=IDS,
    )
    result = _graph(model, threshold=None).invoke({"question": QUESTION})
    assert (result["counts"]["retrievals"] == 1) is paper_decides_to_retrieve(ids[0])
