"""`autovalidators base-model swap-vocabulary`: a trained run moved onto a rebuilt base's vocabulary.

A base rebuilt with more pieces (`word_lists` in configs/base_model.yaml) segments rare words as
the full 250k vocabulary does. A model trained on the old base with frozen embeddings
(`train.freeze.embeddings: true`) needs no retraining to use it:
- its embedding rows are the base's rows, unchanged (checked here, row by row);
- every old piece is in the new vocabulary (checked), so text the model trained on, whose pieces
  all came from the trimming corpus, segments exactly as before;
- a new piece gets e5's own row from the new base, as it would have had in training.

The result is a run folder with a `best/` that `export` reads like any other; its run.json says
where the vocabulary came from.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"
# Tokenizer parts that must agree between the two vocabularies (same normaliser, same splitting).
SHARED_TOKENIZER_PARTS = ("normalizer", "pre_tokenizer", "post_processor", "decoder")


class VocabularySwapError(ValueError):
    """The run cannot take the new vocabulary without retraining; the message says why."""


def _table_key(tensors: dict[str, np.ndarray], where: Path) -> str:
    keys = [k for k in tensors if k.endswith(WORD_EMBEDDINGS)]
    if len(keys) != 1:
        raise VocabularySwapError(f"{where}: expected one *{WORD_EMBEDDINGS} tensor, found {keys or 'none'}")
    return keys[0]


def _pieces(tokenizer_json: dict[str, Any], where: Path) -> list[str]:
    model = tokenizer_json.get("model", {})
    if model.get("type") != "Unigram":
        raise VocabularySwapError(f"{where}: a unigram tokenizer is needed (found {model.get('type')!r})")
    return [piece for piece, _score in model["vocab"]]


def swap_vocabulary(run_dir: str | Path, new_base: str | Path, out_dir: str | Path,
                    atol: float = 1e-6) -> dict[str, Any]:
    """Writes `<out_dir>/best`: `<run_dir>/best` with `new_base`'s vocabulary; returns a summary."""
    from safetensors.numpy import load_file, save_file

    best, new_base, out = Path(run_dir) / "best", Path(new_base), Path(out_dir)
    for path in (best / "run.json", best / "model.safetensors", best / "tokenizer.json",
                 new_base / "model.safetensors", new_base / "tokenizer.json"):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing (a trained run's best/ and a built base folder are needed)")
    if out.resolve() == Path(run_dir).resolve():
        raise VocabularySwapError("out_dir must differ from run_dir: the trained run stays as it is")

    old_json = json.loads((best / "tokenizer.json").read_text(encoding="utf-8"))
    new_json = json.loads((new_base / "tokenizer.json").read_text(encoding="utf-8"))
    for part in SHARED_TOKENIZER_PARTS:
        if old_json.get(part) != new_json.get(part):
            raise VocabularySwapError(f"tokenizer {part} differs between {best} and {new_base}: not the same base")
    old_pieces, new_pieces = _pieces(old_json, best), _pieces(new_json, new_base)
    new_id = {piece: i for i, piece in enumerate(new_pieces)}
    lost = [p for p in old_pieces if p not in new_id]
    if lost:
        raise VocabularySwapError(f"{new_base} lacks {len(lost)} of the run's pieces (e.g. {lost[:5]}): "
                                  "the model's training text would segment differently; retrain instead")

    trained = load_file(str(best / "model.safetensors"))
    base = load_file(str(new_base / "model.safetensors"))
    trained_key, base_key = _table_key(trained, best), _table_key(base, new_base)
    old_table, new_table = trained[trained_key], base[base_key]
    if old_table.shape[1] != new_table.shape[1]:
        raise VocabularySwapError(f"hidden size {old_table.shape[1]} (run) vs {new_table.shape[1]} (base)")
    moved = np.array([new_id[p] for p in old_pieces])
    difference = np.abs(old_table - new_table[moved]).max(axis=1)
    if float(difference.max()) > atol:
        changed = int((difference > atol).sum())
        raise VocabularySwapError(
            f"{changed} of {len(old_pieces)} embedding rows of {best} differ from {new_base} (max |diff| "
            f"{difference.max():.2e}): the run trained its embeddings (or used another base); retrain instead")

    target = out / "best"
    target.mkdir(parents=True, exist_ok=True)
    trained[trained_key] = np.ascontiguousarray(new_table)
    save_file(trained, str(target / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((best / "config.json").read_text())
    config["vocab_size"] = len(new_pieces)
    (target / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    # The run's truncation and padding settings, the new base's vocabulary.
    new_json["truncation"], new_json["padding"] = old_json.get("truncation"), old_json.get("padding")
    (target / "tokenizer.json").write_text(json.dumps(new_json, ensure_ascii=False), encoding="utf-8")
    for extra in sorted(best.iterdir()):
        if extra.name not in {"model.safetensors", "config.json", "tokenizer.json", "run.json"} and extra.is_file():
            shutil.copyfile(extra, target / extra.name)

    from autovalidators.training.base_models.e5 import read_provenance

    summary = {"from_run": str(run_dir), "new_base": str(new_base), "old_pieces": len(old_pieces),
               "new_pieces": len(new_pieces), "added_pieces": len(new_pieces) - len(old_pieces),
               "max_row_difference": float(difference.max())}
    run = json.loads((best / "run.json").read_text())
    run["vocabulary_swap"] = summary
    # The layers still come from the run's base; only the vocabulary record is the new base's.
    source = dict(run.get("base_model_source") or {})
    source["vocabulary"] = (read_provenance(new_base) or {}).get("vocabulary")
    source["vocabulary_from"] = str(new_base)
    run["base_model_source"] = source
    (target / "run.json").write_text(json.dumps(run, indent=2, ensure_ascii=False) + "\n")
    return summary
