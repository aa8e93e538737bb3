"""Typed tone-labelling config (`configs/tone.yaml`) and the versioned LLM labeller prompt.

One file says everything the labelling pipeline does: the label scheme (with the descriptions
labellers and reports use), where each source lives and how its columns map onto the scheme, which
automatic labellers run and how their votes merge, how the data is split, and the agreement floors
the assessor check enforces before anything is trained.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from autovalidators.inference.config import CONFIG_DIR, StrictModel, load_config

from ..io import DataError

# Where a `bundled` source's paths resolve: data_prep/, whose samples/ ship with the package.
BUNDLED_ROOT = Path(__file__).resolve().parents[1]

Labeller = Literal["gold", "llm", "lexicon"]


class LabelSpec(StrictModel):
    """One label of the scheme."""

    description: str = Field(min_length=10, description="shown to labellers (LLM prompt, CSV) and in reports")
    # Cohen's kappa of the automatic labels against the assessors below this stops training.
    kappa_floor: float = Field(0.6, ge=-1.0, le=1.0)
    # Fewer assessed rows than this is "not checked", which also fails: no evidence is not agreement.
    min_assessed: int = Field(20, ge=1)


class Rule(StrictModel):
    """How one source column votes on one label.

    Categorical: a value in `positive` gives 1, in `negative` gives 0, anything else says nothing.
    Numeric: `threshold` set, the value >= threshold gives 1, else 0 (blank says nothing).
    """

    column: str
    positive: list[str] = []
    negative: list[str] = []
    threshold: float | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> "Rule":
        categorical = bool(self.positive or self.negative)
        if categorical == (self.threshold is not None):
            raise ValueError(f"rule on column {self.column!r}: give either positive/negative values or a threshold")
        return self


class SourceSpec(StrictModel):
    """A gold-labelled source file (or several files with the same columns)."""

    paths: list[str] = Field(min_length=1, description="relative to data_root unless absolute or bundled")
    # The files ship with the package (data_prep/samples/...): paths are relative to data_prep/, so a
    # source written for this project resolves the same in any clone, whatever data_root is.
    bundled: bool = False
    # squad_sentences: the sentences (20-600 characters) of a SQuAD-format file's paragraphs on the dev
    # side of the gate sets' split (`gate_sets.squad_paragraphs_by_split`); text_column "text".
    format: Literal["csv", "tsv", "jsonl", "squad_sentences"] = "csv"
    # Column names of a csv/tsv file without a header row (XNLI's dev files); None = the first row.
    columns: list[str] | None = None
    # Whether fields may be double-quoted (holding tabs or newlines). Default: yes for csv, no for
    # tsv, because OLID's tweets hold unbalanced quotes; ParaDetox's TSV quotes multi-line comments.
    quoted: bool | None = None
    text_column: str
    id_column: str | None = Field(None, description="row id column; None = file name and line number")
    language: Literal["en", "ru"]
    licence: str
    # train: rows may be trained on (minus holdout_fraction); benchmark: never trained on.
    role: Literal["train", "benchmark"] = "train"
    holdout_fraction: float = Field(0.0, ge=0.0, lt=1.0, description="share kept aside as a benchmark set")
    max_rows: int | None = Field(None, gt=0, description="keep a deterministic sample of this many rows")
    # Keep only rows whose named numeric columns are each at most the given value (the appropriate
    # rows of a set scored for appropriateness); applied before max_rows samples.
    keep_rows_at_most: dict[str, float] = {}
    # label -> rules; a label with no rule is missing (None) for every row: the source says nothing.
    labels: dict[str, list[Rule]] = {}
    # Gold every row's text gets whatever its columns say: a source whose rows are all of one kind
    # (ParaDetox's originals are all toxic). Rules above, where given, win for their label.
    fixed_labels: dict[str, Literal[0, 1]] = {}
    # Parallel corpora: each of these columns holds a rewrite of the row's text (ParaDetox's
    # detoxified versions); every non-empty one becomes a record of its own with `paired_labels`
    # as gold. Contrast pairs teach that toxicity lies in the wording, not in the topic.
    paired_columns: list[str] = []
    paired_labels: dict[str, Literal[0, 1]] = {}

    @model_validator(mode="after")
    def _pairs_labelled(self) -> "SourceSpec":
        if bool(self.paired_columns) != bool(self.paired_labels):
            raise ValueError("paired_columns and paired_labels go together: rewrites need labels, labels need rewrites")
        return self

    def keeps_row(self, row: dict[str, str], where: str) -> bool:
        """True when each column of keep_rows_at_most holds a number at most its bound; a cell that is
        no number is a DataError naming `where` (file:line) and the column."""
        for column, bound in self.keep_rows_at_most.items():
            value = (row.get(column) or "").strip()
            try:
                number = float(value)
            except ValueError:
                raise DataError(f"{where}: column {column!r} = {value!r} is not a number") from None
            if number > bound:
                return False
        return True


class LexiconSettings(StrictModel):
    """Word-list labeller: obscenity (and toxicity positives) from en/ru lists with normalisation."""

    enabled: bool = True
    # Word lists shipped in PyPI packages, read from the installed package; the built-in regex
    # lexicon (inference/lexicons/tone.txt) is always used as well, so nothing breaks without them.
    en_wordlist: Literal["better_profanity", "none"] = "better_profanity"
    ru_wordlist: Literal["check_swear", "none"] = "check_swear"
    # Package words that are not obscenity (identity terms, anatomy, drugs, everyday words).
    exclude: list[str] = []
    # label -> what a lexicon can say about it: a miss is evidence of absence only for obscenity.
    labels: dict[str, Literal["positive_and_negative", "positive_only"]] = {
        "obscenity": "positive_and_negative",
        "toxicity": "positive_only",
    }
    # Transliterated Russian ("blyat") matches only stems at least this long: short stems
    # ("нах", "ху") collide with English words once transliterated.
    min_translit_stem: int = Field(4, ge=2)


class LLMSettings(StrictModel):
    """LLM labeller over an OpenAI-compatible chat API; off unless configured."""

    enabled: bool = False
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = "gpt-4o-mini"
    api_key_env: str = "AUTOVALIDATORS_LABELLER_API_KEY"
    timeout_s: float = Field(30.0, gt=0)
    max_retries: int = Field(2, ge=0, description="HTTP retries inside the client")
    cache_dir: str = ".cache/autovalidators/tone-labeller"
    prompt: str = Field("prompts/tone_labeller_v1.yaml", description="relative to configs/ unless absolute")
    batch_size: int = Field(16, ge=1, le=100, description="texts per request")
    # A reply that is not the JSON asked for is asked again (temperature stays 0, so the request
    # is varied by an attempt note); after this many tries the batch's texts stay unlabelled.
    max_attempts: int = Field(2, ge=1)
    max_text_chars: int = Field(2000, gt=0, description="longer texts are cut for the prompt, never silently")
    max_texts: int | None = Field(None, gt=0, description="cost cap: label at most this many texts")
    labels: list[str] | None = Field(None, description="labels asked for; None = every label")


class MergeSettings(StrictModel):
    # The first labeller in this order with a value for a label decides it; the others' votes are
    # kept in the record and their disagreements counted in the labelling report.
    priority: list[Labeller] = ["gold", "llm", "lexicon"]

    @model_validator(mode="after")
    def _unique(self) -> "MergeSettings":
        if len(set(self.priority)) != len(self.priority):
            raise ValueError(f"priority lists a labeller twice: {self.priority}")
        return self


class SplitSettings(StrictModel):
    fractions: dict[str, float] = {"train": 0.8, "dev": 0.1, "test": 0.1}
    seed: int = 13


class ReviewSettings(StrictModel):
    """The stratified sample a person checks."""

    positives_per_label: int = Field(25, ge=0)
    negatives_per_label: int = Field(25, ge=0)
    seed: int = 7


class ToneConfig(StrictModel):
    version: str = "tone-labels-v1"
    data_root: str = Field("../shared/datasets", description="relative paths resolve against the working directory")
    labels: dict[str, LabelSpec]
    sources: dict[str, SourceSpec] = {}
    lexicon: LexiconSettings = LexiconSettings()
    llm: LLMSettings = LLMSettings()
    merge: MergeSettings = MergeSettings()
    splits: SplitSettings = SplitSettings()
    review: ReviewSettings = ReviewSettings()

    @model_validator(mode="after")
    def _labels_known(self) -> "ToneConfig":
        known = set(self.labels)
        problems = []
        for name, source in self.sources.items():
            for field in ("labels", "fixed_labels", "paired_labels"):
                for label in sorted(set(getattr(source, field)) - known):
                    problems.append(f"sources.{name}.{field}.{label}: not in the label scheme")
        for label in sorted(set(self.lexicon.labels) - known):
            problems.append(f"lexicon.labels.{label}: not in the label scheme")
        for label in sorted(set(self.llm.labels or []) - known):
            problems.append(f"llm.labels.{label}: not in the label scheme")
        if problems:
            raise ValueError("; ".join(problems) + f" (labels: {', '.join(sorted(known))})")
        return self

    def source_paths(self, name: str, data_root: str | Path | None = None) -> list[Path]:
        spec = self.sources[name]
        root = BUNDLED_ROOT if spec.bundled else Path(data_root if data_root is not None else self.data_root)
        return [p if p.is_absolute() else root / p for p in map(Path, spec.paths)]


class TonePrompt(StrictModel):
    """A versioned LLM labeller prompt (configs/prompts/tone_labeller_v*.yaml)."""

    version: str
    json_mode: bool = True
    system: str = Field(description="{labels} is replaced by the label list with descriptions")
    user: str = Field(description="{texts} is replaced by the numbered batch")

    @model_validator(mode="after")
    def _placeholders(self) -> "TonePrompt":
        if "{labels}" not in self.system or "{texts}" not in self.user:
            raise ValueError("system must contain {labels} and user must contain {texts}")
        return self


def load_tone_config(path: str | Path | None = None) -> ToneConfig:
    """The labelling config from `path`, or the shipped `configs/tone.yaml`."""
    return load_config(path or CONFIG_DIR / "tone.yaml", ToneConfig)


def load_tone_prompt(path: str | Path) -> TonePrompt:
    path = Path(path)
    return load_config(path if path.is_absolute() else CONFIG_DIR / path, TonePrompt)
