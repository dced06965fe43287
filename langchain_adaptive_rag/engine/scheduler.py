"""The scheduler: one per model; concurrent calls join one batched decoding loop.

Calls to [`ChatTransformers`][] arriving from several threads or async tasks (graph
``batch``/``abatch``, ``adaptive-rag eval --concurrency N``, an app serving several users)
are queued; a worker thread takes every queued request that captures the same signals
(up to ``max_batch_rows`` sequences), decodes them together with
[`decode_together`][] (left-padded prompts, one
KV-cache row per sample) and hands each caller its own token events as they are released,
in its own thread. A request that arrives while a batch runs waits for the next one.

Each caller keeps its own stop strings, seeds, token budget, captured signals and
streaming callbacks; greedy outputs equal a call made alone. A request whose own
processing fails (or whose caller stops reading, or is an async caller that was
cancelled: ``cancellation``) leaves the batch and only that
caller sees the error; a failure of the shared forward pass reaches every caller of that
batch. Each step's events reach their callers before the next forward pass.
"""

from __future__ import annotations

import atexit
import math
import queue
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

import torch

from langchain_adaptive_rag.engine.prefix_cache import PrefixCache
from langchain_adaptive_rag.engine.request import DecodeRequest
from langchain_adaptive_rag.engine.runner import decode_together
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.options import CaptureOptions, TokenEvent, capture_covers, capture_union

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from langchain_adaptive_rag.engine.capabilities import ModelCapabilities

__all__ = ["CPU_LINGER_SECONDS", "EXIT_WAIT_SECONDS", "IDLE_CHECK_SECONDS", "Scheduler"]

_END = object()
T = TypeVar("T")

CPU_LINGER_SECONDS = 0.5
"""How long the thread of a model on the CPU waits idle by default: a new thread costs
nothing there, and a live one slows torch's intra-op threads in others."""

IDLE_CHECK_SECONDS = 1.0
"""How often a thread that lingers long checks whether its engine is still in use."""

_LIVE: weakref.WeakSet[Scheduler] = weakref.WeakSet()
"""Engines whose idle worker threads are ended before the interpreter exits."""

_WORKERS: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
"""Every engine's worker thread, waited for before the interpreter exits."""

EXIT_WAIT_SECONDS = 10.0
"""How long the interpreter's exit waits for the engines' worker threads, in all."""


@atexit.register
def _end_idle_workers() -> None:
    """End every engine's lingering worker thread before shutdown, and wait for them.

    A thread that ran torch's intra-op (OpenMP) threads and is still alive at exit makes
    the process's teardown print "terminate called without an active exception"; so
    does one that is still freeing the tensors of an engine nobody uses any more (its
    last reference was the thread's own, so the engine has already left ``_LIVE``): the
    thread gives up the interpreter lock while it frees a tensor and is killed in C++
    when it takes it back during shutdown, which aborts the process.
    """
    for engine in list(_LIVE):
        engine.close(timeout=0.0)
    deadline = time.monotonic() + EXIT_WAIT_SECONDS
    for thread in list(_WORKERS):
        if thread is not threading.current_thread():
            thread.join(max(0.0, deadline - time.monotonic()))


@dataclass
class _SideJob(Generic[T]):
    """Another use of the model (a full forward pass), run between decoding steps.

    Jobs with the same ``key`` that are queued together run as one call of ``together``
    on their ``inputs`` (one batched forward pass); a job alone runs ``run``.
    """

    run: Callable[[], T]
    key: object = None
    inputs: object = None
    together: Callable[[list[object]], list[T]] | None = None
    done: threading.Event = field(default_factory=threading.Event)
    result: T | None = None
    error: BaseException | None = None

    def __call__(self) -> None:
        try:
            self.result = self.run()
        except BaseException as error:  # handed to the waiting caller
            self.error = error
        finally:
            self.done.set()


def _run_together(jobs: list[_SideJob[T]]) -> None:
    """Run jobs of one key as one batch; if the batch fails, each job alone."""
    together = jobs[0].together
    assert together is not None
    try:
        results = together([job.inputs for job in jobs])
    except Exception:  # a bad input fails only its own job: run them one by one
        for job in jobs:
            job()
        return
    for job, result in zip(jobs, results, strict=True):
        job.result = result
        job.done.set()


def _serve(engine_ref: weakref.ref[Scheduler]) -> None:
    """The model's thread: turns of ``Scheduler._serve_once`` while it lives.

    Between turns the thread holds the engine only weakly, so an engine (and the model)
    that nobody uses any more is freed, and its lingering thread ends.
    """
    while True:
        engine = engine_ref()
        if engine is None or not engine._serve_once():
            return
        del engine


@dataclass
class _Ticket:
    request: DecodeRequest
    stream: bool
    """Hand the caller the first sample's token events (the others are never read)."""
    events: queue.SimpleQueue[object] = field(default_factory=queue.SimpleQueue)
    step: list[TokenEvent] = field(default_factory=list)

    def flush(self) -> None:
        """Hand the caller the events of the last step at once (one wake-up a step)."""
        if self.step:
            self.events.put(self.step)
            self.step = []

    @property
    def rows(self) -> int:
        return self.request.num_samples


class Scheduler:
    """Joins concurrent decoding requests of one model into shared batches.

    Args:
        model: The causal LM.
        lock: Held while a batch decodes (the model's lock: other uses of the model,
            such as a reference-mode forward pass, run between batches).
        max_batch_rows: Most sequences (samples) decoded together.
        gather_seconds: How long the worker waits after the first queued request for
            others to arrive before it starts a batch.
        linger_seconds: How long the model's thread waits for work before it ends;
            ``math.inf``: it ends only with ``close`` or once the engine is dropped.
            Default (``None``): [`CPU_LINGER_SECONDS`][] for a model on the CPU, for
            ever for one on an accelerator, whose per-thread state (torch's cuDNN
            attention plans, one per key length) a new thread would build again.
        prefix_cache: Stored prompt prefixes the loops' prefills start from.
        share_prompts: Let a call's samples read one copy of its prompt (see
            [`decode_together`][]).
        capabilities: What the model supports (default: read at the first loop).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        lock: threading.RLock,
        *,
        max_batch_rows: int = 64,
        gather_seconds: float = 0.002,
        linger_seconds: float | None = None,
        prefix_cache: PrefixCache | None = None,
        share_prompts: bool = True,
        capabilities: ModelCapabilities | None = None,
    ) -> None:
        if max_batch_rows < 1:
            msg = f"max_batch_rows must be >= 1, got {max_batch_rows}."
            raise AdaptiveRAGError(msg)
        if linger_seconds is not None and not linger_seconds >= 0:
            msg = (
                f"linger_seconds must be >= 0 (math.inf: for ever) or None, got "
                f"{linger_seconds}. Fix: pass seconds, or None for the device's default."
            )
            raise AdaptiveRAGError(msg)
        self.model = model
        self.lock = lock
        self.max_batch_rows = max_batch_rows
        self.gather_seconds = gather_seconds
        self.linger_seconds = linger_seconds
        self.prefix_cache = prefix_cache
        self.share_prompts = share_prompts
        self.capabilities = capabilities
        self._pending: list[_Ticket] = []
        self._side: list[_SideJob[object]] = []
        self._looping = False
        self._closing = False
        self._condition = threading.Condition()
        self._worker: threading.Thread | None = None
        self._idle_since: float | None = None  # when the thread last ran out of work
        self.batch_sizes: Counter[int] = Counter()
        """How many loops started with each number of requests (for measurements)."""
        self.joined = 0
        """Requests that joined a loop already running."""
        self.side_batches: Counter[int] = Counter()
        """How many batched side jobs ran with each number of jobs (for measurements)."""
        self.dropped = 0
        """Requests whose callers stopped while they waited for a loop (never decoded)."""
        _LIVE.add(self)

    def linger(self) -> float:
        """Seconds the model's thread waits idle before it ends (``math.inf``: never)."""
        if self.linger_seconds is not None:
            return self.linger_seconds
        device = getattr(self.model, "device", None)
        on_cpu = not isinstance(device, torch.device) or device.type == "cpu"
        return CPU_LINGER_SECONDS if on_cpu else math.inf

    def close(self, timeout: float = 5.0) -> None:
        """End the worker now instead of after ``linger_seconds`` idle.

        Work running or queued is finished first (a busy worker ends once it is idle);
        a later call starts a new worker.

        Args:
            timeout: Seconds to wait for the worker to end.
        """
        with self._condition:
            worker = self._worker
            self._closing = worker is not None  # seen even if the worker is not waiting yet
            self._condition.notify_all()
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout)

    def decode(self, request: DecodeRequest, *, stream: bool = True) -> Iterator[TokenEvent]:
        """Decode one request with whatever else is queued; yields its events in order.

        The request's traces are on ``request.traces`` once the iteration ends. Closing
        the iterator early cancels the request. Only the first sample's events are
        handed over (a call's other samples are read from its traces), and with
        ``stream=False`` none: the caller sleeps until the request is done.

        Raises:
            BaseException: Whatever failed this request (its own processing, or the
                shared forward pass of its batch).
        """
        ticket = _Ticket(request, stream)
        with self._condition:
            self._pending.append(ticket)
            self._ensure_worker()
            self._condition.notify_all()
        finished = False
        try:
            while True:
                item = ticket.events.get()
                if item is _END:
                    finished = True
                    return
                if isinstance(item, BaseException):
                    finished = True
                    raise item
                assert isinstance(item, list)
                yield from item
        finally:
            if not finished:
                request.stop_requested = True  # the caller stopped reading

    def _ensure_worker(self) -> None:
        """Start the model's thread unless it runs (call with the condition held)."""
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(
                target=_serve, args=(weakref.ref(self),), name="adaptive-rag-decode", daemon=True
            )
            _WORKERS.add(self._worker)
            self._worker.start()

    def exclusive(self, run: Callable[[], T]) -> T:
        """Run ``run`` on the model's thread, with the model to itself.

        A decoding loop in progress pauses its captures, runs it at its next step
        boundary and goes on; an idle model runs it at once.

        Raises:
            BaseException: Whatever ``run`` raised.
        """
        return self.exclusive_batched(run)

    def exclusive_batched(
        self,
        run: Callable[[], T],
        *,
        key: object = None,
        inputs: object = None,
        together: Callable[[list[object]], list[T]] | None = None,
    ) -> T:
        """Like ``exclusive``; jobs queued together under one ``key`` share a batch.

        Args:
            run: The job alone.
            key: Jobs with this key (not ``None``) and a ``together`` run as one batch.
            inputs: This job's input to ``together``.
            together: Runs several jobs' inputs at once; returns their results in order.

        Raises:
            BaseException: Whatever the job raised.
        """
        if threading.current_thread() is self._worker:
            return run()
        job: _SideJob[T] = _SideJob(run, key=key, inputs=inputs, together=together)
        with self._condition:
            self._side.append(job)  # type: ignore[arg-type]
            self._ensure_worker()
            self._condition.notify_all()
        job.done.wait()
        if job.error is not None:
            raise job.error
        return job.result  # type: ignore[return-value]

    def _run_side_jobs(self) -> None:
        with self._condition:
            jobs, self._side = self._side, []
        groups: dict[object, list[_SideJob[object]]] = {}
        for job in jobs:
            if job.key is not None and job.together is not None:
                groups.setdefault(job.key, []).append(job)
            else:
                job()
        for group in groups.values():
            if len(group) == 1:
                group[0]()
            else:
                _run_together(group)
                self.side_batches[len(group)] += 1

    def _take_batch(self) -> tuple[list[_Ticket], CaptureOptions | None]:
        """Queued requests whose signals one set of hooks can read, and those hooks."""
        with self._condition:
            self._drop_stopped()
            if not self._pending:
                return [], None
            deadline = time.monotonic() + self.gather_seconds
            while sum(t.rows for t in self._pending) < self.max_batch_rows:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._condition.wait(left)
            self._drop_stopped()
            batch: list[_Ticket] = []
            rest: list[_Ticket] = []
            capture: CaptureOptions | None = None
            rows = 0
            for ticket in self._pending:
                joint = (
                    ticket.request.capture
                    if capture is None
                    else capture_union(capture, ticket.request.capture)
                )
                fits = not batch or rows + ticket.rows <= self.max_batch_rows
                if joint is not None and fits:
                    batch.append(ticket)
                    capture = joint
                    rows += ticket.rows
                else:
                    rest.append(ticket)
            self._pending = rest
            return batch, capture

    def _drop_stopped(self) -> None:
        """End the queued requests whose callers stopped before any loop took them.

        Call with the condition held. They end without decoding (their traces are
        empty): a caller that stopped reading, or an async caller that was cancelled.
        """
        waiting: list[_Ticket] = []
        for ticket in self._pending:
            if ticket.request.stop_requested:
                ticket.events.put(_END)
                self.dropped += 1
            else:
                waiting.append(ticket)
        self._pending = waiting

    def _serve_once(self) -> bool:
        """One turn of the model's thread: run what is queued, or wait for work.

        Every forward pass of the model runs on this thread: torch's intra-op threads
        (OpenMP) run 2-3x slower once two live threads have used them, so the callers'
        threads never run the model. The thread ends after ``linger`` seconds idle;
        one that lingers for ever waits in turns of [`IDLE_CHECK_SECONDS`][], between
        which it holds no reference to the engine (see ``_serve``).

        Returns:
            ``False`` once the thread is to end.
        """
        linger = self.linger()
        with self._condition:
            if not self._pending and not self._side:
                now = time.monotonic()
                if self._idle_since is None:
                    self._idle_since = now
                left = linger - (now - self._idle_since)
                if not self._closing and left > 0:
                    self._condition.wait(min(left, IDLE_CHECK_SECONDS))
                if not self._pending and not self._side:
                    if self._closing or time.monotonic() - self._idle_since >= linger:
                        self._worker = None  # idle: end the thread (and its OpenMP team)
                        self._closing = False
                        self._idle_since = None
                        return False
                    return True
            self._idle_since = None
        with self.lock:
            self._run_side_jobs()
        batch, capture = self._take_batch()
        if not batch or capture is None:
            return True
        self.batch_sizes[len(batch)] += 1
        with self._condition:
            self._looping = True
        try:
            self._run(batch, capture)
        finally:
            with self._condition:
                self._looping = False
        return True

    def _run(self, batch: list[_Ticket], capture: CaptureOptions) -> None:

        def admit(rows: int, longest: int | None) -> list[DecodeRequest]:
            """Queued requests the loop's hooks serve that fit, joining at a step boundary.

            ``longest``: the most positions a joining request may fill (the model's
            smallest sliding window; ``None``: any).
            """
            with self._condition:
                self._drop_stopped()
                if not all(
                    capture_covers(capture, t.request.capture)
                    and (longest is None or t.request.longest <= longest)
                    for t in self._pending
                ):
                    return []  # others wait for another loop: drain this one first
                joining: list[_Ticket] = []
                rest: list[_Ticket] = []
                for ticket in self._pending:
                    fits = rows + ticket.rows <= self.max_batch_rows
                    if fits and capture_covers(capture, ticket.request.capture):
                        joining.append(ticket)
                        rows += ticket.rows
                    else:
                        rest.append(ticket)
                self._pending = rest
            batch.extend(joining)
            self.joined += len(joining)
            return [t.request for t in joining]

        previous: _Ticket | None = None  # the ticket whose events of this step are held

        def step_done() -> None:
            """Hand over the step's last events before the next forward pass."""
            if previous is not None:
                previous.flush()

        try:
            with self.lock:
                stream = decode_together(
                    self.model,
                    [t.request for t in batch],
                    capture=capture,
                    admit=admit,
                    between=self._run_side_jobs,
                    step_done=step_done,
                    prefix_cache=self.prefix_cache,
                    max_rows=self.max_batch_rows,
                    share_prompts=self.share_prompts,
                    capabilities=self.capabilities,
                )
                for index, event in stream:
                    ticket = batch[index]
                    if previous is not None and previous is not ticket:
                        previous.flush()  # a request's events of one step come together
                    previous = ticket
                    if event is not None:
                        if ticket.stream and event.sample == 0:
                            ticket.step.append(event)
                    else:  # the request is done: its caller goes on at once
                        ticket.flush()
                        failed = ticket.request.error
                        ticket.events.put(_END if failed is None else failed)
                if previous is not None:
                    previous.flush()
        except Exception as error:  # the shared forward pass failed: every caller hears
            for ticket in batch:
                if not ticket.request.traces:
                    ticket.events.put(error)
