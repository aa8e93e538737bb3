"""The admission queue and cross-request batching, without HTTP."""

from __future__ import annotations

import threading
import time
from concurrent.futures import CancelledError

import pytest

from autovalidators.inference import Case
from autovalidators.inference.serving.scheduler import BatchingScheduler, Expired, Overloaded


def _case(i: int) -> Case:
    return Case(id=f"c{i}", question="q?", answer=f"answer {i}")


class Recorder:
    """run_batch that records each call's case ids, optionally holding until released."""

    def __init__(self, delay_s: float = 0.0, fail: bool = False):
        self.calls: list[list[str]] = []
        self.delay_s, self.fail = delay_s, fail
        self.release = threading.Event()
        self.release.set()

    def __call__(self, cases: list[Case]) -> list[str]:
        self.calls.append([c.id for c in cases])
        self.release.wait(10)
        time.sleep(self.delay_s)
        if self.fail:
            raise RuntimeError("validator bug")
        return [f"result of {c.id}" for c in cases]


def _scheduler(run, **kwargs) -> BatchingScheduler:
    settings = dict(executors=1, max_batch_cases=8, max_wait_ms=50, max_queue_cases=16)
    settings.update(kwargs)
    return BatchingScheduler(run, **settings)


def test_concurrent_jobs_are_gathered_into_one_call_and_answered_in_order() -> None:
    run = Recorder()
    scheduler = _scheduler(run, max_wait_ms=200)
    far = time.monotonic() + 10
    jobs = [scheduler.submit([_case(i)], deadline=far) for i in range(3)]
    jobs.append(scheduler.submit([_case(3), _case(4)], deadline=far))
    answers = [job.future.result(timeout=5) for job in jobs]
    scheduler.close()
    assert answers == [["result of c0"], ["result of c1"], ["result of c2"], ["result of c3", "result of c4"]]
    assert run.calls == [["c0", "c1", "c2", "c3", "c4"]]
    assert scheduler.stats.batches == 1 and scheduler.stats.completed == 4


def test_a_batch_never_exceeds_max_batch_cases() -> None:
    run = Recorder()
    run.release.clear()  # hold the executor so every job is queued before the first batch forms
    scheduler = _scheduler(run, max_batch_cases=3, max_wait_ms=0)
    far = time.monotonic() + 10
    first = scheduler.submit([_case(0)], deadline=far)
    time.sleep(0.05)
    jobs = [scheduler.submit([_case(i), _case(i + 10)], deadline=far) for i in range(1, 4)]
    run.release.set()
    for job in [first, *jobs]:
        job.future.result(timeout=5)
    scheduler.close()
    assert all(len(call) <= 3 for call in run.calls)
    assert sorted(c for call in run.calls for c in call) == sorted(["c0", "c1", "c11", "c2", "c12", "c3", "c13"])


def test_a_full_queue_refuses_at_once_without_running_anything() -> None:
    run = Recorder()
    run.release.clear()
    scheduler = _scheduler(run, max_queue_cases=2, max_wait_ms=0)
    far = time.monotonic() + 10
    running = scheduler.submit([_case(0)], deadline=far)
    time.sleep(0.05)  # taken by the executor, which now waits on `release`
    queued = scheduler.submit([_case(1), _case(2)], deadline=far)
    began = time.perf_counter()
    with pytest.raises(Overloaded) as refused:
        scheduler.submit([_case(3)], deadline=far)
    assert time.perf_counter() - began < 0.05
    assert refused.value.reason == "queue_full" and refused.value.retry_after_s > 0
    run.release.set()
    assert running.future.result(timeout=5) and queued.future.result(timeout=5)
    scheduler.close()
    assert ["c3"] not in run.calls and scheduler.stats.shed["queue_full"] == 1


def test_an_estimated_wait_past_the_deadline_is_refused() -> None:
    run = Recorder()
    run.release.clear()
    scheduler = _scheduler(run, max_wait_ms=0)
    scheduler.case_seconds = 2.0  # as if measured
    scheduler.submit([_case(0)], deadline=time.monotonic() + 10)
    time.sleep(0.05)
    with pytest.raises(Overloaded) as refused:
        scheduler.submit([_case(1)], deadline=time.monotonic() + 1.0)  # 2 s of work is ahead
    assert refused.value.reason == "deadline"
    run.release.set()
    scheduler.close()


def test_a_job_still_queued_at_its_deadline_is_dropped_unstarted() -> None:
    run = Recorder()
    run.release.clear()
    scheduler = _scheduler(run, max_wait_ms=0)
    scheduler.case_seconds = 0.01  # the estimate admits it; the real work is slower
    first = scheduler.submit([_case(0)], deadline=time.monotonic() + 10)
    time.sleep(0.05)
    late = scheduler.submit([_case(1)], deadline=time.monotonic() + 0.1)
    time.sleep(0.2)
    run.release.set()
    first.future.result(timeout=5)
    with pytest.raises(Expired):
        late.future.result(timeout=5)
    scheduler.close()
    assert run.calls == [["c0"]] and scheduler.stats.expired == 1


def test_a_cancelled_queued_job_frees_its_place_and_never_runs() -> None:
    run = Recorder()
    run.release.clear()
    scheduler = _scheduler(run, max_queue_cases=1, max_wait_ms=0)
    far = time.monotonic() + 10
    first = scheduler.submit([_case(0)], deadline=far)
    time.sleep(0.05)
    gone = scheduler.submit([_case(1)], deadline=far)
    assert scheduler.cancel(gone) is True
    replacement = scheduler.submit([_case(2)], deadline=far)  # the place is free again
    run.release.set()
    first.future.result(timeout=5)
    replacement.future.result(timeout=5)
    scheduler.close()
    with pytest.raises(CancelledError):
        gone.future.result(timeout=1)
    assert ["c1"] not in run.calls and all("c1" not in call for call in run.calls)
    assert scheduler.stats.abandoned == 1


def test_a_failing_batch_fails_its_jobs_and_the_executor_keeps_serving() -> None:
    run = Recorder(fail=True)
    scheduler = _scheduler(run, max_wait_ms=0)
    job = scheduler.submit([_case(0)], deadline=time.monotonic() + 10)
    with pytest.raises(RuntimeError, match="validator bug"):
        job.future.result(timeout=5)
    run.fail = False
    assert scheduler.submit([_case(1)], deadline=time.monotonic() + 10).future.result(timeout=5) == ["result of c1"]
    scheduler.close()
    assert scheduler.stats.failed == 1 and scheduler.stats.completed == 1


def test_the_per_case_estimate_follows_measured_batches() -> None:
    run = Recorder(delay_s=0.05)
    scheduler = _scheduler(run, max_wait_ms=0)
    for i in range(8):
        scheduler.submit([_case(i)], deadline=time.monotonic() + 10).future.result(timeout=5)
    scheduler.close()
    assert 0.04 < scheduler.case_seconds < 0.1  # from the initial 0.25 toward the measured 0.05


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="executors"):
        BatchingScheduler(Recorder(), executors=0, max_batch_cases=1, max_wait_ms=0, max_queue_cases=1)
