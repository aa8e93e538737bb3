"""Does the answer decline to answer? The gate's `abstains` signal, learned or from the phrase list.

`load_abstention(models_dir)` returns the trained model from `models/abstention/` (verified by
sha256 like every validator) or, when that folder holds no model, the phrase list of
`heuristics.abstains`; the gate then names `abstention` in `meta.fallback`.

The model (`AbstentionModel`) reads only the answer: hashed character and word n-grams
(`abstention_features`) into a small linear or one-hidden-layer network exported to ONNX, trained
on refusals in many wordings (en, ru) against hard negatives that assert something: hedged claims
("I'm not sure, but it opens in 2027") and partial refusals ("no information on the date, but the
office will have 12 floors"). Its probability is compared with the manifest's threshold
(`thresholds.abstains`, chosen on dev families). An empty answer declines nothing: it is not
an abstention (the model is not asked).

Manifest conventions for this model: `tokenizer_file` is `featurizer.json` (the `FeatureSpec`), and
`window.max_length` is the character budget (`max_chars`, read as head + tail: `aggregation: head_tail`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Sequence

import re

import numpy as np

from . import heuristics
from .abstention_features import FeatureSpec, cut, featurize, pad
from .case import Case
from .manifest import MANIFEST_NAME, Manifest, load_manifest
from .text import plain_spelling
from .validators.base import ValidatorInfo

logger = logging.getLogger(__name__)

NAME = "abstention"
LABEL = "abstains"
INPUT_NAMES = ("indices", "values")
OUTPUT_NAME = "probability"
# The phrase list stays as one input feature of the model (`#phrase`).
PHRASES = re.compile("|".join(heuristics.ABSTENTION_PATTERNS), re.IGNORECASE)


def phrase_hits(texts: Sequence[str], max_chars: int) -> list[bool]:
    """Whether the phrase list matches the part of each text the model reads."""
    return [bool(PHRASES.search(plain_spelling(cut(t, max_chars)))) for t in texts]


@dataclass(frozen=True)
class AbstentionOutput:
    abstains: bool
    probability: float | None  # the model's; None from the phrase list
    source: str  # "onnx" or "heuristic"


class AbstentionDetector(Protocol):
    info: ValidatorInfo

    def predict(self, cases: Sequence[Case]) -> list[AbstentionOutput]: ...


class PhraseListAbstention:
    """The fallback: the phrase list plus a cap on new words (`heuristics.abstains`)."""

    info = ValidatorInfo(NAME, "heuristic", "heuristic-1")

    def predict(self, cases: Sequence[Case]) -> list[AbstentionOutput]:
        return [AbstentionOutput(heuristics.abstains(c.answer, c.question), None, "heuristic") for c in cases]


class AbstentionModel:
    """The trained abstention classifier on onnxruntime; batch in, list out."""

    def __init__(self, folder: str | Path, manifest: Manifest, *, threads: int | None = None,
                 batch_size: int = 64):
        from .onnx_session import OnnxSession

        folder = Path(folder)
        if manifest.labels != [LABEL]:
            raise ValueError(f"{folder}: abstention manifest labels {manifest.labels}, expected [{LABEL!r}]")
        self.manifest = manifest
        self.spec = FeatureSpec.from_dict(json.loads((folder / manifest.tokenizer_file).read_text(encoding="utf-8")))
        self.threshold = float(manifest.thresholds.get(LABEL, 0.5))
        self.batch_size = batch_size
        self.session = OnnxSession(folder / manifest.model_file, threads=threads)
        self.info = ValidatorInfo(NAME, "onnx", manifest.version, manifest.model_sha256)

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        """P(abstains) per text, in input order."""
        out = np.zeros(len(texts), dtype=np.float64)
        for start in range(0, len(texts), self.batch_size):
            chunk = list(texts[start:start + self.batch_size])
            indices, values = pad(featurize(chunk, self.spec, phrase_hits(chunk, self.spec.max_chars)))
            result = self.session.run({"indices": indices, "values": values})[OUTPUT_NAME]
            out[start:start + len(chunk)] = result.reshape(-1)
        return out

    def predict(self, cases: Sequence[Case]) -> list[AbstentionOutput]:
        asked = [i for i, c in enumerate(cases) if c.answer.strip()]
        probabilities = dict(zip(asked, self.probabilities([cases[i].answer for i in asked]))) if asked else {}
        outputs = []
        for index in range(len(cases)):
            p = probabilities.get(index)
            if p is None:
                outputs.append(AbstentionOutput(False, None, "onnx"))
            else:
                outputs.append(AbstentionOutput(bool(p >= self.threshold), float(p), "onnx"))
        return outputs


def load_abstention(models_dir: str | Path | None = None, *, threads: int | None = None) -> AbstentionDetector:
    """The trained model in `<models_dir>/abstention/`, else the phrase list.

    A folder with a manifest that fails verification is an error, never a silent fallback.
    """
    from .validators import DEFAULT_MODELS_DIR

    folder = Path(models_dir or DEFAULT_MODELS_DIR) / NAME
    if not (folder / MANIFEST_NAME).is_file():
        logger.info("no trained abstention model in %s; using the phrase list", folder)
        return PhraseListAbstention()
    manifest = load_manifest(folder)
    if manifest.task != NAME:
        raise ValueError(f"{folder}: manifest task {manifest.task!r}, expected {NAME!r}")
    return AbstentionModel(folder, manifest, threads=threads)
