"""`autovalidators benchmark abstention`: the shipped model on held-out families, beside the phrase list.

Rows come from the prepared `test` split (families never trained on, threshold chosen on `dev`):

- per language (en, ru) on the generated paraphrases plus real answers of that language;
- per kind (refusal, refusal + claim, hedged claim, claim, answer, real refusal/answer);
- on the real LLM responses (RAGTruth + HaluEval) alone, whose labels come from a rule checked by
  a person (`data_prep/samples/abstention/real_label_overrides.json`).

Each row is scored by the model as the gate serves it (`AbstentionModel.predict`) and by the phrase
list (`heuristics.abstains`, the fallback). Latency is per answer, one answer per call, on the
stated thread count. Prints one table and returns the JSON report.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from autovalidators.inference import heuristics
from autovalidators.inference.abstention import AbstentionModel
from autovalidators.inference.case import Case
from autovalidators.inference.manifest import load_manifest, update_manifest

from autovalidators.training.abstention.train import AbstentionConfig, prf, read_split
from autovalidators.training.benchmarks.common import machine, print_table, time_calls

logger = logging.getLogger(__name__)

GROUPS = ("en", "ru", "real")


def _groups(rows: list[dict]) -> dict[str, np.ndarray]:
    real = np.array([r["source"] in ("ragtruth", "halueval") for r in rows])
    masks = {"all": np.ones(len(rows), dtype=bool)}
    for language in ("en", "ru"):
        masks[language] = np.array([r["language"] == language for r in rows])
    masks["real"] = real
    for kind in sorted({r["kind"] for r in rows}):
        masks[f"kind:{kind}"] = np.array([r["kind"] == kind for r in rows])
    return masks


def benchmark_abstention(config: AbstentionConfig, model_dir: Path, *, split: str = "test", threads: int = 2,
                         update_manifest_metrics: bool = False, command: str = "") -> dict[str, Any]:
    manifest = load_manifest(model_dir)
    model = AbstentionModel(model_dir, manifest, threads=threads)
    rows = read_split(config.prepare.out_dir, split)
    cases = [Case(id=str(i), question="", answer=r["text"]) for i, r in enumerate(rows)]
    labels = np.array([r["label"] for r in rows])
    served = model.predict(cases)
    predicted = np.array([o.abstains for o in served])
    phrase = np.array([heuristics.abstains(r["text"]) for r in rows])
    table, metrics = [], {}
    for name, mask in _groups(rows).items():
        ours, baseline = prf(labels[mask], predicted[mask]), prf(labels[mask], phrase[mask])
        metrics[name] = {"model": ours, "phrase_list": baseline}
        if ours["positives"] or not name.startswith("kind:"):
            table.append({"set": name, "rows": ours["rows"], "refusals": ours["positives"],
                          "P": ours["precision"], "R": ours["recall"], "F1": ours["f1"],
                          "phrase-list F1": baseline["f1"]})
        else:  # all-negative kinds: the share wrongly called refusals is what matters
            table.append({"set": name, "rows": ours["rows"], "refusals": 0,
                          "false refusals": float(predicted[mask].mean()),
                          "phrase-list false refusals": float(phrase[mask].mean())})
    single = [Case(id="x", question="", answer=r["text"]) for r in rows[:200]]
    position = {"i": 0}

    def one() -> None:
        model.predict([single[position["i"] % len(single)]])
        position["i"] += 1

    latency = time_calls(one, runs=min(400, 2 * len(single)))
    table.append({"set": f"latency per answer ({threads} threads)", "p50 ms": latency["p50_ms"],
                  "p95 ms": latency["p95_ms"]})
    print_table(f"abstention on held-out families ({split} split, threshold {model.threshold:.3f})", table,
                ["set", "rows", "refusals", "P", "R", "F1", "phrase-list F1", "false refusals",
                 "phrase-list false refusals", "p50 ms", "p95 ms"], console=Console(stderr=True, width=180))
    errors = [{"text": r["text"][:300], "label": int(r["label"]), "kind": r["kind"], "language": r["language"],
               "probability": o.probability}
              for r, o, p in zip(rows, served, predicted) if bool(p) != bool(r["label"])]
    report = {
        "task": "abstention", "split": split, "model_dir": str(model_dir), "model_sha256": manifest.model_sha256,
        "threshold": model.threshold, "metrics": metrics, "latency": {**latency, "threads": threads},
        "model_mb": round((model_dir / manifest.model_file).stat().st_size / 2**20, 2),
        "machine": machine(), "errors": errors[:100], "command": command,
    }
    if update_manifest_metrics:
        summary = {group: {k: metrics[group]["model"][k] for k in ("precision", "recall", "f1", "rows", "positives")}
                   for group in ("all", *GROUPS)}
        update_manifest(model_dir, metrics={**manifest.metrics, "test": summary,
                                            "benchmark": {"command": command, "latency_p50_ms": latency["p50_ms"],
                                                          "threads": threads}})
        logger.info("wrote benchmark metrics into %s", model_dir / "manifest.json")
    return report
