"""DRAGIN on scripted signals: RIND trigger, truncation, QFS query, both attention modes."""

from __future__ import annotations

import numpy as np
import pytest

from langchain_adaptive_rag.errors import AdaptiveRAGError, AttentionUnavailableError
from langchain_adaptive_rag.graphs.dragin import DRAGINConfig, create_dragin_graph
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.testing import FakeTraceModel, ScriptedResponse
from tests.unit_tests.test_fixed_graphs import QUESTION, RecordingRetriever

NO_SHOTS = QAPrompts(exemplars=())
DRAFT_TOKENS = (
    " Blue", " Harbour", " was", " directed", " by", " Anna", " Berg.",
    " She", " was", " born", " in", " 1931.",
)  # fmt: skip
QFS_WEIGHTS = {"Anna": 0.3, "Berg.": 0.25, "born": 0.2, "director": 0.15, "Harbour": 0.1}


def _draft(entropy_1931: float = 3.0) -> ScriptedResponse:
    entropies = (0.1,) * 11 + (entropy_1931,)
    return ScriptedResponse("".join(DRAFT_TOKENS), tokens=DRAFT_TOKENS, entropies=entropies)


def _qfs_attention(pieces: list[str]) -> np.ndarray:
    """Uniform causal, except the row predicting the last piece, which is scripted."""
    size = len(pieces)
    rows = np.tril(np.ones((size, size)))
    rows = rows / rows.sum(axis=1, keepdims=True)
    if size > 1 and pieces[0].strip() == "When" and pieces[-1].strip() == "1931.":
        row = np.zeros(size)
        for i, piece in enumerate(pieces[:-1]):
            row[i] = QFS_WEIGHTS.get(piece.strip(), 0.0)
            if piece.strip() == "born" and i < 10:  # only the answer's "born", not the question's
                row[i] = 0.0
        rows[size - 2] = row / row.sum()
    return rows[None]


def _model(*responses: ScriptedResponse | str) -> FakeTraceModel:
    return FakeTraceModel(list(responses), forward_attention_fn=_qfs_attention)


def test_rind_triggers_and_qfs_builds_the_query() -> None:
    model = _model(_draft(), " Anna Berg was born in 1930. Extra.", " So the answer is 1930.")
    retriever = RecordingRetriever()
    config = DRAGINConfig(query_top_n=3)
    result = create_dragin_graph(model, retriever, config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    # reference attention (one uniform causal head): a(i) = max_j A[j, i] = 1 / (i + 1)
    a = 1.0 / np.arange(1, 13)
    sentence_two = a[7:12]
    expected = 5 * sentence_two[-1] / sentence_two.sum() * 3.0
    (event,) = result["retrievals"]
    assert event["trigger_word"] == "1931." and event["trigger_position"] == 11
    assert event["score"] == pytest.approx(expected)
    assert event["threshold"] == 1.0
    # QFS: top 3 content words by the trigger's attention, in their original order
    assert retriever.queries == ["Anna Berg. born"]
    assert event["query"] == "Anna Berg. born"
    # forward passes: the draft alone (RIND), question + answer so far + trigger (QFS),
    # then the next draft alone (RIND)
    assert model.attention_texts == [
        "".join(DRAFT_TOKENS),
        f"{QUESTION} Blue Harbour was directed by Anna Berg. She was born in 1931.",
        " So the answer is 1930.",
    ]
    # truncation before the triggering sentence; regeneration with documents, first sentence
    assert model.prompts[1].endswith("Answer: Blue Harbour was directed by Anna Berg.")
    assert "Context:\n[1]" in model.prompts[1] and "Context:" not in model.prompts[2]
    assert result["text"] == (
        " Blue Harbour was directed by Anna Berg. Anna Berg was born in 1930."
        " So the answer is 1930."
    )
    assert result["answer"] == "1930"


def test_low_entropy_draft_is_accepted_without_retrieval() -> None:
    model = _model(" Anna Berg was born in 1931. So the answer is 1931.")
    result = create_dragin_graph(model, RecordingRetriever(), prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert result["retrievals"] == [] and result["answer"] == "1931"


def test_threshold_decides() -> None:
    model = _model(_draft(entropy_1931=1.0), " So the answer is 1931.")
    # s(1931.) = 5 * (1/12) / sum * 1.0 = 0.816: below theta 1.0, above theta 0.8
    result = create_dragin_graph(model, RecordingRetriever(), prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert result["retrievals"] == []
    model = _model(
        _draft(entropy_1931=1.0), " Anna Berg was born in 1930.", " So the answer is 1930."
    )
    result = create_dragin_graph(
        model, RecordingRetriever(), config=DRAGINConfig(theta=0.8), prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    assert len(result["retrievals"]) == 1


def test_truncate_at_token_keeps_the_sentence_prefix() -> None:
    model = _model(_draft(), " 1930.", " So the answer is 1930.")
    config = DRAGINConfig(truncate_at="token", query_top_n=3)
    create_dragin_graph(model, RecordingRetriever(), config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert model.prompts[1].endswith(
        "Answer: Blue Harbour was directed by Anna Berg. She was born in"
    )


def test_inline_mode_uses_the_captured_rows() -> None:
    entropies = (0.1,) * 9 + (3.0, 0.1, 0.1)  # "born" is uncertain
    draft = ScriptedResponse("".join(DRAFT_TOKENS), tokens=DRAFT_TOKENS, entropies=entropies)
    model = _model(draft, " Anna Berg was born in 1930.", " So the answer is 1930.")
    config = DRAGINConfig(attention_mode="inline", query_top_n=3)
    result = create_dragin_graph(
        model, RecordingRetriever(), config=config, prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    # no separate pass over the draft: the only forward pass is QFS's
    assert model.attention_texts == [
        f"{QUESTION} Blue Harbour was directed by Anna Berg. She was born"
    ]
    # inline a(i) = max over later rows of the uniform causal rows = 1 / (i + 2); last: 0
    a = np.append(1.0 / np.arange(2, 13), 0.0)
    expected = 5 * a[9] / a[7:12].sum() * 3.0
    (event,) = result["retrievals"]
    assert event["trigger_word"] == "born" and event["trigger_position"] == 9
    assert event["score"] == pytest.approx(expected)


def test_needs_attention() -> None:
    with pytest.raises(AttentionUnavailableError, match='attn_implementation="eager"'):
        create_dragin_graph(FakeTraceModel([], attention_available=False), RecordingRetriever())


def test_config_is_checked() -> None:
    with pytest.raises(AdaptiveRAGError, match="query_top_n must be >= 1, got 0"):
        DRAGINConfig(query_top_n=0)


def test_a_decision_not_to_retrieve_reports_its_nearest_score() -> None:
    model = _model(_draft(entropy_1931=1.0), " So the answer is 1931.")
    graph = create_dragin_graph(model, RecordingRetriever(), prompts=NO_SHOTS)
    updates = [u for u in graph.stream({"question": QUESTION}, stream_mode="updates")]
    (decision,) = [u["score_need"] for u in updates if "score_need" in u][:1]
    assert decision["route"] in {"draft", "finalize"}
    pending = decision["pending"]
    # the highest RIND of the draft (s(1931.) = 0.816) against theta 1.0, no trigger
    assert pending["score"] == pytest.approx(0.816, abs=1e-3)
    assert pending["threshold"] == 1.0 and pending["trigger_position"] is None
    draft = next(u["draft"] for u in updates if "draft" in u)
    assert len(draft["draft_attention"]) == len(DRAFT_TOKENS)
