"""Bundled samples -> source files -> the three tasks' own `TaskConfig` objects.

The samples ship inside the package (licences in each folder's README):
- `data_prep/samples/atomic_qa/atomic_qa_triples.jsonl`: 240 XQuAD (en, ru; CC BY-SA 4.0) and
  TyDi QA GoldP (en, ru; Apache-2.0) context-question-answer triples;
- `inference/evaluation/data/tydiqa_goldp_en_dev_200.jsonl`: 200 TyDi QA GoldP en dev questions;
- `data_prep/samples/tone/`: a Davidson et al. sample (MIT) and the IBM Jigsaw sample (CC0).

The reading-comprehension triples are written back as small SQuAD-format files, so QA relevance
and fact spans are prepared by their usual builders (`data_prep.qa_relevance`,
`data_prep.fact_spans`); the tone samples go through the labelling pipeline with a label config
derived from `configs/tone.yaml` (same label scheme and column rules, bundled files as sources).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from autovalidators.data_prep.io import read_jsonl

from autovalidators.training.config import TaskConfig, TrainConfig
from autovalidators.training.quickstart.config import QuickstartTrainConfig, TaskSettings

ATOMIC_QA = ("autovalidators.data_prep", "samples/atomic_qa/atomic_qa_triples.jsonl")
TYDI_EN_200 = ("autovalidators.inference.evaluation", "data/tydiqa_goldp_en_dev_200.jsonl")
TONE_SAMPLES = ("autovalidators.data_prep", "samples/tone")
# Bundled tone files per source of configs/tone.yaml whose column rules they follow.
TONE_FILES = {"davidson": "davidson_sample.csv", "jigsaw": "jigsaw_ibm_sample.csv"}


@dataclass(frozen=True)
class ReadingFile:
    """One SQuAD-format file written from the bundled triples."""

    name: str  # dataset name as the fact-span builder knows it (licence lookup): xquad, tydiqa_goldp
    language: str
    path: Path
    parallel: bool  # one language of a parallel set: translations share a split

    @property
    def key(self) -> str:
        return f"{self.name}_{self.language}_{self.path.stem.rsplit('_', 1)[-1]}"


def bundled(package: str, relative: str) -> Path:
    """A file or folder shipped inside the package (the installs this project supports are unzipped)."""
    path = Path(str(resources.files(package).joinpath(relative)))
    if not path.exists():
        raise FileNotFoundError(f"{path}: bundled sample missing; reinstall autovalidators")
    return path


def _squad(items: list[dict[str, Any]]) -> dict[str, Any]:
    """One article and one paragraph per question, in the given order (so parallel files align)."""
    return {"version": "quickstart", "data": [
        {"title": item.get("title", ""), "paragraphs": [{"context": item["context"], "qas": [
            {"id": item["id"], "question": item["question"],
             "answers": [{"text": item["answer"], "answer_start": item["answer_start"]}]}]}]}
        for item in items]}


def write_reading_files(folder: Path) -> list[ReadingFile]:
    """The bundled triples as SQuAD-format files in `folder`, one per (dataset, language, sample)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    seen: set[str] = set()
    for row in read_jsonl(bundled(*ATOMIC_QA)):
        answer = row["answers"][0]
        start = row["context"].find(answer)
        if start < 0:
            continue  # the answer is not verbatim in the context: no offset to give
        # "xquad-en-<squad id>": the id without the language prefix pairs the translations.
        qid = row["id"].split("-", 2)[-1]
        seen.add(qid)
        groups.setdefault((row["source"], row["language"], "atomic"), []).append(
            {"id": qid, "context": row["context"], "question": row["question"], "answer": answer,
             "answer_start": start})
    for row in read_jsonl(bundled(*TYDI_EN_200)):
        if row["id"] in seen:  # the same TyDi dev question is in both samples
            continue
        groups.setdefault(("tydiqa_goldp", "en", "dev200"), []).append(
            {"id": row["id"], "title": row.get("title", ""), "context": row["context"], "question": row["question"],
             "answer": row["answer"], "answer_start": int(row["answer_start"])})
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for (name, language, sample), items in sorted(groups.items()):
        items.sort(key=lambda item: item["id"])  # en and ru XQuAD files list the same ids in one order
        path = folder / f"{name}_{language}_{sample}.json"
        path.write_text(json.dumps(_squad(items), ensure_ascii=False), encoding="utf-8")
        files.append(ReadingFile(name=name, language=language, path=path, parallel=name == "xquad"))
    return files


def _train(settings: TaskSettings, config: QuickstartTrainConfig, data_dir: Path, run_dir: Path,
           train_file: str = "train.jsonl") -> TrainConfig:
    return settings.train.model_copy(update={
        "base_model": config.base_model, "train_file": str(data_dir / train_file),
        "dev_file": str(data_dir / "dev.jsonl"), "output_dir": str(run_dir),
        # The quickstart's progress bar follows the trainer's per-step log line.
        "log_every": 1})


def qa_relevance_config(config: QuickstartTrainConfig, reading: list[ReadingFile], out: Path) -> TaskConfig:
    from autovalidators.data_prep.qa_relevance import QARelevancePrepareConfig, SquadSource

    settings = config.qa_relevance
    data_dir = out / "data" / "qa_relevance"
    prepare = QARelevancePrepareConfig(
        wikiqa_dir=None, qnli_path=None,
        squad_sources=[SquadSource(name=f.key, path=str(f.path), language=f.language) for f in reading],
        hard_negatives=settings.prepare.hard_negatives, easy_negatives=settings.prepare.easy_negatives,
        fractions=settings.prepare.fractions, seed=config.seed, output_dir=str(data_dir))
    return TaskConfig[QARelevancePrepareConfig](
        prepare=prepare, train=_train(settings, config, data_dir, out / "runs" / "qa_relevance"),
        export=settings.export)


def fact_spans_config(config: QuickstartTrainConfig, reading: list[ReadingFile], out: Path) -> TaskConfig:
    from autovalidators.data_prep.fact_spans.config import FaithBenchSource, RagTruthSource, ReadingSet, WindowConfig
    from autovalidators.training.tasks.fact_spans import FactSpansPrepareSection, TrainMix

    settings = config.fact_spans
    data_dir = out / "data" / "fact_spans"
    max_length = settings.train.max_length
    prepare = FactSpansPrepareSection(
        out_dir=str(data_dir), seed=config.seed,
        # No human-labelled span data is bundled (RAGTruth's subset is MIT but its QA rows lack
        # references; FaithBench is CC BY-NC-SA): every training answer is synthetic.
        mix=TrainMix(synthetic=None, human_repeats=1),
        ragtruth=RagTruthSource(subset_path=None), faithbench=FaithBenchSource(path=None),
        reading=[ReadingSet(name=f.name, path=str(f.path), language=f.language, parallel=f.parallel)
                 for f in reading],
        synthesis=settings.prepare.synthesis, splits=settings.prepare.splits,
        window=WindowConfig(max_length=max_length, stride=min(128, max_length // 2 - 1),
                            max_question_tokens=min(64, max_length // 8)))
    return TaskConfig[FactSpansPrepareSection](
        prepare=prepare, train=_train(settings, config, data_dir, out / "runs" / "fact_spans", "train_mix.jsonl"),
        export=settings.export)


def write_tone_label_config(config: QuickstartTrainConfig, path: Path) -> Path:
    """`configs/tone.yaml` with the bundled samples as its only sources, the LLM off."""
    from autovalidators.data_prep.tone.config import SplitSettings, load_tone_config

    shipped = load_tone_config()
    folder = bundled(*TONE_SAMPLES)
    missing = sorted(set(TONE_FILES) - set(shipped.sources))
    if missing:
        raise ValueError(f"configs/tone.yaml has no source(s) {missing} whose column rules the bundled tone "
                         "samples follow")
    sources = {name: shipped.sources[name].model_copy(update={"paths": [file], "holdout_fraction": 0.0,
                                                               "max_rows": None})
               for name, file in TONE_FILES.items()}
    derived = shipped.model_copy(update={
        "version": f"{shipped.version}+quickstart", "data_root": str(folder), "sources": sources,
        "lexicon": shipped.lexicon.model_copy(update={"enabled": config.tone.prepare.lexicon}),
        "llm": shipped.llm.model_copy(update={"enabled": False}),
        "splits": SplitSettings(fractions=config.tone.prepare.fractions, seed=config.seed)})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# Written by `autovalidators quickstart --train`: configs/tone.yaml with the bundled samples.\n"
                    + yaml.safe_dump(derived.model_dump(mode="json"), sort_keys=False, allow_unicode=True),
                    encoding="utf-8")
    return path


def tone_config(config: QuickstartTrainConfig, out: Path) -> TaskConfig:
    from autovalidators.training.tasks.tone import TonePrepareConfig

    settings = config.tone
    data_dir = out / "data" / "tone"
    label_config = write_tone_label_config(config, out / "data" / "tone_labels.yaml")
    prepare = TonePrepareConfig(label_config=str(label_config), output_dir=str(data_dir), llm=False,
                                seed=config.seed, benchmark_files=[])
    return TaskConfig[TonePrepareConfig](
        prepare=prepare, train=_train(settings, config, data_dir, out / "runs" / "tone"), export=settings.export)


def task_configs(config: QuickstartTrainConfig, out: Path) -> dict[str, TaskConfig]:
    """Writes the reading files and returns each task's TaskConfig, all paths inside `out`."""
    reading = write_reading_files(out / "data" / "sources")
    return {"qa_relevance": qa_relevance_config(config, reading, out),
            "fact_spans": fact_spans_config(config, reading, out),
            "tone": tone_config(config, out)}
