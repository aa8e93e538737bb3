"""`GET /metrics`: the service's counters in Prometheus text format (prometheus_client).

One registry per app, so several apps in one process (tests, notebooks) keep their own numbers.
Queue depth and work in progress are read from the scheduler when scraped, never stored twice.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from .scheduler import BatchingScheduler

# Seconds: from a fast 503 (a few ms) to a long batch request.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)


class ServiceMetrics:
    """What an orchestrator or dashboard scrapes: queue, in-flight, shed, latency, batch sizes."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, scheduler: BatchingScheduler):
        self.registry = CollectorRegistry()
        r = self.registry
        Gauge("autovalidators_queue_cases", "cases waiting for an executor", registry=r).set_function(
            lambda: scheduler.queued_cases)
        Gauge("autovalidators_queue_requests", "requests waiting for an executor", registry=r).set_function(
            lambda: scheduler.queued_jobs)
        Gauge("autovalidators_in_flight_cases", "cases being validated now", registry=r).set_function(
            lambda: scheduler.running_cases)
        Gauge("autovalidators_case_seconds_estimate", "running estimate of seconds per case per executor",
              registry=r).set_function(lambda: scheduler.case_seconds)
        self.requests = Counter("autovalidators_requests", "validate requests answered, by HTTP status",
                                ["status"], registry=r)
        self.shed = Counter("autovalidators_shed_requests", "requests refused with 503 before any work, by reason",
                            ["reason"], registry=r)
        self.latency = Histogram("autovalidators_request_seconds", "validate request latency, body read included",
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.queue_wait = Histogram("autovalidators_queue_wait_seconds", "time a request waited before its batch",
                                    buckets=LATENCY_BUCKETS, registry=r)
        self.batch_size = Histogram("autovalidators_batch_cases", "cases per Gate call", buckets=BATCH_BUCKETS,
                                    registry=r)

    def observe(self, name: str, value: float) -> None:
        """The scheduler's hook: queue waits and batch sizes as they happen."""
        if name == "queue_wait":
            self.queue_wait.observe(value)
        elif name == "batch_size":
            self.batch_size.observe(value)

    def render(self) -> bytes:
        return generate_latest(self.registry)
