"""IRCoT's queries against the official retriever's, computed independently.

The official side restates StonyBrookNLP/ircot's ``commaqa/inference/ircot.py``
(commit 3c1820f): ``is_reasoning_sentence`` (lines 30-41), ``remove_wh_words`` (lines
58-62) and the ``question_or_last_generated_sentence`` query source (lines 346-352,
``remove_wh_words`` applied at the BM25 call, line 433). The package's side runs the public
builder on a scripted model and records what its retriever receives.
"""

from __future__ import annotations

import re

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from langchain_adaptive_rag.graphs.ircot import IRCoTConfig, create_ircot_graph
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.testing import FakeTraceModel


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
