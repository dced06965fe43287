"""FLARE on scripted signals: the trigger, the masked query, truncation and continuation."""

from __future__ import annotations

import math

import pytest

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs.flare import FLAREConfig, create_flare_graph
from langchain_adaptive_rag.testing import FakeTraceModel, ScriptedResponse
from tests.helpers import flare_script
from tests.helpers.scripted import NO_SHOTS, QUESTION, RecordingRetriever

LOG = math.log


def test_flare_fires_on_the_first_uncertain_sentence() -> None:
    model = FakeTraceModel(
        [
            flare_script.draft(),
            " Anna Berg was born in 1930. More text.",  # regenerated sentence, with docs
            " So the answer is 1930.",  # confident draft: accepted, done
        ]
    )
    retriever = RecordingRetriever()
    result = create_flare_graph(model, retriever, prompts=NO_SHOTS).invoke({"question": QUESTION})
    assert retriever.queries == ["She was in"]  # "born" (0.35) and "1931." (0.1) masked
    (event,) = result["retrievals"]
    assert event["trigger_position"] == 10 and event["trigger_word"] == "1931"  # bare
    assert event["score"] == pytest.approx(0.1) and event["threshold"] == 0.4
    # the regeneration starts after the accepted confident sentence, with the documents
    assert model.prompts[1].endswith("Answer: It was directed by Anna Berg.")
    assert "Context:\n[1]" in model.prompts[1]
    assert "Context:" not in model.prompts[2]  # look-ahead drafts have no documents
    assert result["text"] == (
        " It was directed by Anna Berg. Anna Berg was born in 1930. So the answer is 1930."
    )
    assert result["answer"] == "1930"
    assert result["counts"]["llm_calls"] == 3


def test_flare_mean_rule_of_the_dragin_code() -> None:
    # mean(1 - p) of sentence 2 = (0.1+0.1+0.65+0.1+0.9)/5 = 0.37: fires at theta 0.3 only
    config = FLAREConfig(trigger="mean", theta=0.3, mode="paper")
    model = FakeTraceModel(
        [flare_script.draft(), " Anna Berg was born in 1930.", " So the answer is 1930."]
    )
    result = create_flare_graph(
        model, RecordingRetriever(), config=config, prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    assert result["retrievals"][0]["score"] == pytest.approx(0.37)
    quiet = FakeTraceModel([flare_script.draft(), " So the answer is 1931."])
    config = FLAREConfig(trigger="mean", theta=0.4, mode="paper")
    result = create_flare_graph(
        quiet, RecordingRetriever(), config=config, prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    assert result["retrievals"] == []
    assert result["answer"] == "1931"


def test_flare_confident_answer_never_retrieves() -> None:
    model = FakeTraceModel([" Anna Berg was born in 1931. So the answer is 1931."])
    result = create_flare_graph(model, RecordingRetriever(), prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert result["retrievals"] == [] and result["answer"] == "1931"


def test_fully_masked_sentence_sends_no_query_and_is_kept() -> None:
    # the FLARE code issues only non-empty queries: with every token masked nothing is
    # retrieved and generation goes on from the sentence as drafted
    draft = ScriptedResponse(" Maybe 1931.", tokens=(" Maybe", " 1931."), logprobs=(LOG(0.1),) * 2)
    for mode in ("reference", "paper"):
        model = FakeTraceModel([draft, " So the answer is 1931."])
        retriever = RecordingRetriever()
        graph = create_flare_graph(
            model, retriever, config=FLAREConfig(mode=mode), prompts=NO_SHOTS
        )
        updates = list(graph.stream({"question": QUESTION}, stream_mode="updates"))
        assert retriever.queries == [], mode
        decision = next(u["score_need"] for u in updates if "score_need" in u)["decision"]
        assert decision["retrieve"] is False and "masked" in decision["note"], mode
        assert model.prompts[1].endswith("Answer: Maybe 1931."), mode
        assert updates[-1]["finalize"]["answer"] == "1931", mode


def test_flare_config_is_checked() -> None:
    with pytest.raises(AdaptiveRAGError, match=r"theta must be a probability in \[0, 1\], got 1.5"):
        FLAREConfig(theta=1.5)


def test_a_decision_not_to_retrieve_reports_the_least_probable_token() -> None:
    tokens = (" Anna", " Berg", " was", " born", " in", " 1931.")
    probs = (0.9, 0.8, 0.95, 0.6, 0.9, 0.7)
    draft = ScriptedResponse("".join(tokens), tokens=tokens, logprobs=tuple(LOG(p) for p in probs))
    model = FakeTraceModel([draft, " So the answer is 1931."])
    graph = create_flare_graph(model, RecordingRetriever(), prompts=NO_SHOTS)
    updates = list(graph.stream({"question": QUESTION}, stream_mode="updates"))
    decision = next(u["score_need"] for u in updates if "score_need" in u)
    assert decision["decision"]["score"] == pytest.approx(0.6)  # min p, above theta 0.4
    assert decision["decision"]["threshold"] == 0.4


# -- trigger="mean" as the DRAGIN code (reference mode) -----------------------------------


def test_reference_windows_by_hand() -> None:
    from langchain_adaptive_rag.signals import reference_flare_windows

    # one token more ("It"), and the next window skips it
    tokens = ["Paris", "is", "in", "France", ".", "It", "is", "big", "."]
    assert reference_flare_windows(tokens, ["Paris is in France.", "It is big."]) == [
        (0, 6),
        (6, 9),
    ]
    # the slipping cursor: "Paris is" of the next sentence is found again in this one
    tokens = ["He", "was", "born", "in", "Paris", ".", "Paris", "is", "big", "."]
    assert reference_flare_windows(tokens, ["He was born in Paris.", "Paris is big."]) == [
        (0, 9),
        (9, 10),
    ]


def test_reference_masked_query_by_hand() -> None:
    from langchain_adaptive_rag.signals import reference_masked_query

    # "It" is not in the sentence: masking it overwrites the character before the cursor
    tokens = ["Paris", "is", "in", "France", ".", "It"]
    assert reference_masked_query("Paris is in France.", tokens, [0.99] * 5 + [0.3], 0.1) == (
        "Paris is in France"
    )
    tokens = ["Miguel", "Mor", "ay", "ta", "died", "in", "1", "9", "9", "9", ".", "So"]
    probs = [0.99] * 7 + [0.4, 0.3, 0.5, 0.99, 0.6]
    assert reference_masked_query("Miguel Morayta died in 1999.", tokens, probs, 0.1) == (
        "Miguel Morayta died in 1"
    )
    assert reference_masked_query("Foo bar.", ["Foo", "bar", "."], [0.5] * 3, 0.1).strip() == ""


def _sentences_draft(p_it: float) -> ScriptedResponse:
    tokens = (" Paris", " is", " in", " France", ".", " It", " is", " big", ".")
    probs = [0.99] * 5 + [p_it] + [0.99] * 3
    return ScriptedResponse("".join(tokens), tokens=tokens, logprobs=tuple(LOG(p) for p in probs))


def test_reference_mean_rule_decides_on_the_codes_windows() -> None:
    # p(It) = 0.5: windows [0,6) -> (5 * 0.01 + 0.5) / 6 = 0.0917, [6,9) -> 0.01: no trigger;
    # the sentences themselves: "It is big." -> (0.5 + 3 * 0.01) / 4 = 0.1325 > 0.1
    config = FLAREConfig(trigger="mean", theta=0.1)
    quiet = FakeTraceModel([_sentences_draft(0.5), " So the answer is Paris."])
    result = create_flare_graph(
        quiet, RecordingRetriever(), config=config, prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    assert result["retrievals"] == []
    paper = FLAREConfig(trigger="mean", theta=0.1, mode="paper")
    model = FakeTraceModel([_sentences_draft(0.5), " It is big.", " So the answer is Paris."])
    result = create_flare_graph(model, RecordingRetriever(), config=paper, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert result["retrievals"][0]["score"] == pytest.approx(0.1325)
    # p(It) = 0.3: window 1 -> (5 * 0.01 + 0.7) / 6 = 0.125 > 0.1: the first sentence
    # triggers; "It" overwrites its period in the query
    retriever = RecordingRetriever()
    model = FakeTraceModel(
        [_sentences_draft(0.3), " Paris is in France.", " So the answer is Paris."]
    )
    result = create_flare_graph(model, retriever, config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    (event,) = result["retrievals"]
    assert event["score"] == pytest.approx(0.125) and event["trigger_word"] == "It"
    assert retriever.queries == ["Paris is in France"]
    assert model.prompts[1].endswith("Answer:")  # nothing accepted before sentence 1


def test_reference_all_masked_sentence_retrieves_nothing() -> None:
    draft = ScriptedResponse(" Foo bar.", tokens=(" Foo", " bar", "."), logprobs=(LOG(0.5),) * 3)
    model = FakeTraceModel([draft, " Foo bar.", " So the answer is 1931."])
    retriever = RecordingRetriever()
    config = FLAREConfig(trigger="mean", theta=0.1)
    result = create_flare_graph(model, retriever, config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert retriever.queries == []  # the retriever is never called
    (event,) = result["retrievals"]
    assert event["query"].strip() == "" and event["doc_ids"] == []
    assert "Context:" not in model.prompts[1]


def test_reference_query_is_cut_as_the_codes_retriever_cuts_it() -> None:
    # the code's retriever keeps the query's last max_query_length tokens (a model without
    # a tokenizer: whitespace-separated words)
    retriever = RecordingRetriever()
    model = FakeTraceModel(
        [_sentences_draft(0.3), " Paris is in France.", " So the answer is Paris."]
    )
    config = FLAREConfig(trigger="mean", theta=0.1, query_max_tokens=2)
    create_flare_graph(model, retriever, config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert retriever.queries == ["in France"]
    with pytest.raises(AdaptiveRAGError, match="query_max_tokens must be >= 1, got 0"):
        FLAREConfig(query_max_tokens=0)


@pytest.mark.parametrize(
    ("formulation", "query"),
    [
        ("last_sentence", "It was directed by Anna Berg."),
        ("full_context", f"{QUESTION} It was directed by Anna Berg."),
    ],
)
def test_timing_only_asks_from_the_context_before_the_uncertain_sentence(
    formulation: str, query: str
) -> None:
    # the DRAGIN paper's Table 4: FLARE's trigger, a query shared by every method
    model = FakeTraceModel(
        [flare_script.draft(), " Anna Berg was born in 1930.", " So the answer is 1930."]
    )
    retriever = RecordingRetriever()
    config = FLAREConfig(query_formulation=formulation)  # type: ignore[arg-type]
    result = create_flare_graph(model, retriever, config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert retriever.queries == [query]
    assert result["retrievals"][0]["trigger_word"] == "1931"  # the same trigger
