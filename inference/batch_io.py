"""Streaming input and resumable output for `autovalidators batch`: JSONL and Parquet.

The input is cut into shards that a worker can read by itself (no record passes through the
driver): a JSONL shard is a byte range of whole lines, a Parquet shard one row group. Shards are
planned by one sequential scan (JSONL) or from the footer (Parquet), so a log larger than memory
only ever has a shard per worker in memory. Records are parsed exactly as `validate` parses them
(`case.parse_case`): a bad one becomes a `CaseError` naming its file, line (Parquet: row) and
field, and the rest of the shard is scored.

Output is appended as it arrives, so a killed run loses little:
- JSONL: one line per input record, the line `validate` writes (result or error record), flushed
  per chunk of 32 (a torn last line is dropped on the rerun);
- Parquet: a folder of part files (`part-<run>-<n>.parquet`, each written whole then renamed,
  10,000 rows each: what a kill can lose) with columns `id, line, decision, failure_type,
  next_action, reason, confidence, error, result` (`result`: the JSONL line).
A rerun reads the ids already in the output (errors without an id by their line) and skips them.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from .case import DEFAULT_MAX_TEXT_CHARS, Case, CaseError, decode_line, parse_case

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
PARQUET_SUFFIXES = (".parquet", ".pq")
# The columns every scored chunk has, in order; the Parquet output's schema.
OUTPUT_COLUMNS = ("id", "line", "decision", "failure_type", "next_action", "reason", "confidence", "error", "result")


class BatchInputError(ValueError):
    """The input or output as a whole cannot be used (wrong format, unreadable file, missing extra)."""


def detect_format(path: str | Path, *, output: bool = False) -> str:
    """`jsonl` or `parquet` from the name (a Parquet output is a folder; an input may be one)."""
    path = Path(path)
    if path.suffix.lower() in JSONL_SUFFIXES:
        return "jsonl"
    if path.suffix.lower() in PARQUET_SUFFIXES or (not output and path.is_dir()):
        return "parquet"
    raise BatchInputError(f"{path}: cannot tell the format from the name; use .jsonl for JSON lines or "
                          ".parquet for Parquet (a file, or a folder of .parquet files)")


def require_pyarrow() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise BatchInputError("Parquet needs pyarrow: pip install -e \".[batch]\"") from None
    return pq


@dataclass(frozen=True)
class Shard:
    """A piece of the input one worker reads on its own.

    JSONL: bytes [start, stop) holding whole lines, the first being line `first_line`.
    Parquet: row group `start` of the file (`stop` unused), its first row being row `first_line`.
    """

    path: str
    format: str
    start: int
    stop: int
    first_line: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_shards(path: str | Path, shard_lines: int = 256) -> tuple[list[Shard], int]:
    """The input's shards and its record count (non-blank lines, or Parquet rows)."""
    path = Path(path)
    if not path.exists():
        raise BatchInputError(f"{path}: no such file")
    if detect_format(path) == "parquet":
        return _parquet_shards(path)
    shards, records = [], 0
    start = offset = 0
    first = lines = 1
    in_shard = 0
    with open(path, "rb") as handle:
        for raw in handle:
            offset += len(raw)
            in_shard += 1
            records += bool(raw.strip())
            if in_shard == shard_lines:
                shards.append(Shard(str(path), "jsonl", start, offset, first))
                start, first, in_shard = offset, lines + 1, 0
            lines += 1
    if in_shard:
        shards.append(Shard(str(path), "jsonl", start, offset, first))
    return shards, records


def _parquet_files(path: Path) -> list[Path]:
    files = sorted(p for p in path.rglob("*") if p.suffix.lower() in PARQUET_SUFFIXES) if path.is_dir() else [path]
    if not files:
        raise BatchInputError(f"{path}: a folder without .parquet files")
    return files


def _parquet_shards(path: Path) -> tuple[list[Shard], int]:
    pq = require_pyarrow()
    shards, records = [], 0
    for file in _parquet_files(path):
        try:
            metadata = pq.ParquetFile(file).metadata
        except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
            raise BatchInputError(f"{file}: not a readable Parquet file ({exc})") from None
        row = 1
        for group in range(metadata.num_row_groups):
            shards.append(Shard(str(file), "parquet", group, group + 1, row))
            row += metadata.row_group(group).num_rows
        records += metadata.num_rows
    return shards, records


def read_shard(shard: Shard, max_text_chars: int = DEFAULT_MAX_TEXT_CHARS) -> Iterator[Case | CaseError]:
    """Every record of a shard as a `Case` or a `CaseError` (what `validate` would say), in order."""
    if shard.format == "parquet":
        yield from _read_parquet_group(shard, max_text_chars)
        return
    with open(shard.path, "rb") as handle:
        handle.seek(shard.start)
        data = handle.read(shard.stop - shard.start)
    for line_number, raw in enumerate(data.splitlines(), start=shard.first_line):
        if not raw.strip():
            continue
        record = decode_line(raw, line_number, shard.path)
        yield record if isinstance(record, CaseError) else parse_case(
            record, line=line_number, source=shard.path, max_text_chars=max_text_chars)


def _read_parquet_group(shard: Shard, max_text_chars: int) -> Iterator[Case | CaseError]:
    from .batch import CASE_COLUMNS, _plain

    pq = require_pyarrow()
    handle = pq.ParquetFile(shard.path)
    # Only the case columns are read (a log may carry many others); unknown columns are ignored.
    columns = [name for name in CASE_COLUMNS if name in handle.schema_arrow.names]
    row = shard.first_line
    for batch in handle.iter_batches(batch_size=1024, row_groups=[shard.start], columns=columns):
        for record in batch.to_pylist():
            plain = {k: _plain(v) for k, v in record.items() if v is not None}
            yield parse_case(plain, line=row, source=f"{shard.path} row", max_text_chars=max_text_chars)
            row += 1


# ------------------------------------------------------------------------------------------ output


def record_key(record: dict[str, Any]) -> str:
    """What a rerun skips on: the id, or for an error record without one its input line."""
    if record.get("id") is not None:
        return f"id:{record['id']}"
    return f"line:{record.get('line')}"


class JsonlSink:
    """Appends `validate`'s lines to one file; a rerun first drops a half-written last line."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_file():
            _drop_partial_line(path)
        self._handle = None

    def done_keys(self) -> set[str]:
        keys: set[str] = set()
        if not self.path.is_file():
            return keys
        with open(self.path, encoding="utf-8") as handle:
            for number, text in enumerate(handle, start=1):
                try:
                    record = json.loads(text)
                except json.JSONDecodeError:
                    raise BatchInputError(f"{self.path}:{number}: not a JSON line, so this is not an output of "
                                          "`autovalidators batch`; choose another --output") from None
                error = record.get("error") if isinstance(record.get("error"), dict) else {}
                keys.add(record_key({"id": record.get("id"), "line": error.get("line")}))
        return keys

    def write(self, chunk: dict[str, list]) -> None:
        if self._handle is None:
            self._handle = open(self.path, "a", encoding="utf-8")
        self._handle.write("".join(line + "\n" for line in chunk["result"]))
        self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()


def _drop_partial_line(path: Path) -> None:
    size = path.stat().st_size
    if size == 0:
        return
    with open(path, "rb+") as handle:
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return
        # Walk back to the last complete line (a crash mid-write leaves at most one partial line).
        position = size - 1
        while position > 0:
            step = min(1 << 16, position)
            handle.seek(position - step)
            block = handle.read(step)
            cut = block.rfind(b"\n")
            if cut >= 0:
                handle.truncate(position - step + cut + 1)
                return
            position -= step
        handle.truncate(0)


class ParquetSink:
    """A folder of Parquet part files; each is complete on disk before it is visible."""

    def __init__(self, folder: Path, rows_per_part: int = 10_000):
        self.pq = require_pyarrow()
        import pyarrow as pa

        self.pa = pa
        if folder.is_file():
            raise BatchInputError(f"{folder}: a Parquet output is a folder of part files; remove the file or "
                                  "choose another --output")
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.rows_per_part = rows_per_part
        self.schema = output_schema()
        runs = {p.name.split("-")[1] for p in folder.glob("part-*.parquet")}
        self.run = max((int(r) for r in runs if r.isdigit()), default=-1) + 1
        self.parts = 0
        self.pending: dict[str, list] = {name: [] for name in OUTPUT_COLUMNS}

    def done_keys(self) -> set[str]:
        keys: set[str] = set()
        for part in sorted(self.folder.glob("part-*.parquet")):
            table = self.pq.read_table(part, columns=["id", "line"])
            keys.update(record_key({"id": i, "line": n})
                        for i, n in zip(table.column("id").to_pylist(), table.column("line").to_pylist()))
        return keys

    def write(self, chunk: dict[str, list]) -> None:
        for name in OUTPUT_COLUMNS:
            self.pending[name].extend(chunk[name])
        if len(self.pending["id"]) >= self.rows_per_part:
            self._flush()

    def _flush(self) -> None:
        if not self.pending["id"]:
            return
        table = self.pa.Table.from_pydict(self.pending, schema=self.schema)
        target = self.folder / f"part-{self.run:05d}-{self.parts:05d}.parquet"
        temporary = target.with_suffix(".tmp")
        self.pq.write_table(table, temporary)
        os.replace(temporary, target)
        self.parts += 1
        self.pending = {name: [] for name in OUTPUT_COLUMNS}

    def close(self) -> None:
        self._flush()


def output_schema(extra: Sequence[tuple[str, str]] = ()) -> Any:
    """The Arrow schema of OUTPUT_COLUMNS (plus `extra` (name, type) columns): fixed, so chunks
    that happen to hold no errors (an all-null column) still line up with those that do."""
    import pyarrow as pa

    types = {"line": pa.int64(), "confidence": pa.int64(), "float": pa.float64(), "int": pa.int64()}
    fields = [(name, types.get(name, pa.string())) for name in OUTPUT_COLUMNS]
    return pa.schema(fields + [(name, types[kind]) for name, kind in extra])


def open_sink(path: Path) -> JsonlSink | ParquetSink:
    return ParquetSink(path) if detect_format(path, output=True) == "parquet" else JsonlSink(path)
