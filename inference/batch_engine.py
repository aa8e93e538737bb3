"""The engines behind `autovalidators batch`: in this process (or a local pool), or Ray Data.

Both run the same `ShardScorer` on the same shards (`batch_io.plan_shards`), so they give the
same results; only the scheduling differs. A scorer builds its Gate (ONNX sessions included) once,
on the first shard it sees, and keeps it: in Ray Data it is the callable class of an actor pool,
one Gate per actor; in a local pool one per process.
"""

from __future__ import annotations

import json
import os
import resource
from typing import Any, Iterable, Iterator, Sequence

from .batch_io import OUTPUT_COLUMNS, Shard, output_schema, read_shard, record_key
from .case import Case, CaseError
from .latency import peak_rss_mb

WORKER_COLUMNS = (("worker_pid", "int"), ("worker_peak_rss_mb", "float"), ("worker_cpu_s", "float"))
CHUNK = 32  # cases per Gate call: validate's batch size, so both see the same batches


def cpu_seconds() -> float:
    """CPU time this process has used so far (user + system, all its threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class ShardScorer:
    """Shard descriptors in, scored chunks (dict of columns, OUTPUT_COLUMNS + worker stats) out.

    Settings only are pickled; the Gate is built where the scorer runs. `skip` holds the keys
    (`batch_io.record_key`) already in the output: those records are read but not scored.
    """

    def __init__(self, config: str | None = None, validators: Sequence[str] | None = None,
                 models_dir: str | None = None, threads: int | None = None, skip: Iterable[str] = ()):
        self.config = config
        self.validators = list(validators) if validators else None
        self.models_dir = models_dir
        self.threads = threads
        self.skip = frozenset(skip)
        self._gate = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_gate": None}

    @property
    def gate(self):
        if self._gate is None:
            from .config import load_gate_config
            from .gate import Gate

            if self.threads:  # read by OnnxSession: one worker per core wants one thread each
                os.environ["AUTOVALIDATORS_THREADS"] = str(self.threads)
            self._gate = Gate(load_gate_config(self.config), validators=self.validators, models_dir=self.models_dir)
        return self._gate

    def score_shard(self, shard: Shard) -> Iterator[dict[str, list]]:
        """One chunk of columns per CHUNK records of the shard (skipped ones left out)."""
        chunk: list[Case | CaseError] = []
        for record in read_shard(shard, self.gate.config.input.max_text_chars):
            key = record_key({"id": record.id, "line": record.line if isinstance(record, CaseError) else None})
            if key in self.skip:
                continue
            chunk.append(record)
            if len(chunk) == CHUNK:
                yield self._score(chunk)
                chunk = []
        if chunk:
            yield self._score(chunk)

    def _score(self, records: list[Case | CaseError]) -> dict[str, list]:
        cases = [r for r in records if isinstance(r, Case)]
        produced = iter(self.gate.validate_batch(cases))
        columns: dict[str, list] = {name: [] for name in OUTPUT_COLUMNS}
        for record in records:
            if isinstance(record, CaseError):
                values = {"id": record.id, "line": record.line, "error": str(record),
                          "result": json.dumps(record.to_dict(), ensure_ascii=False)}
            else:
                result = next(produced)
                values = {"id": result.id, "line": None, "decision": result.decision.value,
                          "failure_type": result.failure_type.value, "next_action": result.next_action.value,
                          "reason": result.reason, "confidence": result.confidence,
                          "result": json.dumps(result.to_dict(), ensure_ascii=False)}
            for name in OUTPUT_COLUMNS:
                columns[name].append(values.get(name))
        # Who scored it, and that worker's memory and CPU so far: the run's summary reports them
        # (CPU time, unlike wall time, does not depend on how busy the machine is).
        columns["worker_pid"] = [os.getpid()] * len(records)
        columns["worker_peak_rss_mb"] = [round(peak_rss_mb(), 1)] * len(records)
        columns["worker_cpu_s"] = [round(cpu_seconds(), 3)] * len(records)
        return columns

    # Ray Data's callable-class form: a batch of shard descriptors in, a generator of chunks out.
    def __call__(self, batch: dict[str, Any]) -> Iterator[dict[str, list]]:
        import pyarrow as pa

        schema = output_schema(WORKER_COLUMNS)
        fields = ("path", "format", "start", "stop", "first_line")
        count = len(batch["path"])
        for i in range(count):
            values = {name: batch[name][i] for name in fields}
            shard = Shard(str(values["path"]), str(values["format"]), int(values["start"]), int(values["stop"]),
                          int(values["first_line"]))
            for chunk in self.score_shard(shard):
                # An Arrow table with a fixed schema: Ray would otherwise guess column types per chunk.
                yield pa.Table.from_pydict(chunk, schema=schema)


def run_local(shards: list[Shard], scorer: ShardScorer, workers: int = 1) -> Iterator[dict[str, list]]:
    """In this process (workers=1, streaming chunk by chunk), or a pool of `workers` processes."""
    if workers <= 1:
        for shard in shards:
            yield from scorer.score_shard(shard)
        return
    import multiprocessing

    # spawn, not fork: onnxruntime's thread pools do not survive a fork, and each worker builds
    # its own Gate anyway. imap keeps the input order.
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers, initializer=_init_worker, initargs=(scorer,)) as pool:
        for chunks in pool.imap(_score_in_worker, shards):
            yield from chunks


_WORKER: ShardScorer | None = None


def _init_worker(scorer: ShardScorer) -> None:
    global _WORKER
    _WORKER = scorer


def _score_in_worker(shard: Shard) -> list[dict[str, list]]:
    assert _WORKER is not None, "pool worker used before its initializer ran"
    return list(_WORKER.score_shard(shard))


def run_ray(shards: list[Shard], scorer: ShardScorer, workers: int, address: str | None = None
            ) -> Iterator[dict[str, list]]:
    """Ray Data: the shard list as a dataset, `map_batches` over an actor pool of `workers` scorers.

    `address`: an existing cluster (`ray://host:10001` or `auto`); without it a local runtime with
    `workers` CPUs is started and stopped here. Workers read the input themselves, so on a cluster
    the input path must be visible to every node (a shared file system). Results stream back to
    this process in input order as they are produced.
    """
    import logging

    from .batch_io import BatchInputError

    try:
        import ray
        import ray.data
    except ImportError:
        raise BatchInputError("--engine ray needs Ray Data: pip install -e \".[ray]\"") from None
    started = False
    if not ray.is_initialized():
        quiet = {"log_to_driver": False, "logging_level": logging.WARNING}
        if address:
            try:
                ray.init(address=address, **quiet)
            except ConnectionError as exc:
                raise BatchInputError(f"--ray-address {address}: cannot join that Ray cluster ({exc}); is it "
                                      "running (`ray status`), and is this its GCS address (host:port)?") from None
        else:
            ray.init(num_cpus=workers, include_dashboard=False, **quiet)
        started = True
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    try:
        context = ray.data.DataContext.get_current()
        context.execution_options.preserve_order = True
        context.enable_progress_bars = False  # the command draws its own
        dataset = ray.data.from_items([s.to_dict() for s in shards], override_num_blocks=max(1, len(shards)))
        scored = dataset.map_batches(ShardScorer, fn_constructor_kwargs=_constructor_kwargs(scorer), batch_size=1,
                                     compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=1)
        for batch in scored.iter_batches(batch_format="pyarrow", batch_size=None, prefetch_batches=2):
            yield {name: batch.column(name).to_pylist() for name in batch.column_names}
    finally:
        if started:
            ray.shutdown()


def _constructor_kwargs(scorer: ShardScorer) -> dict[str, Any]:
    return {"config": scorer.config, "validators": scorer.validators, "models_dir": scorer.models_dir,
            "threads": scorer.threads, "skip": sorted(scorer.skip)}

