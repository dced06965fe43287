"""Run a method over a QA dataset, one JSON line per question, resumably.

[`run_evaluation`][] answers every question with a compiled graph and appends its
result to ``results.jsonl`` in the run directory as soon as it finishes (see
``results`` for the files). Running again with the
same directory skips the ids already there (a last line cut short by a crash is dropped
and its question answered again) and refuses to mix results when the settings differ
(``limit`` may change: it only selects how many questions are asked). Ctrl-C stops the
run; every finished question is kept. A run holds an exclusive lock on its directory
(``run_lock``) from start to end, so a second run
on the same directory is refused instead of answering every question again.
[`summarize`][] and [`compare_runs`][] (from
``summary``) turn run directories into tables.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Protocol

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from tqdm import tqdm

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation.datasets import Example
from langchain_adaptive_rag.evaluation.metrics import score_example
from langchain_adaptive_rag.evaluation.overrides import (
    config_class_for,
    config_to_dict,
    parse_config_overrides,
)
from langchain_adaptive_rag.evaluation.results import (
    FINGERPRINT_KEY,
    RESULTS_FILE,
    RUN_FILE,
    PathLike,
    Record,
    RunSettings,
    check_run_dir,
    json_safe,
    latest_by_id,
    read_results,
    start_run,
)
from langchain_adaptive_rag.evaluation.run_lock import RunDirLock
from langchain_adaptive_rag.evaluation.summary import (
    SUMMARY_CSV,
    SUMMARY_MD,
    SummaryRow,
    compare_runs,
    format_table,
    summarize,
    write_table,
)
from langchain_adaptive_rag.graphs import Method, create_adaptive_rag_graph
from langchain_adaptive_rag.graphs.policy import MethodConfig
from langchain_adaptive_rag.options import TraceModel
from langchain_adaptive_rag.prompts import QAPrompts
from langchain_adaptive_rag.state import AdaptiveRAGInput

__all__ = [
    "RESULTS_FILE",
    "RUN_FILE",
    "SUMMARY_CSV",
    "SUMMARY_MD",
    "AnswerGraph",
    "RunReport",
    "RunSettings",
    "SummaryRow",
    "check_run_dir",
    "compare_runs",
    "config_class_for",
    "evaluate_method",
    "example_passages",
    "format_table",
    "parse_config_overrides",
    "read_results",
    "run_evaluation",
    "summarize",
    "write_table",
]


class AnswerGraph(Protocol):
    """What the runner needs: a compiled adaptive-RAG graph or any object like it."""

    def invoke(self, input: AdaptiveRAGInput, /) -> Mapping[str, object]:
        """Answer ``{"question": ...}`` with ``{"answer", "text", "retrievals", "counts"}``."""
        ...


@dataclass(frozen=True)
class RunReport:
    """How a call of [`run_evaluation`][] went."""

    out_dir: Path
    """The run directory."""
    total: int
    """Questions asked for."""
    completed: int
    """Of those, how many ``results.jsonl`` now holds (finished or failed)."""
    new: int
    """Questions answered by this call."""
    skipped: int
    """Questions already in ``results.jsonl`` when the call started."""
    errors: int
    """Questions of this call recorded with an error."""
    interrupted: bool
    """Whether Ctrl-C stopped the call before every question was answered."""
    first_error: str | None = None
    """``"ErrorType: message"`` of this call's first failed question, if any."""
    repairs: tuple[str, ...] = ()
    """What the call repaired in the directory before it started, in words: a
    ``run.json`` left empty or cut short by a crash (rewritten from ``settings``), a
    last result line cut short (dropped, its question answered again)."""

    @property
    def remaining(self) -> int:
        """Questions still to answer (rerun with the same directory to continue)."""
        return self.total - self.completed


# --------------------------------------------------------------------------------------
# Answering one question


def _error_info(exc: BaseException) -> dict[str, object]:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "traceback": "".join(lines)[-4000:],
    }


def _base_record(example: Example) -> Record:
    record: Record = {
        "id": example.id,
        "question": example.question,
        "answers": list(example.answers),
        "dataset": example.dataset,
    }
    if example.needs_retrieval is not None:
        record["needs_retrieval"] = example.needs_retrieval
    return record


def _answer(graph: AnswerGraph, example: Example) -> tuple[Record, Exception | None]:
    """Run one question through the graph and score it; a failure becomes a record."""
    record = _base_record(example)
    start = time.perf_counter()
    try:
        output = graph.invoke({"question": example.question})
        if "answer" not in output:
            msg = (
                f"The graph returned keys {sorted(output)}; expected an adaptive-RAG graph "
                "output with 'answer', 'text', 'retrievals' and 'counts'."
            )
            raise AdaptiveRAGError(msg)
        answer = str(output.get("answer") or "")
        metrics = score_example(answer, example)
    except Exception as exc:
        record.update(
            {
                "prediction": None,
                "metrics": None,
                "counts": None,
                "seconds": round(time.perf_counter() - start, 4),
                "retrievals": [],
                "error": _error_info(exc),
            }
        )
        return record, exc
    counts = output.get("counts")
    counts = counts if isinstance(counts, Mapping) else {}
    record.update(
        {
            "prediction": {"answer": answer, "text": str(output.get("text") or "")},
            "metrics": metrics,
            "counts": json_safe(counts),
            "seconds": round(time.perf_counter() - start, 4),
            "retrievals": json_safe(output.get("retrievals") or []),
            "error": None,
        }
    )
    failed = int(counts.get("retrieval_errors", 0) or 0)
    if failed:  # answered without some documents: an error, redone by --retry-errors
        events = output.get("retrievals")
        notes = [
            str(e.get("note"))
            for e in (events if isinstance(events, list) else [])
            if isinstance(e, Mapping)
            and str(e.get("note", "")).startswith(("retriever raised", "retriever not called"))
        ]
        error = AdaptiveRAGError(
            f"{failed} of {counts.get('retrievals', failed)} retrievals failed after their "
            f"retries ({'; '.join(notes) or 'see the retrieval notes'}); the answer was "
            "generated without their documents."
        )
        record["error"] = {"type": "RetrievalError", "message": str(error), "traceback": ""}
        return record, error
    return record, None


class _Writer:
    """Appends records to ``results.jsonl``, flushing each, and keeps the progress bar."""

    def __init__(
        self, handle: IO[str], bar: tqdm, previous: Sequence[Record], fingerprint: str
    ) -> None:
        self.handle = handle
        self.fingerprint = fingerprint
        self.bar = bar
        self.new = 0
        self.errors = 0
        self.first_error: str | None = None
        self.written: set[str] = set()
        self._em = 0.0
        self._f1 = 0.0
        self._scored = 0
        for record in previous:
            self._track(record)

    def _track(self, record: Record) -> None:
        metrics = record.get("metrics")
        self._scored += 1
        if isinstance(metrics, Mapping):
            self._em += float(metrics.get("em", 0.0))
            self._f1 += float(metrics.get("f1", 0.0))

    def write(self, record: Record) -> None:
        stamped = {"id": record["id"], FINGERPRINT_KEY: self.fingerprint, **record}
        line = json.dumps(stamped, ensure_ascii=False, allow_nan=False)
        self.handle.write(line + "\n")
        self.handle.flush()
        self.written.add(str(record["id"]))
        self.new += 1
        error = record.get("error")
        if isinstance(error, Mapping):
            self.errors += 1
            if self.first_error is None:
                self.first_error = f"{error.get('type')}: {error.get('message')}"
        self._track(record)
        self.bar.update(1)
        self.bar.set_postfix(
            em=f"{self._em / self._scored:.3f}",
            f1=f"{self._f1 / self._scored:.3f}",
            errors=self.errors,
            refresh=False,
        )


def _check_ids(examples: Sequence[Example]) -> None:
    seen: dict[str, int] = {}
    for index, example in enumerate(examples):
        if not isinstance(example, Example):
            msg = (
                f"examples[{index}] is a {type(example).__name__}; expected an Example "
                "(from load_dataset)."
            )
            raise AdaptiveRAGError(msg)
        if example.id in seen:
            msg = (
                f"examples[{seen[example.id]}] and examples[{index}] share the id "
                f"{example.id!r}; expected unique ids (a run resumes by id). Fix: give the "
                "examples distinct ids."
            )
            raise AdaptiveRAGError(msg)
        seen[example.id] = index


def _run_sequential(
    graph: AnswerGraph, todo: Sequence[Example], writer: _Writer, fail_fast: bool
) -> None:
    for example in todo:
        record, exc = _answer(graph, example)
        writer.write(record)
        if exc is not None and fail_fast:
            raise exc


def _run_threaded(
    graph: AnswerGraph,
    todo: Sequence[Example],
    writer: _Writer,
    fail_fast: bool,
    concurrency: int,
) -> None:
    executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="adaptive-rag")
    futures: list[Future[tuple[Record, Exception | None]]] = [
        executor.submit(_answer, graph, example) for example in todo
    ]
    try:
        for future in as_completed(futures):
            record, exc = future.result()
            writer.write(record)
            if exc is not None and fail_fast:
                raise exc
    except BaseException:
        # Ctrl-C or fail_fast: start nothing new, let the questions in flight finish and
        # keep every one that finished.
        for future in futures:
            future.cancel()
        executor.shutdown(wait=True, cancel_futures=True)
        for future in futures:
            if future.done() and not future.cancelled() and future.exception() is None:
                record, _ = future.result()
                if str(record["id"]) not in writer.written:
                    writer.write(record)
        raise
    finally:
        executor.shutdown(wait=True)


def run_evaluation(
    graph: AnswerGraph,
    examples: Sequence[Example],
    out_dir: PathLike,
    *,
    settings: RunSettings,
    resume: bool = True,
    concurrency: int = 1,
    progress: bool = True,
    retry_errors: bool = False,
    fail_fast: bool = False,
) -> RunReport:
    """Answer every example with ``graph``, appending one result line per question.

    Args:
        graph: A compiled adaptive-RAG graph (``create_adaptive_rag_graph(...)``), or any
            object whose ``invoke({"question": q})`` returns ``answer``, ``text``,
            ``retrievals`` and ``counts``.
        examples: The questions (``load_dataset(...)``); ids must be unique.
        out_dir: The run directory (created; see the module docstring for its files).
        settings: What the run is made with; written to ``run.json`` and compared with a
            resumed directory's (every field but ``limit`` must match).
        resume: Continue a directory that already holds results, skipping their ids;
            ``False`` refuses such a directory instead.
        concurrency: Questions answered at once, in threads. Keep 1 for a local
            [`ChatTransformers`][] (it generates one call at a time behind a lock); more
            helps when the retriever or the model is a remote service.
        progress: Show a progress bar (tqdm, on stderr) with the running EM and F1.
        retry_errors: When resuming, answer again the questions recorded with an error
            (the new line supersedes the old one).
        fail_fast: Stop at the first question that fails (after recording it) by
            re-raising its exception; by default the run records it and goes on.

    Returns:
        How many questions were answered, skipped and failed, and whether Ctrl-C stopped
        the run.

    Raises:
        AdaptiveRAGError: Duplicate ids, a bad ``concurrency``, an output path that is a
            file, a run directory another run holds (see
            [`RunDirLock`][]) or made with
            other settings, or a broken ``results.jsonl``.
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        msg = f"Received concurrency={concurrency!r}; expected an integer >= 1."
        raise AdaptiveRAGError(msg)
    _check_ids(examples)
    out = Path(out_dir)
    check_run_dir(out, settings, resume=resume)  # fail before creating anything
    with RunDirLock(out):
        return _run_locked(
            graph, examples, out, settings, resume, concurrency, progress, retry_errors, fail_fast
        )


def _run_locked(
    graph: AnswerGraph,
    examples: Sequence[Example],
    out: Path,
    settings: RunSettings,
    resume: bool,
    concurrency: int,
    progress: bool,
    retry_errors: bool,
    fail_fast: bool,
) -> RunReport:
    """[`run_evaluation`][] once the directory's lock is held."""
    start = start_run(out, settings, resume)
    existing = latest_by_id(start.records)
    wanted = {example.id for example in examples}
    done = {
        key
        for key, record in existing.items()
        if key in wanted and not (retry_errors and record.get("error") is not None)
    }
    todo = [example for example in examples if example.id not in done]
    previous = [record for key, record in existing.items() if key in done]
    interrupted = False
    with (
        (out / RESULTS_FILE).open("a", encoding="utf-8") as handle,
        tqdm(
            total=len(examples),
            initial=len(done),
            desc=settings.method,
            unit="q",
            disable=not progress,
            dynamic_ncols=True,
        ) as bar,
    ):
        writer = _Writer(handle, bar, previous, settings.fingerprint)
        try:
            if concurrency == 1:
                _run_sequential(graph, todo, writer, fail_fast)
            else:
                _run_threaded(graph, todo, writer, fail_fast, concurrency)
        except KeyboardInterrupt:
            interrupted = True
    return RunReport(
        out_dir=out,
        total=len(examples),
        completed=len(done) + len(writer.written),
        new=writer.new,
        skipped=len(done),
        errors=writer.errors,
        interrupted=interrupted,
        first_error=writer.first_error,
        repairs=start.repairs,
    )


def evaluate_method(
    model: TraceModel,
    retriever: BaseRetriever,
    method: Method,
    examples: Sequence[Example],
    out_dir: PathLike,
    *,
    config: MethodConfig | None = None,
    prompts: QAPrompts | None = None,
    settings: RunSettings | None = None,
    resume: bool = True,
    concurrency: int = 1,
    progress: bool = True,
    retry_errors: bool = False,
    fail_fast: bool = False,
) -> RunReport:
    """Build a method's graph and [`run_evaluation`][] it.

    Args:
        model: [`ChatTransformers`][] (or any object with its ``generate_trace``).
        retriever: Any LangChain retriever.
        method: One of [`AVAILABLE_METHODS`][].
        examples: The questions.
        out_dir: The run directory.
        config: The method's config (default: the config class's defaults).
        prompts: Prompt templates (e.g. ``dataset_prompts("hotpotqa")``).
        settings: The other settings to record (dataset, files, model, prompts name,
            limit); ``method`` and ``config`` are filled in from the arguments.
        resume: See [`run_evaluation`][].
        concurrency: See [`run_evaluation`][].
        progress: See [`run_evaluation`][].
        retry_errors: See [`run_evaluation`][].
        fail_fast: See [`run_evaluation`][].

    Returns:
        The run report.
    """
    chosen = config if config is not None else config_class_for(method)()
    graph = create_adaptive_rag_graph(model, retriever, method, config=chosen, prompts=prompts)
    base = settings if settings is not None else RunSettings(method=method)
    return run_evaluation(
        graph,
        examples,
        out_dir,
        settings=replace(
            base,
            method=method,
            config=config_to_dict(chosen),
            spacy_pipeline=RunSettings.pipeline_of(chosen),
        ),
        resume=resume,
        concurrency=concurrency,
        progress=progress,
        retry_errors=retry_errors,
        fail_fast=fail_fast,
    )


def example_passages(examples: Sequence[Example]) -> list[Document]:
    """Pool the passages that come with the examples into one corpus.

    HotpotQA and 2WikiMultihopQA files give each question its paragraphs (gold and
    distractors); the pool of all of them is a small corpus to retrieve from when no
    corpus file is given. Passages with the same title and text are kept once.

    Args:
        examples: Loaded examples.

    Returns:
        The passages (``context``, or ``supporting`` when a question has no context), in
        order of first appearance; empty when the file has none.
    """
    seen: set[tuple[str, str]] = set()
    pooled: list[Document] = []
    for example in examples:
        for doc in example.context or example.supporting:
            key = (str(doc.metadata.get("title", "")), doc.page_content)
            if key in seen or not doc.page_content.strip():
                continue
            seen.add(key)
            pooled.append(doc)
    return pooled
