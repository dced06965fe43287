"""DRAGIN on scripted signals: RIND trigger, truncation, QFS query, both attention modes."""

from __future__ import annotations

import numpy as np
import pytest

from langchain_adaptive_rag.errors import AdaptiveRAGError, AttentionUnavailableError
from langchain_adaptive_rag.graphs.dragin import DRAGINConfig, create_dragin_graph
from langchain_adaptive_rag.testing import FakeTraceModel, ScriptedResponse
from tests.helpers import dragin_script
from tests.helpers.scripted import NO_SHOTS, QUESTION, RecordingRetriever


@pytest.mark.parametrize("mode", ["reference", "paper"])
def test_rind_triggers_and_qfs_builds_the_query(mode: str) -> None:
    model = dragin_script.model(
        dragin_script.draft(), " Anna Berg was born in 1930. Extra.", " So the answer is 1930."
    )
    retriever = RecordingRetriever()
    config = DRAGINConfig(query_top_n=3, mode=mode)  # type: ignore[arg-type]
    result = create_dragin_graph(model, retriever, config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    # reference attention (one uniform causal head): a(i) = max_j A[j, i] = 1 / (i + 1)
    a = 1.0 / np.arange(1, 13)
    sentence_two = a[7:12]
    expected = 5 * sentence_two[-1] / sentence_two.sum() * 3.0
    (event,) = result["retrievals"]
    assert event["trigger_word"] == "1931" and event["trigger_position"] == 11  # bare
    assert event["score"] == pytest.approx(expected)
    assert event["threshold"] == 1.0
    # QFS: top 3 content words by the trigger's attention, in their original order
    assert retriever.queries == ["Anna Berg. born"]
    assert event["query"] == "Anna Berg. born"
    # forward passes: the draft alone (RIND), the QFS text, then the next draft alone.
    # QFS text, reference: question + " " + text + " " + earlier sentences + " " + the
    # triggering sentence's words (here text is empty: two spaces); paper: stripped parts
    # joined, up to the triggering word.
    qfs_text = {
        "reference": f"{QUESTION}  Blue Harbour was directed by Anna Berg. She was born in 1931.",
        "paper": f"{QUESTION} Blue Harbour was directed by Anna Berg. She was born in 1931.",
    }[mode]
    assert model.attention_texts == [
        "".join(dragin_script.DRAFT_TOKENS),
        qfs_text,
        " So the answer is 1930.",
    ]
    # truncation before the triggering sentence; regeneration with documents, first sentence
    assert model.prompts[1].endswith("Answer: Blue Harbour was directed by Anna Berg.")
    assert "Context:\n[1]" in model.prompts[1] and "Context:" not in model.prompts[2]
    # reference: the code's loop joins stripped pieces with single spaces, generates the
    # whole budget with no stop string; paper: tokens as generated, stopped at a newline
    text = "Blue Harbour was directed by Anna Berg. Anna Berg was born in 1930."
    assert model.prompts[2].endswith(f"Answer: {text}")
    assert (
        result["text"]
        == {
            "reference": f"{text} So the answer is 1930.",
            "paper": f" {text} So the answer is 1930.",
        }[mode]
    )
    stops = {"reference": [(), (), ()], "paper": [("\n",)] * 3}[mode]
    assert [call["stop"] for call in model.calls] == stops
    # paper: the budget left (7 tokens accepted before the trigger, then 6 more)
    budgets = {"reference": [64, 64, 64], "paper": [64, 64 - 7, 64 - 13]}[mode]
    assert [call["max_new_tokens"] for call in model.calls] == budgets
    assert result["answer"] == "1930"


def test_low_entropy_draft_is_accepted_without_retrieval() -> None:
    model = dragin_script.model(" Anna Berg was born in 1931. So the answer is 1931.")
    result = create_dragin_graph(model, RecordingRetriever(), prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert result["retrievals"] == [] and result["answer"] == "1931"


def test_threshold_decides() -> None:
    model = dragin_script.model(dragin_script.draft(entropy_1931=1.0), " So the answer is 1931.")
    # s(1931.) = 5 * (1/12) / sum * 1.0 = 0.816: below theta 1.0, above theta 0.8
    result = create_dragin_graph(model, RecordingRetriever(), prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert result["retrievals"] == []
    model = dragin_script.model(
        dragin_script.draft(entropy_1931=1.0),
        " Anna Berg was born in 1930.",
        " So the answer is 1930.",
    )
    result = create_dragin_graph(
        model, RecordingRetriever(), config=DRAGINConfig(theta=0.8), prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    assert len(result["retrievals"]) == 1


def test_truncate_at_token_keeps_the_sentence_prefix() -> None:
    model = dragin_script.model(dragin_script.draft(), " 1930.", " So the answer is 1930.")
    config = DRAGINConfig(truncate_at="token", query_top_n=3, mode="paper")
    create_dragin_graph(model, RecordingRetriever(), config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert model.prompts[1].endswith(
        "Answer: Blue Harbour was directed by Anna Berg. She was born in"
    )


def test_inline_mode_uses_the_captured_rows() -> None:
    entropies = (0.1,) * 9 + (3.0, 0.1, 0.1)  # "born" is uncertain
    draft = ScriptedResponse(
        "".join(dragin_script.DRAFT_TOKENS), tokens=dragin_script.DRAFT_TOKENS, entropies=entropies
    )
    model = dragin_script.model(draft, " Anna Berg was born in 1930.", " So the answer is 1930.")
    config = DRAGINConfig(attention_mode="inline", query_top_n=3)
    result = create_dragin_graph(
        model, RecordingRetriever(), config=config, prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    # no separate pass over the draft: the only forward pass is QFS's (the whole sentence)
    assert model.attention_texts == [
        f"{QUESTION}  Blue Harbour was directed by Anna Berg. She was born in 1931."
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
    model = dragin_script.model(dragin_script.draft(entropy_1931=1.0), " So the answer is 1931.")
    graph = create_dragin_graph(model, RecordingRetriever(), prompts=NO_SHOTS)
    updates = [u for u in graph.stream({"question": QUESTION}, stream_mode="updates")]
    (decision,) = [u["score_need"] for u in updates if "score_need" in u][:1]
    assert decision["route"] in {"draft", "finalize"}
    record = decision["decision"]
    # the highest RIND of the draft (s(1931.) = 0.816) against theta 1.0, no trigger
    assert record["score"] == pytest.approx(0.816, abs=1e-3)
    assert record["threshold"] == 1.0 and record["trigger_position"] is None
    assert record["retrieve"] is False and record["step"] == 1
    draft = next(u["draft"] for u in updates if "draft" in u)
    assert len(draft["draft_attention"]) == len(dragin_script.DRAFT_TOKENS)


# -- reference mode (the DRAGIN code) against the paper reading -----------------------------


def test_reference_words_keep_the_token_after_a_newline() -> None:
    from langchain_adaptive_rag.signals import merge_tokens_into_words

    pieces = [" Miguel", " Mor", "ay", "ta", " died", " in", " ", "1", "9", "9", "9", "."]
    pieces += ["\n", "Question", ":"]
    reference = merge_tokens_into_words(pieces, split_after_newline=False)
    assert [(w.start, w.end, w.text) for w in reference] == [
        (0, 1, "Miguel"),
        (1, 4, "Morayta"),
        (4, 5, "died"),
        (5, 6, "in"),
        (6, 12, "1999."),
        (12, 15, "Question:"),  # the newline's word
    ]
    paper = merge_tokens_into_words(pieces)
    assert [(w.start, w.end) for w in paper][-2:] == [(12, 13), (13, 15)]


def test_reference_qfs_rows_are_renormalised_before_the_word() -> None:
    from langchain_adaptive_rag.signals import Word, reference_qfs_weights

    words = [Word(0, 1, ""), Word(1, 2, "Paris"), Word(2, 3, "France"), Word(3, 5, "Lyon")]
    attention = np.zeros((5, 5))
    attention[2, :3] = [0.2, 0.5, 0.3]  # predicts the word's first token
    attention[3, :4] = [0.05, 0.0, 0.15, 0.8]  # predicts its second: 0.2 before the word
    # (row 2 + row 3[:3] / 0.2) / 2 = [0.225, 0.25, 0.525]: France; raw rows give Paris
    np.testing.assert_allclose(
        reference_qfs_weights(attention, words, [3]), [0.225, 0.25, 0.525, 0.0]
    )
    assert np.isnan(reference_qfs_weights(attention, words, [])).all()


HIT_DRAFT = (" Miguel", " Morayta", " died", " in", " 1999.")


def _hit_model(entropies: tuple[float, ...], *rest: str) -> FakeTraceModel:
    draft = ScriptedResponse("".join(HIT_DRAFT), tokens=HIT_DRAFT, entropies=entropies)
    return dragin_script.model(draft, *rest)


def test_reference_qfs_by_hand_excludes_the_triggering_words_by_position() -> None:
    # RIND over the draft (uniform causal: a = 1, 1/2, 1/3, 1/4, 1/5; sum 2.2833):
    # s = 5 a / sum * H -> Miguel 6.57, Morayta 3.28, 1999. 1.31 trigger (theta 1)
    model = _hit_model((3.0, 3.0, 0.01, 0.01, 3.0), " He died in 1999.", " So the answer is 1999.")
    retriever = RecordingRetriever()
    question = "Did Miguel direct Hypocrite?"
    config = DRAGINConfig(query_top_n=3, spacy_model=None)  # content words by stop-word list
    create_dragin_graph(model, retriever, config=config, prompts=NO_SHOTS).invoke(
        {"question": question}
    )
    # QFS text: question + " " + "" + " " + "" + " " + sentence words; its words:
    # 0 Did 1 Miguel 2 direct 3 Hypocrite? | 4 Miguel 5 Morayta 6 died 7 in 8 1999.
    assert model.attention_texts[1] == f"{question}   Miguel Morayta died in 1999."
    # targets 4, 5, 8: rows 3, 4, 7 cut before the word, renormalised: 1/4, 1/5, 1/8 each;
    # words 0-3 get (1/4 + 1/5 + 1/8) / 3 = 0.1917, word 4 (1/5 + 1/8) / 3, 5-7 1/24.
    # Excluded by position: the question's "Miguel" stays and ties with "direct".
    assert retriever.queries == ["Miguel direct Hypocrite?"]
    paper = _hit_model((3.0, 3.0, 0.01, 0.01, 3.0), " He died in 1999.", " So the answer is 1999.")
    retriever = RecordingRetriever()
    create_dragin_graph(
        paper, retriever, config=DRAGINConfig(query_top_n=3, mode="paper"), prompts=NO_SHOTS
    ).invoke({"question": question})
    assert "Miguel" not in retriever.queries[0].split()  # paper: excluded by text


def test_reference_filters_content_words_after_the_threshold() -> None:
    # s("in") = 5 * (1/4) / 2.2833 * 4.0 = 2.19 > 1, every other word below: a stop word
    # triggers (reference), then leaves no triggering word: QFS takes content words in text
    # order; the paper reading scores the stop word 0 and does not retrieve.
    entropies = (0.01, 0.01, 0.01, 4.0, 0.01)
    model = _hit_model(entropies, " He died in 1999.", " So the answer is 1999.")
    retriever = RecordingRetriever()
    config = DRAGINConfig(query_top_n=3, spacy_model=None)  # content words by stop-word list
    result = create_dragin_graph(model, retriever, config=config, prompts=NO_SHOTS).invoke(
        {"question": "Did Miguel direct Hypocrite?"}
    )
    (event,) = result["retrievals"]
    assert event["trigger_word"] == "in" and event["score"] == pytest.approx(
        5 * 0.25 / (1 + 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5) * 4.0
    )
    assert retriever.queries == ["Miguel direct Hypocrite?"]
    quiet = _hit_model(entropies, " So the answer is 1999.")
    result = create_dragin_graph(
        quiet, RecordingRetriever(), config=DRAGINConfig(mode="paper"), prompts=NO_SHOTS
    ).invoke({"question": "Did Miguel direct Hypocrite?"})
    assert result["retrievals"] == []


def test_pos_content_words_are_substring_matches() -> None:
    from langchain_adaptive_rag.graphs.pos import content_flags

    def tagger(text: str) -> list[tuple[str, str]]:
        tags = {"Miguel": "PROPN", "died": "VERB", "in": "ADP", "1999": "NUM", ".": "PUNCT"}
        return [(t, tags.get(t, "X")) for t in text.replace(".", " .").split()]

    words = ["Miguel", "died", "in", "1999.", ""]
    assert content_flags(words, "Miguel died in 1999.", tagger) == [True, True, False, True, False]
    assert content_flags(words, "Miguel died in 1999.", None) == [True, True, False, True, False]


# -- the DRAGIN code's loop (reference mode) ------------------------------------------------


def test_reference_sentence_spans_by_hand() -> None:
    from langchain_adaptive_rag.signals import reference_sentence_spans

    words = ["Anna", "Berg", "was", "born.", "She", "died.", "So", "the", "answer."]
    sentences = ["Anna Berg was born.", "She died.", "So the answer."]
    # each sentence ends at the first i whose joined words[first:i] contain it; the last
    # sentence takes every word left
    assert reference_sentence_spans(sentences, words) == [(0, 4), (4, 6), (6, 9)]
    # a sentence never found: an empty range, the next starts at the same word
    assert reference_sentence_spans(["Anna  Berg", "was born.", "rest"], words) == [
        (0, 0),
        (0, 4),
        (4, 9),
    ]
    # the search stops before the last word, so a non-last sentence ending there is lost
    assert reference_sentence_spans(["Anna Berg was", "born."], words[:3]) == [
        (0, 0),
        (0, 3),
    ]
    assert reference_sentence_spans([], words) == []


def test_reference_loop_keeps_the_codes_prompt_spacing() -> None:
    # a first draft without a trigger or an answer (its generation ended early) is
    # appended as "".strip() + " " + draft: the text starts with a space, and the next
    # prompt joins case and text with another one
    model = dragin_script.model(" Anna Berg directed it.", " So the answer is 1931.")
    result = create_dragin_graph(model, RecordingRetriever(), prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert model.prompts[0].endswith("\nAnswer:")
    assert model.prompts[1].endswith("\nAnswer:  Anna Berg directed it.")
    assert result["text"] == "Anna Berg directed it. So the answer is 1931."
    assert result["answer"] == "1931" and result["retrievals"] == []


def test_both_modes_score_the_sentence_that_gives_the_answer() -> None:
    # the DRAGIN code's modifier scores every sentence; "the answer is" only ends its loop
    tokens = (" Anna", " Berg", " directed", " it.", " So", " the", " answer", " is", " 1931.")
    entropies = (0.1,) * 8 + (5.0,)  # only the answer sentence is uncertain
    draft = ScriptedResponse("".join(tokens), tokens=tokens, entropies=entropies)
    for mode in ("reference", "paper"):
        model = dragin_script.model(draft, " So the answer is 1930.", " So the answer is 1930.")
        config = DRAGINConfig(mode=mode)  # type: ignore[arg-type]
        result = create_dragin_graph(
            model, RecordingRetriever(), config=config, prompts=NO_SHOTS
        ).invoke({"question": QUESTION})
        assert len(result["retrievals"]) == 1, mode
        assert result["retrievals"][0]["trigger_word"] == "1931", mode
        assert result["answer"] == "1930", mode


def test_reference_loop_ends_on_the_text_token_count() -> None:
    # generate_max_length 12 (the draft's length): after the regenerated sentence the text
    # has 13 words (> 12), so the code's loop ends there, with no answer yet (finalize
    # forces one)
    model = dragin_script.model(dragin_script.draft(), " Anna Berg was born in 1930.", " 1930.")
    config = DRAGINConfig(generate_max_length=12, query_top_n=3)
    result = create_dragin_graph(
        model, RecordingRetriever(), config=config, prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    assert len(result["retrievals"]) == 1
    assert result["text"].startswith(
        "Blue Harbour was directed by Anna Berg. Anna Berg was born in 1930. So the answer is"
    )
    assert result["answer"] == "1930"


def test_reference_reads_the_answer_before_the_next_made_up_question() -> None:
    # the DRAGIN code's drafts have no stop string: a base model answers its own next
    # "Question:" after the case's line; its evaluation cuts the text there first
    line = " Anna Berg.\nQuestion: Who wrote it?\nAnswer: Carl Lind. So the answer is Carl Lind."
    quiet = ScriptedResponse(line, entropies=(0.0,) * len(ScriptedResponse(line).pieces()))
    for mode, answer in (("reference", "Anna Berg"), ("paper", "Anna Berg")):
        model = dragin_script.model(quiet, " Anna Berg.")
        config = DRAGINConfig(mode=mode)  # type: ignore[arg-type]
        result = create_dragin_graph(
            model, RecordingRetriever(), config=config, prompts=NO_SHOTS
        ).invoke({"question": QUESTION})
        assert result["answer"] == answer, mode
        assert "Carl" not in result["text"], mode


CONTEXT_QUERIES = {
    # the code's forward_all: the question, the accepted text, the draft before the
    # triggering sentence (reference); paper mode accepts the earlier sentence and keeps
    # the triggering sentence's words before the trigger as well
    ("reference", "full_context"): f"{QUESTION} Blue Harbour was directed by Anna Berg.",
    ("reference", "last_sentence"): "Blue Harbour was directed by Anna Berg.",
    ("reference", "last_n_tokens"): "by Anna Berg.",
    ("paper", "full_context"): (
        f"{QUESTION} Blue Harbour was directed by Anna Berg. She was born in"
    ),
    ("paper", "last_sentence"): "She was born in",
    ("paper", "last_n_tokens"): "was born in",
}


@pytest.mark.parametrize(("mode", "formulation"), sorted(CONTEXT_QUERIES))
def test_query_formulations_of_table_6_ask_from_the_context_before_the_trigger(
    mode: str, formulation: str
) -> None:
    model = dragin_script.model(
        dragin_script.draft(), " Anna Berg was born in 1930. Extra.", " So the answer is 1930."
    )
    retriever = RecordingRetriever()
    config = DRAGINConfig(query_top_n=3, mode=mode, query_formulation=formulation)  # type: ignore[arg-type]
    result = create_dragin_graph(model, retriever, config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    (event,) = result["retrievals"]
    assert event["trigger_word"] == "1931"  # RIND decides when, as with QFS
    assert retriever.queries == [CONTEXT_QUERIES[mode, formulation]]
    assert model.attention_texts[1] == " So the answer is 1930."  # no QFS forward pass


def test_query_formulation_is_a_per_call_setting() -> None:
    model = dragin_script.model(
        dragin_script.draft(), " Anna Berg was born in 1930. Extra.", " So the answer is 1930."
    )
    retriever = RecordingRetriever()
    graph = create_dragin_graph(model, retriever, config=DRAGINConfig(), prompts=NO_SHOTS)
    graph.invoke({"question": QUESTION}, context={"query_formulation": "last_sentence"})
    assert retriever.queries == ["Blue Harbour was directed by Anna Berg."]
    with pytest.raises(AdaptiveRAGError, match="query_formulation must be one of 'qfs'"):
        DRAGINConfig(query_formulation="last_word")  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["reference", "paper"])
def test_the_decision_names_the_trigger_with_its_own_score_and_bare_words(mode: str) -> None:
    # two words of the second sentence over theta: "born" first, "1931." higher
    entropies = (0.1,) * 9 + (4.0, 0.1, 6.0)
    draft = ScriptedResponse(
        "".join(dragin_script.DRAFT_TOKENS), tokens=dragin_script.DRAFT_TOKENS, entropies=entropies
    )
    model = dragin_script.model(draft, " So the answer is 1930.", " So the answer is 1930.")
    graph = create_dragin_graph(
        model,
        RecordingRetriever(),
        config=DRAGINConfig(mode=mode, theta=0.5),
        prompts=NO_SHOTS,  # type: ignore[arg-type]
    )
    (event,) = graph.invoke({"question": QUESTION})["retrievals"]
    # RIND by hand: s(w) = H(w) * a(w) * n / sum(a) over the sentence, a(i) = 1 / (i + 1)
    a = 1.0 / np.arange(1, 13)
    rind = {i: entropies[i] * 5 * a[i] / a[7:12].sum() for i in (9, 11)}
    assert rind[9] > 0.5 and rind[11] > rind[9]  # both trigger; the first is the trigger
    assert event["trigger_word"] == "born" and event["trigger_position"] == 9
    assert event["score"] == pytest.approx(rind[9])  # its own, not the sentence's largest
    assert event["score"] > event["threshold"]
