"""ETC on scripted signals: the entropy-trend trigger, truncation at the word, the query,
the code's loop (reference) and the paper's (paper)."""

from __future__ import annotations

import pytest

from langchain_adaptive_rag.errors import AdaptiveRAGError, AttentionUnavailableError
from langchain_adaptive_rag.graphs.etc import ETCConfig, create_etc_graph
from langchain_adaptive_rag.testing import FakeTraceModel, ScriptedResponse
from tests.helpers.scripted import NO_SHOTS, QUESTION, RecordingRetriever

DRAFT = (
    " Blue", " Harbour", " was", " directed", " by", " Anna", " Berg", ".",
    " She", " was", " born", " in", " 1931", ".",
)  # fmt: skip
ENTROPY = (1.0, 0.2, 0.1, 1.0, 0.1, 0.2, 0.2, 0.1, 0.1, 0.1, 0.2, 0.1, 3.0, 0.1)
# Content words (stop-word list): Blue, Harbour, directed, Anna, Berg, born, 1931.
#   ΔH:  Harbour -0.8, directed 0.8, Anna -0.8, Berg 0, born 0, 1931 2.8
#   Δ²H: directed 1.6, Anna -1.6, Berg 0.8, born 0.8, 1931 3.6
#   M (raw memory): 1.6, -1.44, 0.7467, 0.8, 3.3443 (1931: E = 1.04, w = 0.24 / 2.8)
# Attention: one uniform causal head, so token t's largest attention to a draft word is
# 1 / (t + 1); in "She was born in 1931." (tokens 8-13) 1931's share is
# (1/13) * 6 / (1/9 + ... + 1/14) = 0.86478, its score 3.3440 * 0.86478 = 2.8918 > 1.3;
# in the first sentence "directed" scores 1.6 * (1/4) * 8 / (1 + ... + 1/8) = 1.1775 < 1.3.
M_1931 = 0.90857142857 * 3.6 + (1 - 0.90857142857) * 0.8
SHARE_1931 = (1 / 13) * 6 / sum(1 / t for t in range(9, 15))


def draft() -> ScriptedResponse:
    return ScriptedResponse("".join(DRAFT), tokens=DRAFT, entropies=ENTROPY)


def model() -> FakeTraceModel:
    return FakeTraceModel([draft(), " 1930. Extra.", " So the answer is 1930."])


@pytest.mark.parametrize("mode", ["reference", "paper"])
def test_the_entropy_trend_fires_at_the_word_and_the_text_before_it_is_kept(mode: str) -> None:
    chat = model()
    retriever = RecordingRetriever()
    config = ETCConfig(query_top_n=3, spacy_model=None, mode=mode)  # type: ignore[arg-type]
    result = create_etc_graph(chat, retriever, config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    (event,) = result["retrievals"]
    assert event["trigger_word"] == "1931" and event["trigger_position"] == 12
    assert event["score"] == pytest.approx(M_1931 * SHARE_1931, rel=1e-6)
    assert event["score"] == pytest.approx(2.8918, abs=1e-4)
    assert event["threshold"] == 1.3
    # the query: the triggering row's three most attended content words (a tie: the
    # earliest), in text order; no tokenizer here, so only the draft's own words
    assert retriever.queries == ["Blue Harbour directed"]
    # regenerated with the documents from the text before the trigger word
    kept = " Blue Harbour was directed by Anna Berg. She was born in"
    assert "Context:\n[1]" in chat.prompts[1] and chat.prompts[1].endswith(f"Answer:{kept}")
    text = f"{kept} 1930."
    assert chat.prompts[2].endswith(f"Answer:{text}") and "Context:" not in chat.prompts[2]
    assert result["text"] == f"{text} So the answer is 1930."
    assert result["answer"] == "1930"
    assert result["counts"]["retrievals"] == 1 and result["counts"]["llm_calls"] == 3


def test_the_draft_words_carry_the_trend_and_the_pictures_read_their_scores() -> None:
    graph = create_etc_graph(model(), RecordingRetriever(), config=ETCConfig(spacy_model=None))
    drafts = [
        u["draft"]
        for u in graph.stream({"question": QUESTION}, stream_mode="updates")
        if "draft" in u
    ]
    words = drafts[0]["draft_words"]
    assert [w["text"] for w in words][:3] == ["Blue", "Harbour", "was"]
    trend = drafts[0]["draft_trend"]
    entropy, first, second, smoothed, _ = (list(v) for v in zip(*trend, strict=True))
    assert entropy[12] == pytest.approx(3.0)
    assert first[3] == pytest.approx(0.8) and second[3] == pytest.approx(1.6)
    assert smoothed[5] == pytest.approx(-1.44) and smoothed[12] == pytest.approx(M_1931)
    assert words[12]["score"] == pytest.approx(M_1931 * SHARE_1931, rel=1e-6)
    assert drafts[0]["draft_sentences"] == [[0, 8], [8, 14]]


def test_below_theta_the_draft_is_the_answer() -> None:
    chat = FakeTraceModel([draft(), " 1931."])
    graph = create_etc_graph(
        chat, RecordingRetriever(), config=ETCConfig(theta=3.0, spacy_model=None), prompts=NO_SHOTS
    )
    updates = list(graph.stream({"question": QUESTION}, stream_mode="updates"))
    record = next(u["score_need"] for u in updates if "score_need" in u)["decision"]
    # the nearest score to the threshold: 1931's
    assert record["retrieve"] is False and record["threshold"] == 3.0
    assert record["score"] == pytest.approx(M_1931 * SHARE_1931, rel=1e-6)
    # reference mode: the draft joins the (empty) text stripped, as the code's text block
    assert chat.prompts[1].endswith(
        "Answer:Blue Harbour was directed by Anna Berg. She was born in 1931. So the answer is"
    )


def test_reference_mode_does_not_stop_at_the_answer_marker_until_the_code_would() -> None:
    # With no end-of-sequence token, the code drafts again after an answer that did not
    # pass the length limit (the prompt here is short); paper mode stops at the marker.
    replies = [
        ScriptedResponse(
            " So the answer is 1930.\n",
            tokens=(" So", " the", " answer", " is", " 1930", ".", "\n"),
        ),
        ScriptedResponse("\n", tokens=("\n",)),
    ]
    reference = FakeTraceModel(list(replies))
    create_etc_graph(
        reference, RecordingRetriever(), config=ETCConfig(spacy_model=None), prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    paper = FakeTraceModel(list(replies))
    create_etc_graph(
        paper,
        RecordingRetriever(),
        config=ETCConfig(spacy_model=None, mode="paper"),
        prompts=NO_SHOTS,
    ).invoke({"question": QUESTION})
    assert len(reference.prompts) == 2 and len(paper.prompts) == 1


def test_the_draft_reads_the_configured_layer() -> None:
    chat = FakeTraceModel([draft(), " 1931."])
    config = ETCConfig(theta=3.0, spacy_model=None, attention_layer=2)
    create_etc_graph(chat, RecordingRetriever(), config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert chat.calls[0]["attention_layer"] == 2


def test_needs_attention_and_checks_its_config() -> None:
    with pytest.raises(AttentionUnavailableError, match='attn_implementation="eager"'):
        create_etc_graph(FakeTraceModel([], attention_available=False), RecordingRetriever())
    with pytest.raises(AdaptiveRAGError, match="query_top_n must be >= 1, got 0"):
        ETCConfig(query_top_n=0)


def test_the_pictures_name_the_etc_score_and_mark_its_trigger() -> None:
    from langchain_adaptive_rag.visualize import record_run, tokens_html

    graph = create_etc_graph(
        model(), RecordingRetriever(), config=ETCConfig(spacy_model=None), prompts=NO_SHOTS
    )
    record = record_run(graph, QUESTION)
    first = record.rounds[0]
    assert [t.rind for t in first.tokens][12] == pytest.approx(M_1931 * SHARE_1931, rel=1e-6)
    html = tokens_html(record)
    assert "ETC score M·a" in html and "RIND" not in html
    assert "1931" in html and "θ = 1.3" in html
