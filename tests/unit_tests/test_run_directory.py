"""A run directory survives crashes and refuses a second run: run.json and the run lock.

The crash tests fork real processes that run an evaluation and SIGKILL them at chosen
points (a hook blocks the child there) or after small delays, then resume.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation import Example, check_run_dir, run_evaluation, summarize
from langchain_adaptive_rag.evaluation import run_lock as run_lock_module
from langchain_adaptive_rag.evaluation.results import RunSettings
from langchain_adaptive_rag.evaluation.run_lock import RunDirLock, run_dir_holder
from langchain_adaptive_rag.evaluation.runner import RunReport
from langchain_adaptive_rag.state import AdaptiveRAGInput

EXAMPLES = [
    Example(id=f"q{i}", question=f"What is {i} plus one?", answers=(str(i + 1),), dataset="nq")
    for i in range(8)
]
SETTINGS = RunSettings(method="no_retrieval", dataset="nq", data_file="numbers.jsonl")

needs_fork = pytest.mark.skipif(
    sys.platform == "win32" or "fork" not in multiprocessing.get_all_start_methods(),
    reason="forks processes and kills them with SIGKILL (POSIX only)",
)


class CountingGraph:
    """Answers "What is i plus one?" with i + 1; calls ``before`` first."""

    def __init__(self, before: Callable[[str], None] | None = None) -> None:
        self.before = before
        self.questions: list[str] = []

    def invoke(self, input: AdaptiveRAGInput, /) -> Mapping[str, object]:
        question = input["question"]
        if self.before is not None:
            self.before(question)
        self.questions.append(question)
        number = int(question.split()[2]) + 1
        return {
            "answer": str(number),
            "text": f"So the answer is {number}.",
            "retrievals": [],
            "counts": {"retrievals": 0, "llm_calls": 1, "generated_tokens": 5, "rounds": 1},
        }


def run(out: Path, graph: CountingGraph | None = None, **options: Any) -> RunReport:
    settings = options.pop("settings", SETTINGS)
    return run_evaluation(
        graph or CountingGraph(), EXAMPLES, out, settings=settings, progress=False, **options
    )


def result_ids(out: Path) -> list[str]:
    text = (out / "results.jsonl").read_text(encoding="utf-8")
    return [json.loads(line)["id"] for line in text.splitlines() if line.strip()]


def stored_run_json(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "run.json").read_text(encoding="utf-8"))
    return data


# --------------------------------------------------------------------------------------
# run.json: written once, atomically; a torn one is recovered


def test_a_resume_leaves_an_unchanged_run_json_alone(tmp_path: Path) -> None:
    run(tmp_path)
    run_file = tmp_path / "run.json"
    before = run_file.stat()
    content = run_file.read_bytes()
    report = run(tmp_path)
    after = run_file.stat()
    assert report.skipped == 8 and report.new == 0 and report.repairs == ()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert run_file.read_bytes() == content
    # a new limit is recorded (the only setting that may change), the start time kept
    started = stored_run_json(tmp_path)["started"]
    run(tmp_path, settings=replace(SETTINGS, limit=8))
    stored = stored_run_json(tmp_path)
    assert stored["limit"] == 8 and stored["started"] == started
    assert run_file.stat().st_ino != before.st_ino  # replaced as a whole, not rewritten
    assert not list(tmp_path.glob(".run.json.*"))


TORN = [
    b"",
    b"\n",
    b'{\n  "format": 1,\n  "method": "no_retr',
    b"\x00" * 200,
    b'{"format": 1, "method": "caf\xe9"',
]


@pytest.mark.parametrize("torn", TORN, ids=["empty", "newline", "cut", "zeros", "latin-1"])
def test_a_torn_run_json_is_rewritten_and_its_results_kept(tmp_path: Path, torn: bytes) -> None:
    graph = CountingGraph(before=lambda q: None)
    stop_at = EXAMPLES[3].question

    def interrupt(question: str) -> None:
        if question == stop_at:
            raise KeyboardInterrupt

    assert run(tmp_path, CountingGraph(before=interrupt)).new == 3
    (tmp_path / "run.json").write_bytes(torn)  # a crash while an older release wrote it
    with pytest.raises(AdaptiveRAGError, match=r"empty, cut short .* Fix: resume the run"):
        summarize(tmp_path, write=False)
    assert check_run_dir(tmp_path, SETTINGS) == 3
    report = run(tmp_path, graph)
    assert (report.skipped, report.new, report.completed) == (3, 5, 8)
    assert len(report.repairs) == 1 and "run.json was empty or cut short" in report.repairs[0]
    assert graph.questions == [e.question for e in EXAMPLES[3:]]
    assert result_ids(tmp_path) == [e.id for e in EXAMPLES]
    stored = stored_run_json(tmp_path)
    assert stored["method"] == "no_retrieval" and stored["data_file"] == "numbers.jsonl"
    assert summarize(tmp_path, write=False)["n"] == 8


@pytest.mark.parametrize("torn", TORN[:3], ids=["empty", "newline", "cut"])
def test_a_torn_run_json_cannot_mix_runs_of_other_settings(tmp_path: Path, torn: bytes) -> None:
    assert run(tmp_path, CountingGraph(before=_stop_at(EXAMPLES[2]))).new == 2
    (tmp_path / "run.json").write_bytes(torn)
    other = replace(SETTINGS, method="single_retrieval")
    with pytest.raises(AdaptiveRAGError, match=r"made with other settings .* 2 from settings"):
        check_run_dir(tmp_path, other)
    graph = CountingGraph()
    with pytest.raises(AdaptiveRAGError, match=r"Results of different settings are never mixed"):
        run(tmp_path, graph, settings=other)
    assert graph.questions == [] and result_ids(tmp_path) == ["q0", "q1"]
    assert (tmp_path / "run.json").read_bytes() == torn  # nothing rewritten
    assert run(tmp_path).skipped == 2  # the settings that made them resume


def test_every_result_carries_its_settings_fingerprint(tmp_path: Path) -> None:
    run(tmp_path)
    stamp = stored_run_json(tmp_path)["fingerprint"]
    lines = (tmp_path / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert stamp == SETTINGS.fingerprint and len(stamp) == 16
    assert {json.loads(line)["run"] for line in lines} == {stamp}
    # only the limit may change without changing the fingerprint
    assert replace(SETTINGS, limit=3).fingerprint == stamp
    assert replace(SETTINGS, config={"retrieve_topk": 5}).fingerprint != stamp


def test_a_foreign_line_is_refused_by_summary_and_resume(tmp_path: Path) -> None:
    other = tmp_path / "other"
    run(other, settings=replace(SETTINGS, dataset="triviaqa"))
    run(tmp_path)
    with (tmp_path / "results.jsonl").open("a", encoding="utf-8") as handle:
        handle.write((other / "results.jsonl").read_text(encoding="utf-8").splitlines()[0] + "\n")
    with pytest.raises(
        AdaptiveRAGError, match=r"1 from settings [0-9a-f]{16} \(first question 'q0'\)"
    ):
        summarize(tmp_path, write=False)
    with pytest.raises(AdaptiveRAGError, match=r"never mixed"):
        run(tmp_path)


def test_unstamped_results_under_a_torn_run_json_are_refused(tmp_path: Path) -> None:
    run(tmp_path)
    results = tmp_path / "results.jsonl"
    records = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
    results.write_text(  # as an older release wrote them: no fingerprint
        "".join(json.dumps({k: v for k, v in r.items() if k != "run"}) + "\n" for r in records),
        encoding="utf-8",
    )
    assert summarize(tmp_path, write=False)["n"] == 8  # an intact run.json vouches for them
    (tmp_path / "run.json").write_bytes(b"")
    with pytest.raises(
        AdaptiveRAGError, match=r"without a settings fingerprint .* restore run.json"
    ):
        run(tmp_path)


def _stop_at(example: Example) -> Callable[[str], None]:
    def interrupt(question: str) -> None:
        if question == example.question:
            raise KeyboardInterrupt

    return interrupt


def test_run_json_that_is_not_an_object_is_still_refused(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("[1, 2]\n")
    with pytest.raises(AdaptiveRAGError, match=r"received list; expected a JSON object"):
        run(tmp_path)


def test_an_output_path_that_is_a_file_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    taken = tmp_path / "taken"
    taken.write_text("a file")
    for out in (taken, taken / "below"):
        with pytest.raises(AdaptiveRAGError, match=r"is a file.* Fix: pick another output"):
            check_run_dir(out, SETTINGS)
        with pytest.raises(AdaptiveRAGError, match="is a file"):
            run(out)
    assert taken.read_text() == "a file"


# --------------------------------------------------------------------------------------
# Crash consistency: SIGKILL at start-up and while answering, then resume


def _child(out: str, stage: str, limit: int | None, conn: Connection) -> None:
    """Run the evaluation in a forked process; block at ``stage`` until killed."""

    def reached() -> None:
        conn.send(stage)
        time.sleep(60)  # the parent kills us here

    if stage == "lock":
        acquire = RunDirLock.acquire

        def hooked_acquire(self: RunDirLock) -> None:
            acquire(self)
            reached()

        RunDirLock.acquire = hooked_acquire  # type: ignore[method-assign]
    elif stage in ("fsync-temporary", "fsync-directory"):
        fsync, calls = os.fsync, [0]

        def hooked_fsync(fd: int) -> None:
            calls[0] += 1
            if calls[0] == (1 if stage == "fsync-temporary" else 2):
                reached()
            fsync(fd)

        os.fsync = hooked_fsync
    elif stage == "replace":
        os_replace = os.replace

        def hooked_replace(src: Any, dst: Any) -> None:
            if str(dst).endswith("run.json"):
                reached()
            os_replace(src, dst)

        os.replace = hooked_replace
    graph = CountingGraph()
    if stage.startswith("answer:"):
        target = EXAMPLES[int(stage.split(":")[1])].question
        graph.before = lambda question: reached() if question == target else None
    if stage.startswith("half-line:"):
        from langchain_adaptive_rag.evaluation import runner

        write, count = runner._Writer.write, [0]
        target_line = int(stage.split(":")[1])

        def hooked_write(self: Any, record: dict[str, object]) -> None:
            count[0] += 1
            if count[0] == target_line:
                line = json.dumps(record)
                self.handle.write(line[: len(line) // 2])
                self.handle.flush()
                reached()
            write(self, record)

        runner._Writer.write = hooked_write  # type: ignore[method-assign]
    run(Path(out), graph, settings=replace(SETTINGS, limit=limit))
    conn.send("done")


def _start(out: Path, stage: str, limit: int | None = None) -> tuple[Any, Connection]:
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(str(out), stage, limit, sender))
    process.start()
    sender.close()
    return process, receiver


def _kill_at(out: Path, stage: str, limit: int | None = None) -> None:
    process, receiver = _start(out, stage, limit)
    assert receiver.poll(60), f"the child never reached {stage!r}"
    assert receiver.recv() == stage
    process.kill()
    process.join(10)
    assert process.exitcode == -signal.SIGKILL


def _kill_after(out: Path, delay: float) -> None:
    process, _ = _start(out, "none")
    time.sleep(delay)
    process.kill()
    process.join(10)
    assert process.exitcode in (-signal.SIGKILL, 0)


def _check_consistent(out: Path) -> None:
    """What any crash may leave: a complete run.json or none; whole lines but the last."""
    if (out / "run.json").exists():
        assert stored_run_json(out)["method"] == "no_retrieval"
    if (out / "results.jsonl").exists():
        rows = (out / "results.jsonl").read_text(encoding="utf-8").split("\n")
        for row in rows[:-1]:
            assert json.loads(row)["id"].startswith("q")


@needs_fork
def test_sigkill_anywhere_then_resume_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _kill_at(out, "lock")  # the lock is held, nothing written yet
    assert not (out / "run.json").exists()
    _kill_at(out, "fsync-temporary")  # run.json's temporary file written, not yet renamed
    _kill_at(out, "replace")
    assert not (out / "run.json").exists() and list(out.glob(".run.json.*.tmp"))
    _kill_at(out, "fsync-directory")  # renamed into place
    assert stored_run_json(out)["limit"] is None
    _kill_at(out, "answer:2")
    assert result_ids(out) == ["q0", "q1"]
    # a resume with a new limit rewrites run.json: killed mid-rewrite, the old one stays
    _kill_at(out, "replace", limit=8)
    assert stored_run_json(out)["limit"] is None
    _kill_at(out, "half-line:2", limit=8)  # the fourth line is half written
    assert (out / "results.jsonl").read_text().count("\n") == 3
    assert stored_run_json(out)["limit"] == 8
    for delay in (0.0, 0.001, 0.003, 0.006, 0.01, 0.02):
        _kill_after(out, delay)
        _check_consistent(out)
    process, receiver = _start(out, "none")
    assert receiver.poll(20) and receiver.recv() == "done"
    process.join(10)
    assert process.exitcode == 0
    assert sorted(result_ids(out)) == sorted(e.id for e in EXAMPLES)  # each exactly once
    assert stored_run_json(out)["limit"] is None
    assert not list(out.glob(".run.json.*.tmp"))  # killed writers' leftovers are removed
    assert run(out).new == 0


# --------------------------------------------------------------------------------------
# One run at a time per directory


def test_a_second_run_in_the_same_process_is_refused(tmp_path: Path) -> None:
    refused: list[str] = []

    def second_run(question: str) -> None:
        if question == EXAMPLES[1].question:
            with pytest.raises(AdaptiveRAGError) as info:
                run(tmp_path)
            refused.append(str(info.value))
            with pytest.raises(AdaptiveRAGError, match="is in use"):
                check_run_dir(tmp_path, SETTINGS)

    report = run(tmp_path, CountingGraph(before=second_run))
    (message,) = refused
    assert f"The run directory {tmp_path} is in use: another run (process {os.getpid()})" in message
    assert "Fix: wait for that run to finish" in message and "(--out)" in message
    assert report.new == 8 and result_ids(tmp_path) == [e.id for e in EXAMPLES]
    assert run_dir_holder(tmp_path) is None  # released at the end
    assert check_run_dir(tmp_path, SETTINGS) == 8


@needs_fork
def test_a_run_in_another_process_is_refused_until_it_is_killed(tmp_path: Path) -> None:
    process, receiver = _start(tmp_path, "answer:3")
    assert receiver.poll(20) and receiver.recv() == "answer:3"
    with pytest.raises(AdaptiveRAGError, match=rf"another run \(process {process.pid}\)"):
        run(tmp_path)
    busy = run_dir_holder(tmp_path)
    assert busy is not None and str(tmp_path) in str(busy)
    assert result_ids(tmp_path) == ["q0", "q1", "q2"]  # the refused run wrote nothing
    process.kill()
    process.join(10)
    assert run_dir_holder(tmp_path) is None  # the OS released the killed run's lock
    graph = CountingGraph()
    report = run(tmp_path, graph)
    assert report.skipped == 3 and graph.questions == [e.question for e in EXAMPLES[3:]]
    assert result_ids(tmp_path) == [e.id for e in EXAMPLES]


def test_two_lock_objects_conflict_and_release(tmp_path: Path) -> None:
    first = RunDirLock(tmp_path / "new")
    with first:
        assert first.held and (tmp_path / "new" / "run.lock").read_text() == f"{os.getpid()}\n"
        with pytest.raises(AdaptiveRAGError, match="is in use"):
            RunDirLock(tmp_path / "new").acquire()
        with pytest.raises(AdaptiveRAGError, match="already held by this object"):
            first.acquire()
    assert not first.held
    with RunDirLock(tmp_path / "new"):
        pass


def test_the_exclusive_file_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_lock_module, "_BACKEND", "exclusive-file")
    with RunDirLock(tmp_path) as lock:
        assert lock.path.name == "run.lock.pid"
        with pytest.raises(AdaptiveRAGError, match=r"delete .*run\.lock\.pid"):
            RunDirLock(tmp_path).acquire()
        assert run_dir_holder(tmp_path) is not None
    assert not (tmp_path / "run.lock.pid").exists() and run_dir_holder(tmp_path) is None
