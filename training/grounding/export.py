"""Assembles the shipped fact-span model folder from a combiner run (`combiner.json`).

`models/fact_spans/` = the cross-encoder's int8 `model.onnx` and `tokenizer.json` (copied from
its export folder, sha256 checked against the sha256 the combiner was trained with), the
combiner's `combiner.onnx` (and the token narrower's `narrower.onnx` when dev chose word spans),
and a manifest (task `fact_spans_grounding`) carrying the threshold,
span mode, answer calibration, feature names, the cross-encoder's and the combiner's dev metrics and the recipe.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from autovalidators.inference.manifest import CARD_FILES, Manifest, ManifestError, load_manifest, write_manifest
from autovalidators.inference.validators.grounding_spans import TASK

from autovalidators.training.grounding.combiner import COMBINER_FILE


def export_combiner(run: Path, to: Path) -> Manifest:
    summary_path = Path(run) / "combiner.json"
    if not summary_path.is_file():
        raise FileNotFoundError(f"{summary_path}: missing; run `autovalidators train fact-spans-combiner` first")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    cross = summary.get("cross_encoder")
    if not cross:
        raise ValueError(f"{summary_path}: this combiner was trained without a cross-encoder; the shipped "
                         "model needs one (train with cross_encoder set)")
    source = Path(cross["path"])
    cross_manifest = load_manifest(source)
    if cross_manifest.model_sha256 != cross["sha256"]:
        raise ManifestError(f"{source}: cross-encoder sha256 {cross_manifest.model_sha256[:12]}… is not the one "
                            f"the combiner was trained with ({cross['sha256'][:12]}…); retrain the combiner")
    to = Path(to)
    # The model card's files survive a re-export (regenerate the card with `autovalidators card`).
    kept = {name: (to / name).read_bytes() for name in CARD_FILES if (to / name).is_file()}
    if to.exists():
        shutil.rmtree(to)
    to.mkdir(parents=True)
    for name, content in kept.items():
        (to / name).write_bytes(content)
    shutil.copyfile(source / cross_manifest.model_file, to / "model.onnx")
    shutil.copyfile(source / cross_manifest.tokenizer_file, to / "tokenizer.json")
    shutil.copyfile(Path(run) / COMBINER_FILE, to / COMBINER_FILE)
    narrower = summary.get("narrower")
    if narrower:
        shutil.copyfile(Path(run) / narrower["file"], to / narrower["file"])
    return write_manifest(to, {
        "name": "fact_spans", "task": TASK, "version": f"grounding-{cross['sha256'][:8]}",
        "base_model": cross_manifest.base_model, "labels": ["FACT", "NOISE", "HALLUCINATION"],
        "thresholds": summary["thresholds"],
        "window": {"max_length": cross_manifest.window.max_length, "stride": 0, "aggregation": "best_chunk"},
        "model_file": "model.onnx", "tokenizer_file": "tokenizer.json",
        "metrics": {"combiner_dev": summary["metrics"], "cross_encoder_dev": cross_manifest.metrics},
        "training": {"combiner_file": COMBINER_FILE, "span_mode": summary["span_mode"],
                     "phrase_gap": summary.get("phrase_gap", 1), "narrower": narrower,
                     "answer_calibration": summary.get("answer_calibration", {}),
                     "features": summary["features"], "combiner": summary["config"],
                     "combiner_config_source": summary["config_source"], "data": summary["data"],
                     "cross_encoder": cross_manifest.training, "onnx_parity_max_abs": summary["onnx_parity_max_abs"]},
        "fallback_languages": ["ru"],
    })
