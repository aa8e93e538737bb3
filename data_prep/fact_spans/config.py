"""The typed config of `autovalidators prepare fact-spans` (`configs/fact_spans.yaml`).

Relative paths are resolved against the directory the command runs in (the repository root in
the docs), so the default `../shared/datasets/...` points at the shared data folder.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from autovalidators.inference.config import StrictModel

from .synthesis import INJECTORS, SynthesisSettings


class ReadingSet(StrictModel):
    """A SQuAD-format reading-comprehension file used as synthesis material."""

    name: str = Field(description="dataset name written to each record's `source`")
    path: str
    language: Literal["en", "ru"]
    parallel: bool = Field(False, description="one language of a parallel set (XQuAD): translations share a split")
    max_contexts: int | None = Field(None, ge=1, description="cap on distinct contexts read (None = all)")


class RagTruthSource(StrictModel):
    subset_path: str | None = "../shared/datasets/ragtruth_subset/ragtruth_600.jsonl"
    # More subset files read with it (ragtruth_extra_423.jsonl: QA passages, more responses):
    # duplicates merged, contexts shared by source (converters.read_ragtruth_subset).
    extra_paths: list[str] = Field(default_factory=list)
    # Folder with the official `response.jsonl` + `source_info.jsonl`; its `test` rows are held out.
    official_dir: str | None = None
    # Share of the subset's Summary/Data2txt source documents held out for the benchmark; the rest
    # may be trained on. QA rows of the subset (no reference) are always held out, flagged unusable.
    heldout_fraction: float = Field(0.5, ge=0.0, le=1.0)


class FaithBenchSource(StrictModel):
    path: str | None = "../shared/datasets/faithbench/data_for_release"
    # "ignore": Questionable characters are left out of loss and metrics (default: annotators could
    # not agree the text is wrong, and teaching it as FACT or HALLUCINATION would both add noise).
    questionable: Literal["ignore", "hallucination", "noise", "fact"] = "ignore"
    # A character takes a class when this many distinct annotators gave it that class or a worse one.
    min_annotators: int = Field(1, ge=1)
    # Share of FaithBench source documents held out for the benchmark (1.0 = all of it).
    heldout_fraction: float = Field(1.0, ge=0.0, le=1.0)


class SynthesisConfig(StrictModel):
    answers_per_context: int = Field(2, ge=1, description="synthetic answers per distinct context")
    hallucination_rate: float = Field(0.5, ge=0.0, le=1.0, description="share of answers with an injected hallucination")
    second_hallucination_rate: float = Field(0.25, ge=0.0, le=1.0, description="of those, share with a second one")
    kind_weights: dict[str, float] = Field(
        default_factory=lambda: {k: 1.0 for k in INJECTORS},
        description="relative frequency of each hallucination kind")
    opener_rate: float = Field(0.3, ge=0.0, le=1.0, description="share of answers starting with a filler phrase")
    closer_rate: float = Field(0.2, ge=0.0, le=1.0, description="share ending with one")
    paraphrase_rate: float = Field(0.3, ge=0.0, le=1.0, description="share of copied sentences with parentheticals dropped")
    short_answer_rate: float = Field(0.15, ge=0.0, le=1.0, description="share of answers that are just the gold phrase")
    max_extra_sentences: int = Field(2, ge=0, description="other context sentences added to an answer, at most")
    max_answer_words: int = Field(100, ge=5, description="answer length budget (copied sentences), in words")
    counterfactual_rate: float = Field(0.15, ge=0.0, le=1.0, description="share of contexts that also get a counterfactual pair")

    @model_validator(mode="after")
    def _known_kinds(self) -> "SynthesisConfig":
        unknown = sorted(set(self.kind_weights) - set(INJECTORS))
        if unknown:
            raise ValueError(f"kind_weights: unknown kind(s) {unknown}; known: {list(INJECTORS)}")
        if any(w < 0 for w in self.kind_weights.values()) or not any(self.kind_weights.values()):
            raise ValueError("kind_weights: weights must be >= 0 and not all 0")
        return self

    def settings(self) -> SynthesisSettings:
        return SynthesisSettings(
            hallucination_rate=self.hallucination_rate, second_hallucination_rate=self.second_hallucination_rate,
            kind_weights=tuple(self.kind_weights.items()), opener_rate=self.opener_rate,
            closer_rate=self.closer_rate, paraphrase_rate=self.paraphrase_rate,
            short_answer_rate=self.short_answer_rate, max_extra_sentences=self.max_extra_sentences,
            max_answer_words=self.max_answer_words)


class WindowConfig(StrictModel):
    """How a long context is cut for the encoder (`inference.windowing`); the answer is never cut."""

    max_length: int = Field(512, ge=32, description="encoder window in tokens, specials included")
    stride: int = Field(128, ge=0, description="tokens of context shared by consecutive windows")
    max_question_tokens: int = Field(64, ge=0, description="a longer question is cut to this")
    min_context_tokens: int = Field(32, ge=1, description="an answer leaving less room than this is an error")

    @model_validator(mode="after")
    def _stride_fits(self) -> "WindowConfig":
        if self.stride >= self.max_length // 2:
            raise ValueError("stride must be smaller than half of max_length")
        return self


def _default_reading_sets() -> list[ReadingSet]:
    root = "../shared/datasets"
    return [
        ReadingSet(name="xquad", path=f"{root}/xquad/xquad.en.json", language="en", parallel=True),
        ReadingSet(name="xquad", path=f"{root}/xquad/xquad.ru.json", language="ru", parallel=True),
        ReadingSet(name="tydiqa_goldp", path=f"{root}/tydiqa_goldp/language_data/english/english_tydiqa_train.json", language="en"),
        ReadingSet(name="tydiqa_goldp", path=f"{root}/tydiqa_goldp/language_data/english/english_tydiqa_dev.json", language="en"),
        ReadingSet(name="tydiqa_goldp", path=f"{root}/tydiqa_goldp/language_data/russian/russian_tydiqa_dev.json", language="ru"),
        ReadingSet(name="squad2", path=f"{root}/squad2_dev_half_cs224n/data/dev-v2.0.json", language="en"),
    ]


class FactSpansPrepConfig(StrictModel):
    seed: int = Field(13, description="one seed for splits and synthesis: same seed, same data")
    languages: list[Literal["en", "ru"]] = ["en", "ru"]
    ragtruth: RagTruthSource = RagTruthSource()
    faithbench: FaithBenchSource = FaithBenchSource()
    reading: list[ReadingSet] = Field(default_factory=_default_reading_sets)
    synthesis: SynthesisConfig = SynthesisConfig()
    # Split of everything not held out, by group (source document / context): no group in two splits.
    splits: dict[str, float] = {"train": 0.8, "dev": 0.1, "test": 0.1}
    window: WindowConfig = WindowConfig()

    @model_validator(mode="after")
    def _splits_named(self) -> "FactSpansPrepConfig":
        if "train" not in self.splits or "heldout" in self.splits:
            raise ValueError("splits: needs a 'train' split; 'heldout' is reserved for the benchmark data")
        return self
