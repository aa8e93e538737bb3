"""Admission control and batching across requests for the HTTP service, without FastAPI.

Every request's cases join one bounded queue. A few executor threads each take the oldest job,
gather more jobs for up to `max_wait_ms` (or until `max_batch_cases`), and run them as one
`Gate.validate_batch` call, so concurrent single-case requests share one model call per validator
(the dynamic batching of Triton and TorchServe). A case's scores do not depend on its batch-mates
(each encoder row runs on its own; `tests/inference/test_determinism.py`), so gathering is a speed
choice only.

Back-pressure instead of time-outs: a job is admitted only when the queue has room and its
estimated wait (the cases ahead of it times the measured seconds per case, over the executors)
fits inside its start deadline; otherwise `Overloaded` is raised before any work is done and the
server answers 503 with `Retry-After`. A job still queued when its deadline passes, or whose client
went away, is dropped without running. A job that started always finishes.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..case import Case

logger = logging.getLogger(__name__)

# Seconds per case assumed before the first batch is measured: a RAGTruth-sized case with the
# shipped models on one core. Only the first few admissions use it.
INITIAL_CASE_SECONDS = 0.25
# Weight of the newest batch in the running seconds-per-case estimate.
EWMA_WEIGHT = 0.2


class Overloaded(Exception):
    """The queue cannot take this job now; nothing was done. `retry_after_s` is the estimated wait."""

    def __init__(self, reason: str, message: str, retry_after_s: float):
        super().__init__(message)
        self.reason, self.message, self.retry_after_s = reason, message, retry_after_s


class Expired(Exception):
    """The job was still queued at its deadline, so it was dropped unstarted."""


@dataclass(eq=False)
class Job:
    """One request's cases waiting for, or in, an executor."""

    cases: list[Case]
    deadline: float  # time.monotonic() by which the job must start
    enqueued: float = field(default_factory=time.monotonic)
    future: Future = field(default_factory=Future)
    started: float | None = None


@dataclass
class SchedulerStats:
    """What the scheduler did since start (the HTTP layer's /metrics counts requests by status)."""

    admitted: int = 0
    shed: dict[str, int] = field(default_factory=lambda: {"queue_full": 0, "deadline": 0})
    expired: int = 0
    abandoned: int = 0
    completed: int = 0
    failed: int = 0
    batches: int = 0
    batched_cases: int = 0


class BatchingScheduler:
    """A bounded queue in front of `executors` threads that each run gathered batches."""

    def __init__(self, run_batch: Callable[[list[Case]], list[Any]], *, executors: int, max_batch_cases: int,
                 max_wait_ms: float, max_queue_cases: int,
                 observe: Callable[[str, float], None] | None = None):
        """
        Args:
            run_batch: validates a list of cases, returning one result per case in order
                (the server passes `Gate.validate_batch`).
            executors: threads running batches at once; with onnxruntime's intra-op threads this
                should not exceed the cores.
            max_batch_cases: most cases gathered into one call (a larger job runs alone, in pieces).
            max_wait_ms: how long an executor waits for more jobs after the first it takes.
            max_queue_cases: most cases waiting (not yet started); beyond it jobs are refused.
            observe: called with ("queue_wait" | "batch_size" | "case_seconds", value) per event,
                for metrics.
        """
        if executors < 1 or max_batch_cases < 1 or max_queue_cases < 1 or max_wait_ms < 0:
            raise ValueError("executors, max_batch_cases and max_queue_cases must be >= 1, max_wait_ms >= 0")
        self.run_batch = run_batch
        self.executors, self.max_batch_cases = executors, max_batch_cases
        self.max_wait_s, self.max_queue_cases = max_wait_ms / 1000.0, max_queue_cases
        self.observe = observe or (lambda name, value: None)
        self.stats = SchedulerStats()
        self.case_seconds = INITIAL_CASE_SECONDS
        self._queue: deque[Job] = deque()
        self._queued_cases = 0
        self._running_cases = 0
        self._closed = False
        self._lock = threading.Condition()
        self._threads = [threading.Thread(target=self._loop, name=f"autovalidators-batch-{i}", daemon=True)
                         for i in range(executors)]
        for thread in self._threads:
            thread.start()

    # -- what the server reads -------------------------------------------------------------
    @property
    def queued_cases(self) -> int:
        return self._queued_cases

    @property
    def queued_jobs(self) -> int:
        return len(self._queue)

    @property
    def running_cases(self) -> int:
        return self._running_cases

    def estimated_wait_s(self, extra_cases: int = 0) -> float:
        """Seconds until a job joining now would start: the work ahead of it over the executors."""
        ahead = self._queued_cases + self._running_cases + extra_cases
        return ahead * self.case_seconds / self.executors

    # -- admission ---------------------------------------------------------------------------
    def submit(self, cases: Sequence[Case], *, deadline: float) -> Job:
        """Queues `cases` to start before `deadline` (time.monotonic()); raises Overloaded at once if
        the queue is full or the estimated wait would pass the deadline."""
        cases = list(cases)
        with self._lock:
            if self._closed:
                raise Overloaded("closed", "the server is shutting down", 1.0)
            # A job larger than the whole queue is still admitted into an empty queue, else it could never run.
            if self._queued_cases and self._queued_cases + len(cases) > self.max_queue_cases:
                self.stats.shed["queue_full"] += 1
                wait = self.estimated_wait_s()
                raise Overloaded("queue_full", f"{self._queued_cases} cases are already queued (limit "
                                 f"{self.max_queue_cases}); retry in about {wait:.1f} s", wait)
            wait = self.estimated_wait_s()
            if time.monotonic() + wait > deadline and (self._queued_cases or self._running_cases):
                self.stats.shed["deadline"] += 1
                raise Overloaded("deadline", f"the estimated queue wait ({wait:.1f} s) is over this request's "
                                 "deadline; retry later", wait)
            job = Job(cases, deadline)
            self._queue.append(job)
            self._queued_cases += len(cases)
            self.stats.admitted += 1
            self._lock.notify()
        return job

    def cancel(self, job: Job) -> bool:
        """The client went away: drop the job if it has not started (True), else let it finish."""
        with self._lock:
            if job.started is None and job in self._queue:
                self._queue.remove(job)
                self._queued_cases -= len(job.cases)
                self.stats.abandoned += 1
                job.future.cancel()
                return True
        return False

    def close(self) -> None:
        """Stops taking jobs; queued jobs are dropped, running ones finish."""
        with self._lock:
            self._closed = True
            while self._queue:
                job = self._queue.popleft()
                job.future.cancel()
            self._queued_cases = 0
            self._lock.notify_all()

    # -- executors ---------------------------------------------------------------------------
    def _take(self) -> list[Job] | None:
        """The jobs of the next batch: the oldest live job, plus whatever arrives within max_wait."""
        with self._lock:
            while not self._queue and not self._closed:
                self._lock.wait()
            if self._closed:
                return None
            first_taken = time.monotonic()
            batch: list[Job] = []
            size = 0
            while True:
                now = time.monotonic()
                while self._queue and (not batch or size + len(self._queue[0].cases) <= self.max_batch_cases):
                    job = self._queue.popleft()
                    self._queued_cases -= len(job.cases)
                    if not job.future.set_running_or_notify_cancel():
                        continue  # its future was cancelled (the client went away): nothing to run
                    if now > job.deadline:  # it waited past its deadline: answer it, do not run it
                        self.stats.expired += 1
                        job.future.set_exception(Expired(f"queued {now - job.enqueued:.2f} s, past its deadline"))
                        continue
                    job.started = now
                    batch.append(job)
                    size += len(job.cases)
                remaining = first_taken + self.max_wait_s - now
                if not batch and not self._queue:
                    return []
                if size >= self.max_batch_cases or remaining <= 0 or (self._queue and batch):
                    break
                self._lock.wait(remaining)
            self._running_cases += size
            return batch

    def _loop(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            if not batch:
                continue
            size = sum(len(job.cases) for job in batch)
            try:
                self._run(batch)
            finally:
                with self._lock:
                    self._running_cases -= size

    def _run(self, batch: list[Job]) -> None:
        cases = [case for job in batch for case in job.cases]
        for job in batch:
            self.observe("queue_wait", (job.started or job.enqueued) - job.enqueued)
        began = time.monotonic()
        results: list[Any] = []
        try:
            for start in range(0, len(cases), self.max_batch_cases):
                results.extend(self.run_batch(cases[start:start + self.max_batch_cases]))
        except Exception as exc:  # a bug in a validator: every job of the batch gets it, the thread lives
            logger.exception("a batch of %d cases failed", len(cases))
            with self._lock:
                self.stats.failed += len(batch)
            for job in batch:
                job.future.set_exception(exc)
            return
        elapsed = time.monotonic() - began
        per_case = elapsed / max(len(cases), 1)
        with self._lock:
            self.case_seconds = (1 - EWMA_WEIGHT) * self.case_seconds + EWMA_WEIGHT * per_case
            self.stats.batches += 1
            self.stats.batched_cases += len(cases)
            self.stats.completed += len(batch)
        self.observe("batch_size", len(cases))
        self.observe("case_seconds", per_case)
        position = 0
        for job in batch:
            job.future.set_result(results[position:position + len(job.cases)])
            position += len(job.cases)


def retry_after_header(seconds: float) -> str:
    """Whole seconds, at least 1 (HTTP's Retry-After has no fractions)."""
    return str(max(1, math.ceil(seconds)))
