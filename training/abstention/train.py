"""The abstention model: train (scikit-learn), export (ONNX + manifest) and benchmark.

A small model of its own, not a head on an encoder: hashed character/word n-grams
(`inference.abstention_features`) into logistic regression or a one-hidden-layer MLP. The export
writes the weights as an ONNX graph that takes padded (bucket ids, values) pairs:

    Gather(W1, indices) * values -> ReduceSum over features (+ b1) [-> Relu -> MatMul W2 + b2] -> Sigmoid

so inference needs numpy and onnxruntime only. No pickle anywhere: the run folder holds the
weights as `.npy` arrays and a JSON summary.

Commands (`training/abstention/cli.py`): `prepare abstention`, `train abstention`,
`export abstention`, `benchmark abstention`; settings in `configs/abstention.yaml`.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from autovalidators.data_prep.abstention import AbstentionDataConfig
from autovalidators.data_prep.io import read_jsonl
from autovalidators.inference.abstention import INPUT_NAMES, LABEL, NAME, OUTPUT_NAME, phrase_hits
from autovalidators.inference.abstention_features import FeatureSpec, featurize
from autovalidators.inference.config import CONFIG_DIR, load_config
from autovalidators.inference.manifest import CARD_FILES, write_manifest

logger = logging.getLogger(__name__)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FeatureConfig(_Strict):
    hash_dim: int = Field(1 << 17, ge=2, description="hash buckets (weights: hash_dim x hidden floats)")
    char_ngrams: tuple[int, int] = (2, 5)
    word_ngrams: int = Field(2, ge=1)
    max_chars: int = Field(4000, ge=2, description="longer answers are read as head + tail")

    def spec(self) -> FeatureSpec:
        return FeatureSpec.from_dict(self.model_dump())


class TrainConfig(_Strict):
    model: Literal["logistic", "mlp"] = "mlp"
    c: float = Field(8.0, gt=0, description="logistic: inverse L2 strength")
    hidden: int = Field(32, ge=1, description="mlp: hidden units")
    alpha: float = Field(1e-4, ge=0, description="mlp: L2 penalty")
    max_iter: int = Field(25, ge=1, description="logistic: solver iterations; mlp: epochs")
    balanced: bool = Field(True, description="weight classes by inverse frequency")
    real_repeats: int = Field(1, ge=1, description="times each real LLM response (RAGTruth, HaluEval) is "
                                                   "seen per epoch: they are few beside the generated rows")
    seed: int = 13
    output_dir: str = "runs/abstention"


class ExportConfig(_Strict):
    max_model_mb: float = Field(40.0, gt=0, description="refuse to export a bigger model.onnx")
    parity_atol: float = Field(1e-4, gt=0, description="ONNX vs scikit-learn probability tolerance")


class AbstentionConfig(_Strict):
    prepare: AbstentionDataConfig = AbstentionDataConfig()
    features: FeatureConfig = FeatureConfig()
    train: TrainConfig = TrainConfig()
    export: ExportConfig = ExportConfig()


def load_abstention_config(path: str | Path | None = None) -> AbstentionConfig:
    return load_config(path or CONFIG_DIR / "abstention.yaml", AbstentionConfig)


# ----- features ----------------------------------------------------------------------------------

def design_matrix(texts: Sequence[str], spec: FeatureSpec):
    """CSR matrix (n, hash_dim) of the same values the ONNX graph multiplies."""
    from scipy.sparse import csr_matrix

    rows = featurize(texts, spec, phrase_hits(texts, spec.max_chars))
    indptr = np.cumsum([0] + [len(ids) for ids, _ in rows])
    indices = np.concatenate([ids for ids, _ in rows]) if rows else np.zeros(0, dtype=np.int64)
    data = np.concatenate([vals for _, vals in rows]) if rows else np.zeros(0, dtype=np.float32)
    return csr_matrix((data, indices, indptr), shape=(len(texts), spec.hash_dim), dtype=np.float32)


def read_split(prepared: str | Path, split: str) -> list[dict]:
    path = Path(prepared) / f"{split}.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; run `autovalidators prepare abstention` first")
    return list(read_jsonl(path))


# ----- metrics -----------------------------------------------------------------------------------

def prf(labels: Sequence[int], predicted: Sequence[bool]) -> dict[str, float]:
    """Precision, recall and F1 of the positive class (abstains), with the counts behind them."""
    y, p = np.asarray(labels, dtype=bool), np.asarray(predicted, dtype=bool)
    tp, fp, fn = int((y & p).sum()), int((~y & p).sum()), int((y & ~p).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "accuracy": float((y == p).mean()) if len(y) else 0.0,
            "rows": int(len(y)), "positives": int(y.sum())}


def best_threshold(labels: Sequence[int], probabilities: np.ndarray) -> float:
    """The dev threshold with the highest F1 (ties: the one closest to 0.5)."""
    candidates = np.unique(np.round(probabilities, 4))
    scored = [(prf(labels, probabilities >= t)["f1"], -abs(t - 0.5), float(t)) for t in candidates]
    return max(scored)[2] if scored else 0.5


# ----- train -------------------------------------------------------------------------------------

class _Weights:
    """The fitted model as plain arrays: w1 (dim, h), b1 (h,), and for the MLP w2 (h, 1), b2 (1,)."""

    def __init__(self, arrays: dict[str, np.ndarray]):
        self.arrays = {k: np.asarray(v, dtype=np.float32) for k, v in arrays.items()}

    @property
    def is_mlp(self) -> bool:
        return "w2" in self.arrays

    def probabilities(self, matrix) -> np.ndarray:
        hidden = np.asarray(matrix @ self.arrays["w1"]) + self.arrays["b1"]
        if self.is_mlp:
            hidden = np.maximum(hidden, 0.0) @ self.arrays["w2"] + self.arrays["b2"]
        return 1.0 / (1.0 + np.exp(-hidden.reshape(-1).astype(np.float64)))

    def save(self, folder: Path) -> None:
        for key, value in self.arrays.items():
            np.save(folder / f"{key}.npy", value, allow_pickle=False)

    @classmethod
    def load(cls, folder: Path) -> "_Weights":
        names = [n for n in ("w1", "b1", "w2", "b2") if (folder / f"{n}.npy").is_file()]
        if "w1" not in names:
            raise FileNotFoundError(f"{folder}: no w1.npy; run `autovalidators train abstention` first")
        return cls({n: np.load(folder / f"{n}.npy", allow_pickle=False) for n in names})


def _fit(config: TrainConfig, x, y: np.ndarray) -> _Weights:
    weights = None
    if config.balanced:
        share = y.mean()
        weights = np.where(y == 1, 0.5 / share, 0.5 / (1 - share))
    if config.model == "logistic":
        from sklearn.linear_model import LogisticRegression

        model = LogisticRegression(C=config.c, max_iter=config.max_iter, solver="liblinear")
        model.fit(x, y, sample_weight=weights)
        return _Weights({"w1": model.coef_.T, "b1": model.intercept_})
    from sklearn.neural_network import MLPClassifier

    # MLPClassifier has no sample weights: balance by repeating the minority class instead.
    if config.balanced:
        minority = np.flatnonzero(y == 1) if y.mean() < 0.5 else np.flatnonzero(y == 0)
        repeats = max(1, int(round((len(y) - len(minority)) / max(1, len(minority)))) - 1)
        order = np.concatenate([np.arange(len(y)), np.tile(minority, repeats)])
        x, y = x[order], y[order]
    model = MLPClassifier(hidden_layer_sizes=(config.hidden,), alpha=config.alpha, max_iter=config.max_iter,
                          early_stopping=False, random_state=config.seed, batch_size=256)
    model.fit(x, y)
    return _Weights({"w1": model.coefs_[0], "b1": model.intercepts_[0], "w2": model.coefs_[1],
                     "b2": model.intercepts_[1]})


def train(config: AbstentionConfig, *, config_source: str = "") -> dict[str, Any]:
    """Fits on train, picks the threshold on dev (held-out families), saves arrays + run.json."""
    spec = config.features.spec()
    train_rows = read_split(config.prepare.out_dir, "train")
    real = [r for r in train_rows if r["source"] in ("ragtruth", "halueval")]
    train_rows = train_rows + real * (config.train.real_repeats - 1)
    dev_rows = read_split(config.prepare.out_dir, "dev")
    started = time.perf_counter()
    x_train = design_matrix([r["text"] for r in train_rows], spec)
    x_dev = design_matrix([r["text"] for r in dev_rows], spec)
    y_train = np.array([r["label"] for r in train_rows])
    y_dev = np.array([r["label"] for r in dev_rows])
    weights = _fit(config.train, x_train, y_train)
    dev_probabilities = weights.probabilities(x_dev)
    threshold = best_threshold(y_dev, dev_probabilities)
    dev = {"all": prf(y_dev, dev_probabilities >= threshold)}
    for language in ("en", "ru"):
        mask = np.array([r["language"] == language for r in dev_rows])
        dev[language] = prf(y_dev[mask], dev_probabilities[mask] >= threshold)
    out = Path(config.train.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    weights.save(out)
    summary = {"task": NAME, "model": config.train.model, "threshold": threshold, "dev": dev,
               "train_rows": len(train_rows), "dev_rows": len(dev_rows),
               "seconds": round(time.perf_counter() - started, 1), "config": config.model_dump(mode="json"),
               "config_source": config_source, "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    (out / "run.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    logger.info("abstention %s: dev F1 %.4f at threshold %.3f", config.train.model, dev["all"]["f1"], threshold)
    return summary


# ----- export ------------------------------------------------------------------------------------

class ExportError(RuntimeError):
    pass


def onnx_graph(weights: _Weights):
    """The ONNX model: padded (indices, values) -> P(abstains), shape (n, 1)."""
    from onnx import TensorProto, helper, numpy_helper

    a = weights.arrays
    nodes = [
        helper.make_node("Gather", ["w1", "indices"], ["rows"], axis=0),  # (n, k, h)
        helper.make_node("Unsqueeze", ["values", "last_axis"], ["values3"]),  # (n, k, 1)
        helper.make_node("Mul", ["rows", "values3"], ["weighted"]),
        helper.make_node("ReduceSum", ["weighted", "feature_axis"], ["summed"], keepdims=0),  # (n, h)
        helper.make_node("Add", ["summed", "b1"], ["hidden"]),
    ]
    initializers = [numpy_helper.from_array(a["w1"], "w1"), numpy_helper.from_array(a["b1"], "b1"),
                    numpy_helper.from_array(np.array([2], dtype=np.int64), "last_axis"),
                    numpy_helper.from_array(np.array([1], dtype=np.int64), "feature_axis")]
    logits = "hidden"
    if weights.is_mlp:
        nodes += [helper.make_node("Relu", ["hidden"], ["relu"]),
                  helper.make_node("MatMul", ["relu", "w2"], ["projected"]),
                  helper.make_node("Add", ["projected", "b2"], ["logits"])]
        initializers += [numpy_helper.from_array(a["w2"], "w2"), numpy_helper.from_array(a["b2"], "b2")]
        logits = "logits"
    nodes.append(helper.make_node("Sigmoid", [logits], [OUTPUT_NAME]))
    graph = helper.make_graph(
        nodes, "abstention",
        [helper.make_tensor_value_info(INPUT_NAMES[0], TensorProto.INT64, ["batch", "features"]),
         helper.make_tensor_value_info(INPUT_NAMES[1], TensorProto.FLOAT, ["batch", "features"])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["batch", 1])],
        initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="autovalidators")
    model.ir_version = 8
    return model


def export(config: AbstentionConfig, run_dir: str | Path, to: str | Path) -> Any:
    """Writes model.onnx, featurizer.json and a verified manifest; checks ONNX vs numpy parity on dev."""
    import onnx

    from autovalidators.inference.abstention import AbstentionModel
    from autovalidators.inference.manifest import load_manifest

    run_dir, to = Path(run_dir), Path(to)
    summary_path = run_dir / "run.json"
    if not summary_path.is_file():
        raise FileNotFoundError(f"{summary_path}: missing; run `autovalidators train abstention` first")
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    weights = _Weights.load(run_dir)
    spec = FeatureSpec.from_dict(summary["config"]["features"])
    to.mkdir(parents=True, exist_ok=True)
    for stale in to.iterdir():
        if stale.is_file() and stale.name not in CARD_FILES:  # the card's prose stays; regenerate the card
            stale.unlink()
    model = onnx_graph(weights)
    onnx.checker.check_model(model)
    onnx.save(model, str(to / "model.onnx"))
    size_mb = (to / "model.onnx").stat().st_size / 2**20
    if size_mb > config.export.max_model_mb:
        raise ExportError(f"model.onnx is {size_mb:.1f} MB, over export.max_model_mb {config.export.max_model_mb}; "
                          "lower features.hash_dim or train.hidden")
    (to / "featurizer.json").write_text(json.dumps(spec.to_dict(), indent=2) + "\n")
    manifest = write_manifest(to, {
        "name": NAME, "task": NAME, "version": datetime.now(timezone.utc).strftime("%Y.%m.%d-%H%M"),
        "base_model": f"hashed-ngrams-{summary['model']}", "labels": [LABEL],
        "thresholds": {LABEL: summary["threshold"]},
        "window": {"max_length": spec.max_chars, "stride": 0, "aggregation": "head_tail"},
        "model_file": "model.onnx", "tokenizer_file": "featurizer.json",
        "metrics": {"dev": summary["dev"], "model_mb": round(size_mb, 2)},
        "training": {"run_dir": str(run_dir), "model": summary["model"], "train_rows": summary["train_rows"],
                     "config": summary["config"], "config_source": summary["config_source"],
                     "data": "configs/abstention.yaml prepare: generated en/ru paraphrase families, RAGTruth + "
                             "HaluEval responses (MIT), XQuAD answers; split by family"},
    })
    # Parity: the exported graph must give what the fitted arrays give, on real dev rows.
    dev_rows = read_split(config.prepare.out_dir, "dev")[:500]
    texts = [r["text"] for r in dev_rows]
    expected = weights.probabilities(design_matrix(texts, spec))
    served = AbstentionModel(to, load_manifest(to), threads=1).probabilities(texts)
    gap = float(np.max(np.abs(expected - served))) if texts else 0.0
    if gap > config.export.parity_atol:
        raise ExportError(f"ONNX and numpy probabilities differ by {gap:.2e} > {config.export.parity_atol}")
    logger.info("exported %s (%.1f MB), parity %.1e", to, size_mb, gap)
    return manifest
