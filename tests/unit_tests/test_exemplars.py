"""Per-benchmark prompts, exemplar files and yes/no answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langchain_adaptive_rag import AdaptiveRAGError, dataset_prompts, load_exemplars
from langchain_adaptive_rag.errors import DatasetFormatError
from langchain_adaptive_rag.exemplars import (
    DATASET_GENERATE_MAX_LENGTH,
    HOTPOTQA_EXEMPLARS,
    STRATEGYQA_EXEMPLARS,
)
from langchain_adaptive_rag.graphs import create_no_retrieval_graph
from langchain_adaptive_rag.graphs.policy import MethodConfig
from langchain_adaptive_rag.prompts import Exemplar, build_prompt, extract_answer
from langchain_adaptive_rag.testing import FakeTraceModel, ScriptedResponse
from tests.helpers.scripted import RecordingRetriever


@pytest.mark.parametrize(
    ("dataset", "shots", "kind"),
    [
        ("2wikimultihopqa", 6, "span"),
        ("hotpotqa", 8, "span"),
        ("iirc", 8, "span"),
        ("strategyqa", 6, "yes_no"),
        ("simple_qa", 4, "span"),
    ],
)
def test_each_benchmark_has_its_prompt(dataset: str, shots: int, kind: str) -> None:
    prompts = dataset_prompts(dataset)  # type: ignore[arg-type]
    assert len(prompts.exemplars) == shots
    assert prompts.answer_kind == kind
    assert dataset in DATASET_GENERATE_MAX_LENGTH
    text = build_prompt(prompts, "Q?")
    # every demonstration ends with the answer marker the extraction reads
    for e in prompts.exemplars:
        assert (
            f"Question: {e.question}\nAnswer: {e.reasoning} So the answer is {e.answer}.\n" in text
        )
        assert e.reasoning.endswith(".") and e.answer
    assert text.endswith("Question: Q?\nAnswer:")
    if kind == "yes_no":
        assert {e.answer for e in prompts.exemplars} == {"yes", "no"}


def test_benchmark_instructions() -> None:
    hotpot = build_prompt(dataset_prompts("hotpotqa", num_exemplars=1), "Q?")
    assert hotpot == (
        f"Question: {HOTPOTQA_EXEMPLARS[0].question}\nAnswer: {HOTPOTQA_EXEMPLARS[0].reasoning}"
        f" So the answer is {HOTPOTQA_EXEMPLARS[0].answer}.\n"
        "Answer the following question by reasoning step-by-step, following the example "
        "above.\nQuestion: Q?\nAnswer:"
    )
    strategy = build_prompt(dataset_prompts("strategyqa", num_exemplars=0), "Q?")
    assert strategy == (
        "Following the examples above, answer the question by reasoning step-by-step.\n\n"
        "Question: Q?\nAnswer:"
    )


def test_bad_dataset_and_count() -> None:
    with pytest.raises(AdaptiveRAGError, match=r"dataset='musique'.*one of"):
        dataset_prompts("musique")  # type: ignore[arg-type]
    with pytest.raises(AdaptiveRAGError, match="num_exemplars must be >= 0, got -1"):
        dataset_prompts("iirc", num_exemplars=-1)


def test_yes_no_answers() -> None:
    assert extract_answer("Thus yes. So the answer is Yes, it could.", kind="yes_no") == "yes"
    assert extract_answer("So the answer is no.", kind="yes_no") == "no"
    assert extract_answer("So the answer is maybe.", kind="yes_no") == "no"
    assert extract_answer("So the answer is Maybe.") == "Maybe"
    assert extract_answer("no marker", kind="yes_no") is None


def test_strategyqa_graph_reads_yes_no() -> None:
    model = FakeTraceModel([ScriptedResponse(" Fish live in water. So the answer is Yes!")])
    result = create_no_retrieval_graph(
        model,
        RecordingRetriever(),
        config=MethodConfig(),
        prompts=dataset_prompts("strategyqa"),
    ).invoke({"question": "Can fish swim?"})
    assert result["answer"] == "yes"
    assert str(model.prompts[0]).startswith(f"Question: {STRATEGYQA_EXEMPLARS[0].question}")


def test_load_exemplars_json_and_jsonl(tmp_path: Path) -> None:
    records = [
        {"question": "Q1?", "cot": ["A is B. ", "B is C."], "answer": "C"},
        {"question": "Q2?", "reasoning": "R.", "answer": True},
    ]
    listing = tmp_path / "shots.json"
    listing.write_text(json.dumps(records), encoding="utf-8")
    lines = tmp_path / "shots.jsonl"
    lines.write_text("\n".join(json.dumps(r) for r in records) + "\n\n", encoding="utf-8")
    expected = (Exemplar("Q1?", "A is B. B is C.", "C"), Exemplar("Q2?", "R.", "yes"))
    assert load_exemplars(listing) == expected
    assert load_exemplars(lines) == expected
    prompts = dataset_prompts("hotpotqa", exemplars=load_exemplars(lines))
    assert prompts.exemplars == expected


def test_load_exemplars_names_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "Q?", "cot": "R.", "answer": "A"}\n{"question": "Q?"}\n')
    with pytest.raises(AdaptiveRAGError, match=r"bad.jsonl, line 2: field 'reasoning \(or cot\)'"):
        load_exemplars(bad)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{nope\n")
    with pytest.raises(
        AdaptiveRAGError, match=r"broken.jsonl, line 1: received text that is not valid JSON"
    ):
        load_exemplars(broken)
    with pytest.raises(AdaptiveRAGError, match="Cannot read exemplars"):
        load_exemplars(tmp_path / "missing.json")
    listing = tmp_path / "list.json"
    listing.write_text('[{"question": "Q?", "cot": "R.", "answer": 3}]')
    with pytest.raises(
        AdaptiveRAGError, match=r"record 0: field 'answer': received 3; expected a string"
    ):
        load_exemplars(listing)


@pytest.mark.parametrize(
    ("content", "where", "received"),
    [
        (
            b'{"question": "Q?", "cot": "R.", "answer": "A"}\n{"question": "caf\xe9"}\n',
            "line 2",
            "the byte 0xE9 (column 18), which is not UTF-8",
        ),
        (b"[" * 100_000 + b"]" * 100_000, "list.json", "nesting too deep"),
        (b'{"question": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n", "line 1", "nesting too deep"),
        (b'{"question": "Q?", "cot": "R.", "answer": ' + b"9" * 5000 + b"}\n", "line 1", "digits"),
        (
            b'{"question": "\\ud800", "cot": "R.", "answer": "A"}\n',
            "line 1: field 'question'",
            "unpaired surrogate",
        ),
        (b'[{"question": "Q?", "cot": "R.", "answer": "A"}, 7]', "record 1", "received int"),
    ],
    ids=["latin-1 byte", "deep list", "deep line", "long number", "surrogate", "not an object"],
)
def test_load_exemplars_refuses_damaged_files_by_name(
    tmp_path: Path, content: bytes, where: str, received: str
) -> None:
    path = tmp_path / ("list.json" if content.startswith(b"[") else "lines.jsonl")
    path.write_bytes(content)
    with pytest.raises(DatasetFormatError) as caught:
        load_exemplars(path)
    message = str(caught.value)
    assert message.startswith(str(path)), message
    assert where in message, message
    assert received in message, message
