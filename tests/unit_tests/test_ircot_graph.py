"""IRCoT on a scripted model: one sentence per step, its query, the collection, the reader."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from langchain_adaptive_rag import create_adaptive_rag_graph
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation.overrides import parse_config_overrides
from langchain_adaptive_rag.graphs.ircot import IRCoTConfig, create_ircot_graph
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.testing import FakeTraceModel

QUESTION = "When was the director of film Blue Harbour born?"
FILM = "Blue Harbour is a 1962 film directed by Anna Berg."
PERSON = "Anna Berg (born 1931) is a Swedish film director."
OTHER = "Carl Lind was born in Oslo in 1902."
BIRTH = "Anna Berg was born in Uppsala."
STEP_1 = " The film Blue Harbour was directed by Anna Berg."
STEP_2 = " Anna Berg was born in 1931."
NO_SHOTS = QAPrompts(exemplars=())


class ScriptedRetriever(BaseRetriever):
    """Documents by query; records every query."""

    results: dict[str, list[tuple[str, str]]]
    queries: list[str] = Field(default_factory=list)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        self.queries.append(query)
        found = self.results.get(query, [])
        return [Document(id=i, page_content=t, metadata={"title": i}) for i, t in found]


def _retriever() -> ScriptedRetriever:
    found = {
        QUESTION: [("film", FILM), ("other", OTHER)],
        STEP_1.strip(): [("person", PERSON), ("film", FILM)],
        STEP_2.strip(): [("birth", BIRTH), ("person", PERSON)],
    }
    # each query as written (paper mode) and as the official retriever sends it
    return ScriptedRetriever(results={**found, **{_official(q): d for q, d in found.items()}})


def _official(query: str) -> str:
    """The query as the official IRCoT retriever sends it (``remove_wh_words``, restated)."""
    return " ".join(
        w for w in query.split(" ") if w.strip().lower() not in {"when", "who", "is", "does"}
    )


def _context(*texts: str) -> str:
    numbered = "".join(f"[{i}] {t}\n" for i, t in enumerate(texts, 1))
    return f"Context:\n{numbered}Answer in the same format as before.\n"


def _case(text: str = "") -> str:
    return f"Question: {QUESTION}\nAnswer:{text}"


@pytest.mark.parametrize("mode", ["reference", "paper"])
def test_each_sentence_is_the_next_query_and_paragraphs_accumulate(mode: str) -> None:
    model = FakeTraceModel(
        [
            STEP_1 + STEP_2,  # only the first sentence is kept
            STEP_2 + " So the answer is 1931.",
            " So the answer is 1931.",
            STEP_1 + STEP_2 + " So the answer is 1931.",  # the reader
        ]
    )
    retriever = _retriever()
    config = IRCoTConfig(mode=mode)  # type: ignore[arg-type]
    result = create_ircot_graph(model, retriever, config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    written = [QUESTION, STEP_1.strip(), STEP_2.strip()]
    assert retriever.queries == (written if mode == "paper" else [_official(q) for q in written])
    assert model.prompts == [
        _context(FILM, OTHER) + _case(),
        _context(FILM, OTHER, PERSON) + _case(STEP_1),
        _context(FILM, OTHER, PERSON, BIRTH) + _case(STEP_1 + STEP_2),
        _context(FILM, OTHER, PERSON, BIRTH) + _case(),  # the CoT reader starts afresh
    ]
    assert [e["rerank_order"] for e in result["retrievals"]] == [[0, 1], [0], [0]]
    assert [e["query"] for e in result["retrievals"]] == retriever.queries
    assert result["answer"] == "1931"
    assert result["text"] == STEP_1 + STEP_2 + " So the answer is 1931."
    assert result["counts"]["retrievals"] == 3
    assert result["counts"]["llm_calls"] == 4
    sources = result["messages"][-1].additional_kwargs["sources"]
    assert [s["id"] for s in sources] == ["film", "other", "person", "birth"]


def test_the_collection_stops_growing_at_max_paragraphs() -> None:
    model = FakeTraceModel([STEP_1, STEP_2, " So the answer is 1931."])
    config = IRCoTConfig(max_paragraphs=3, reader="none")
    result = create_ircot_graph(model, _retriever(), config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert model.prompts[2] == _context(FILM, OTHER, PERSON) + _case(STEP_1 + STEP_2)
    assert [e["rerank_order"] for e in result["retrievals"]] == [[0, 1], [0], []]


def test_max_steps_ends_the_chain_and_the_reader_answers() -> None:
    model = FakeTraceModel([STEP_1 + STEP_2, " So the answer is 1931."])
    retriever = _retriever()
    config = IRCoTConfig(max_steps=1)
    result = create_ircot_graph(model, retriever, config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert retriever.queries == [_official(QUESTION)]  # one step, one retrieval
    assert result["answer"] == "1931"
    assert result["counts"]["llm_calls"] == 2


def test_reader_none_answers_from_the_chain() -> None:
    model = FakeTraceModel([STEP_1, STEP_2, " So the answer is 1931."])
    config = IRCoTConfig(reader="none")
    result = create_ircot_graph(model, _retriever(), config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert result["answer"] == "1931"
    assert result["text"] == STEP_1 + STEP_2 + " So the answer is 1931."
    assert result["counts"]["llm_calls"] == 3


def test_direct_reader_starts_at_the_answer_marker_over_every_paragraph() -> None:
    model = FakeTraceModel([STEP_1, " So the answer is 1931.", " 1931.\n"])
    config = IRCoTConfig(reader="direct")
    result = create_ircot_graph(model, _retriever(), config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert model.prompts[-1] == _context(FILM, OTHER, PERSON) + _case(" So the answer is")
    assert result["answer"] == "1931"
    assert result["text"] == " So the answer is 1931."


def test_a_cot_reading_without_answer_is_read_on_with_the_paragraphs() -> None:
    # paper mode (the reference mode takes the whole output: test_ircot_official.py)
    model = FakeTraceModel(
        [" So the answer is 1931.", STEP_1 + STEP_2, " 1931.\n"]  # the reader gives none
    )
    config = IRCoTConfig(mode="paper")
    result = create_ircot_graph(model, _retriever(), config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert model.prompts[-1] == _context(FILM, OTHER) + _case(STEP_1 + STEP_2 + " So the answer is")
    assert result["answer"] == "1931"
    assert result["counts"]["llm_calls"] == 3


def test_per_call_settings_and_bad_values() -> None:
    model = FakeTraceModel([STEP_1 + STEP_2, " So the answer is 1931."])
    retriever = _retriever()
    graph = create_adaptive_rag_graph(model, retriever, "ircot", prompts=NO_SHOTS)
    graph.invoke({"question": QUESTION}, context={"max_steps": 1})
    assert retriever.queries == [_official(QUESTION)]
    with pytest.raises(AdaptiveRAGError, match="max_paragraphs must be >= 1, got 0"):
        IRCoTConfig(max_paragraphs=0)
    with pytest.raises(AdaptiveRAGError, match="reader must be one of 'cot', 'direct', 'none'"):
        IRCoTConfig(reader="ircot")  # type: ignore[arg-type]


def test_the_harness_sets_its_fields_from_the_command_line() -> None:
    config = parse_config_overrides(
        ["reader=direct", "max_steps=3", "retrieve_topk=2"], IRCoTConfig
    )
    assert (config.reader, config.max_steps, config.retrieve_topk) == ("direct", 3, 2)


def test_a_reference_step_asks_for_no_more_than_the_context_leaves() -> None:
    from types import SimpleNamespace

    from langchain_adaptive_rag.graphs.ircot import IRCoTPolicy

    class Local:  # a local model's context length and encoder (one id per word)
        capabilities = SimpleNamespace(context_length=100)

        @staticmethod
        def encode(prompt: str) -> list[int]:
            return list(range(len(prompt.split())))

    ctx: Any = SimpleNamespace(model=Local())
    assert IRCoTPolicy.fitting_budget(ctx, "w " * 40, 300) == 59  # 100 - 40 - 1
    assert IRCoTPolicy.fitting_budget(ctx, "w " * 40, 30) == 30
    assert IRCoTPolicy.fitting_budget(ctx, "w " * 120, 300) == 1  # the engine's error then
    served: Any = SimpleNamespace(model=FakeTraceModel([]))  # no context length: as asked
    assert IRCoTPolicy.fitting_budget(served, "w " * 40, 300) == 300
