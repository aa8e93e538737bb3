"""The README's Spark snippet for real: `GateScorer.map_in_pandas` inside `mapInPandas` on local[2].

Spark needs a Java 17+ runtime (Debian's `default-jre-headless`; `.ci/run` installs it when
`java` is missing). Outside CI a machine without Java skips this test; in CI (`CI=true`) its
absence is a failure, so the check cannot silently stop running.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from importlib import resources

import pytest

from autovalidators.inference import Case, Gate
from autovalidators.inference.batch import SPARK_RESULT_SCHEMA, GateScorer

pytest.importorskip("pyspark", reason="the spark extra: pip install -e '.[spark]'")


def java_or_skip() -> None:
    if shutil.which("java"):
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("java is missing in CI; .ci/run installs it with `apt-get install -y default-jre-headless`")
    pytest.skip("no Java runtime: `apt-get install -y default-jre-headless` (Debian) to run the Spark check")


def example_rows() -> list[dict]:
    path = resources.files("autovalidators.inference").joinpath("examples/cases.jsonl")
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            case = json.loads(line)
            context = case.get("context") or []
            rows.append({"id": case["id"], "question": case["question"], "answer": case["answer"],
                         "context": [context] if isinstance(context, str) else context})
    return rows


@pytest.mark.slow
def test_gate_scorer_in_spark_map_in_pandas(monkeypatch):
    java_or_skip()
    from pyspark.sql import SparkSession

    # The Python workers must be this interpreter (the one with autovalidators installed).
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("autovalidators-test")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    try:
        rows = example_rows()
        rows.append({"id": "bad", "question": None, "answer": "No question came with this one.", "context": []})
        frame = spark.createDataFrame(rows, "id string, question string, answer string, context array<string>")
        schema = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in frame.schema) + ", " + SPARK_RESULT_SCHEMA
        scored = {r["id"]: r.asDict() for r in frame.repartition(2).mapInPandas(GateScorer().map_in_pandas,
                                                                                 schema=schema).collect()}
    finally:
        spark.stop()
    expected = Gate().validate_batch([Case(**{k: v for k, v in r.items()}) for r in rows[:-1]])
    assert {i: scored[i]["decision"] for i in scored if i != "bad"} == {r.id: r.decision.value for r in expected}
    assert all(json.loads(scored[r.id]["result"])["id"] == r.id for r in expected)
    assert scored["bad"]["decision"] is None and "field 'question'" in scored["bad"]["error"]
