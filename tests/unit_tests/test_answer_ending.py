"""A run stops when the answer is given: at the marker, or where the answer's line ends.

A base model often writes its answer line without "So the answer is" and stops at the
newline (the prompts' stop string). Drafting again from there only starts another line,
so the run must finalize (forcing the marker once) instead of spinning to ``max_rounds``.
"""

from __future__ import annotations

import pytest

from langchain_adaptive_rag.graphs import create_adaptive_rag_graph
from langchain_adaptive_rag.graphs.policy import MethodConfig
from langchain_adaptive_rag.prompts import QAPrompts, extract_answer
from langchain_adaptive_rag.testing import FakeTraceModel, ScriptedResponse
from tests.helpers.scripted import QUESTION, RecordingRetriever

NO_SHOTS = QAPrompts(exemplars=())
LINE = " Anna Berg directed it.\nQuestion: Who wrote Hamlet?"  # stops at "\n"


@pytest.mark.parametrize(
    "method", ["no_retrieval", "single_round", "fix_length", "fix_sentence", "flare"]
)
def test_a_line_ended_without_the_answer_is_finalized_once(method: str) -> None:
    confident = ScriptedResponse(LINE, logprobs=(0.0,) * len(ScriptedResponse(LINE).pieces()))
    # exactly two calls are scripted: the line, then the forced answer; a third call
    # (drafting on after the newline) fails the test
    model = FakeTraceModel([confident, " 1931."])
    graph = create_adaptive_rag_graph(model, RecordingRetriever(), method, prompts=NO_SHOTS)
    result = graph.invoke({"question": QUESTION})
    assert result["answer"] == "1931"
    assert result["text"] == " Anna Berg directed it. So the answer is 1931."
    assert result["counts"]["llm_calls"] == 2
    assert result["counts"]["rounds"] == 1


def test_a_step_cut_at_a_sentence_end_goes_on() -> None:
    # FS-RAG keeps one sentence of a line that says more: that line has not ended
    model = FakeTraceModel(
        [" Anna Berg directed it. She was born in 1931.\n", " So the answer is 1931.\n"]
    )
    graph = create_adaptive_rag_graph(model, RecordingRetriever(), "fix_sentence", prompts=NO_SHOTS)
    result = graph.invoke({"question": QUESTION})
    assert result["counts"]["llm_calls"] == 2 and result["answer"] == "1931"


def test_the_first_answer_given_counts() -> None:
    # a draft generated past its line (the DRAGIN code's drafts have no stop string)
    # starts the next exemplar, whose "the answer is" the budget cut
    text = " Born 1929. So the answer is 1929.\nQuestion: Who?\nAnswer: Yes. So the answer is"
    assert extract_answer(text) == "1929"
    assert extract_answer(" So the answer is\nSo the answer is 12.") == "12"
    assert extract_answer(" Maybe. So the answer is ") is None


def test_a_text_cut_after_the_marker_is_continued_not_marked_twice() -> None:
    model = FakeTraceModel([" So the answer is", " 1929."])  # the budget ends at "is"
    config = MethodConfig(generate_max_length=4)
    graph = create_adaptive_rag_graph(
        model, RecordingRetriever(), "no_retrieval", config=config, prompts=NO_SHOTS
    )
    result = graph.invoke({"question": QUESTION})
    assert result["answer"] == "1929"
    assert result["text"] == " So the answer is 1929."
    assert model.prompts[1].endswith("Answer: So the answer is")
