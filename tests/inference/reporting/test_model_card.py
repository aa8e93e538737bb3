"""Model cards (`models/<name>/README.md`) are generated from the manifest, so their numbers cannot drift."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from autovalidators.inference.cli import _register_commands, app
from autovalidators.inference.reporting.model_card import CARD_NAME, CARD_TEXT_NAME, CardError, render_card
from autovalidators.inference.validators import DEFAULT_MODELS_DIR

SHIPPED = sorted(p.name for p in DEFAULT_MODELS_DIR.iterdir() if (p / "manifest.json").is_file())
# The numbers each card must show, as paths into the model's manifest.json (picked here, not from card.yaml).
HEADLINES = {
    "abstention": ["metrics.test.all.f1", "metrics.test.en.f1", "metrics.test.ru.f1", "metrics.test.real.f1",
                   "metrics.dev.all.f1"],
    "qa_relevance": ["metrics.benchmark.quality.wikiqa_dev.map", "metrics.benchmark.quality.wikiqa_dev.mrr",
                     "metrics.benchmark.quality.test.f1", "metrics.benchmark.quality.test.roc_auc",
                     "metrics.benchmark.quality.test.by_language.en.f1",
                     "metrics.benchmark.quality.test.by_language.ru.f1"],
    "tone": ["metrics.benchmark.olid_level_a.macro_f1", "metrics.benchmark.ru_toxic_val.f1",
             "metrics.benchmark.ru_toxic_val.roc_auc", "metrics.benchmark.test_all.macro_f1",
             "metrics.benchmark.test_all.macro_roc_auc"],
    "fact_spans": ["metrics.benchmark.quality.int8.ragtruth/all.example.f1",
                   "metrics.benchmark.quality.int8.ragtruth/all.char.f1",
                   "metrics.benchmark.quality.int8.faithbench.example.f1",
                   "metrics.benchmark.quality.int8.xsumfaith test.char.f1",
                   "metrics.cross_encoder_dev.dev.roc_auc"],
}
# Standalone numbers in card.yaml prose (not part of a name such as e5, int8 or MiniLM-L6), once
# licence and dataset versions ("Apache-2.0", "CC BY-SA 4.0", "SQuAD 2.0") are set aside.
NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?!\w)")
NAMES_WITH_VERSIONS = re.compile(r"(Apache|BSD|CDLA-Sharing)-[\d.]+|CC[ A-Z-]* \d\.\d|SQuAD \d\.\d")
PLACEHOLDER = re.compile(r"\{\{[^{}]*\}\}")


def _get(doc: dict, path: str):
    for part in path.split("."):
        doc = doc[part]
    return doc


def _front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n", 2)[1])


def _copy_model(name: str, to: Path, card_text: bool = True) -> Path:
    folder = to / name
    folder.mkdir(parents=True)
    shutil.copy(DEFAULT_MODELS_DIR / name / "manifest.json", folder / "manifest.json")
    if card_text:
        shutil.copy(DEFAULT_MODELS_DIR / name / CARD_TEXT_NAME, folder / CARD_TEXT_NAME)
    return folder


def _invoke(*args: str):
    _register_commands()
    return CliRunner().invoke(app, ["card", *args])


def test_every_shipped_model_has_a_card_and_headline_paths():
    assert SHIPPED, f"no model folders under {DEFAULT_MODELS_DIR}"
    for name in SHIPPED:
        assert (DEFAULT_MODELS_DIR / name / CARD_TEXT_NAME).is_file(), f"models/{name}/card.yaml is missing"
        assert name in HEADLINES, f"name the headline metrics of models/{name} in HEADLINES"


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_card_equals_a_fresh_render(name):
    folder = DEFAULT_MODELS_DIR / name
    card = folder / CARD_NAME
    assert card.is_file(), f"{card} is missing: run `autovalidators card {name}`"
    assert card.read_text(encoding="utf-8") == render_card(folder), \
        f"{card} is stale (manifest, benchmark or card.yaml changed): run `autovalidators card {name}`"


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_card_shows_the_manifest_headline_numbers_and_model_sha(name):
    folder = DEFAULT_MODELS_DIR / name
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    card = (folder / CARD_NAME).read_text(encoding="utf-8")
    for path in HEADLINES[name]:
        value = _get(manifest, path)
        assert f"{value:.3f}" in card, f"{name}: {path} = {value} is not in the card as {value:.3f}"
    assert manifest["files"][manifest["model_file"]] in card
    for file_name, sha in manifest["files"].items():
        assert f"| `{file_name}` | `{sha}` |" in card
    meta = _front_matter(card)
    assert meta["library_name"] == "onnxruntime" and meta["license"] and meta["language"]
    wanted = {round(_get(manifest, p), 4) for p in HEADLINES[name]}
    published = [m["value"] for r in meta["model-index"][0]["results"] for m in r["metrics"]]
    assert published and set(published) <= wanted | {round(v, 4) for v in _all_numbers(manifest)}


def _all_numbers(node) -> list[float]:
    if isinstance(node, dict):
        return [x for v in node.values() for x in _all_numbers(v)]
    if isinstance(node, list):
        return [x for v in node for x in _all_numbers(v)]
    return [node] if isinstance(node, float) and node == node else []


@pytest.mark.parametrize("name", SHIPPED)
def test_card_yaml_holds_no_numbers(name):
    text = yaml.safe_load((DEFAULT_MODELS_DIR / name / CARD_TEXT_NAME).read_text(encoding="utf-8"))

    def prose(node, key=""):
        if isinstance(node, dict):
            for k, v in node.items():
                if k not in ("path", "keys"):
                    yield from prose(v, k)
        elif isinstance(node, list):
            for v in node:
                yield from prose(v, key)
        elif isinstance(node, str):
            yield key, node

    found = [(key, m.group()) for key, s in prose(text)
             for m in NUMBER.finditer(NAMES_WITH_VERSIONS.sub("", PLACEHOLDER.sub("", s)))]
    assert not found, f"models/{name}/card.yaml: numbers belong in the manifest; name them with {{{{path}}}}: {found}"


def test_render_is_deterministic_and_follows_the_manifest(tmp_path):
    folder = _copy_model("abstention", tmp_path)
    first = render_card(folder)
    assert first == render_card(folder)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    manifest["metrics"]["test"]["real"]["f1"] = 0.5123
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    second = render_card(folder)
    assert second != first and "| real | 0.824 | 0.824 | 0.512 |" in second
    assert "value: 0.5123" in second  # model-index metadata follows too


def test_thresholds_by_language_get_a_column_each_in_the_card(tmp_path):
    folder = _copy_model("tone", tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    manifest["thresholds"]["toxicity"] = 0.4
    manifest["thresholds_by_language"] = {"ru": {"toxicity": 0.6}}
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    card = render_card(folder)
    assert "| output | threshold | threshold (ru) |" in card
    assert "| `toxicity` | 0.4000 | 0.6000 |" in card  # a label ru leaves out repeats the default
    threat = manifest["thresholds"]["threat"]
    assert f"| `threat` | {threat:.4f} | {threat:.4f} |" in card


def test_check_names_the_stale_card_and_passes_after_regenerating(tmp_path):
    models = tmp_path / "models"
    stale, fresh = _copy_model("abstention", models), models / "abstention_copy"
    shutil.copytree(stale, fresh)
    result = _invoke("--models-dir", str(models))
    assert result.exit_code == 0, result.output
    assert (stale / CARD_NAME).is_file() and (fresh / CARD_NAME).is_file()
    assert _invoke("--models-dir", str(models), "--check").exit_code == 0

    manifest = json.loads((stale / "manifest.json").read_text(encoding="utf-8"))
    manifest["metrics"]["test"]["all"]["f1"] = 0.25
    (stale / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    before = (stale / CARD_NAME).read_text(encoding="utf-8")
    result = _invoke("--models-dir", str(models), "--check")
    output = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    assert str(stale / CARD_NAME) in output and str(fresh / CARD_NAME) not in output
    assert (stale / CARD_NAME).read_text(encoding="utf-8") == before  # --check writes nothing

    assert _invoke("abstention", "--models-dir", str(models)).exit_code == 0
    assert "| all | 0.994 | 0.994 | 0.250 |" in (stale / CARD_NAME).read_text(encoding="utf-8")
    assert _invoke("--models-dir", str(models), "--check").exit_code == 0


def test_a_folder_without_card_yaml_still_renders_from_the_json(tmp_path):
    folder = _copy_model("qa_relevance", tmp_path, card_text=False)
    card = render_card(folder)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["files"]["model.onnx"] in card
    assert f"{manifest['metrics']['dev']['f1']:.3f}" in card


def test_a_broken_manifest_is_a_clear_error(tmp_path):
    folder = tmp_path / "models" / "broken"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(str(folder / "manifest.json"))):
        render_card(folder)
    for args in (["--models-dir", str(folder.parent)], ["--models-dir", str(folder.parent), "--check"]):
        result = _invoke(*args)
        output = " ".join(result.output.split())
        assert result.exit_code == 2, result.output
        assert "manifest.json" in output and "not valid JSON" in output and "Traceback" not in output


def test_a_manifest_missing_fields_is_a_clear_error(tmp_path):
    folder = tmp_path / "incomplete"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"format_version": 1, "name": "x"}), encoding="utf-8")
    with pytest.raises(ValueError, match="invalid manifest"):
        render_card(folder)


def test_bad_card_yaml_and_benchmark_are_clear_errors(tmp_path):
    folder = _copy_model("abstention", tmp_path)
    card_yaml = folder / CARD_TEXT_NAME
    original = card_yaml.read_text(encoding="utf-8")
    card_yaml.write_text(original + "colour: blue\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"card\.yaml.*\n.*colour: unknown key"):
        render_card(folder)
    card_yaml.write_text(original.replace("path: metrics.test.en.f1", "path: metrics.test.de.f1"), encoding="utf-8")
    with pytest.raises(CardError, match=r"manifest\.json: no value at 'metrics\.test\.de\.f1'"):
        render_card(folder)
    card_yaml.write_text(original, encoding="utf-8")
    (folder / "benchmark.json").write_text("[1, 2", encoding="utf-8")
    with pytest.raises(CardError, match=r"benchmark\.json: not valid JSON"):
        render_card(folder)


def test_unknown_model_name_is_a_clear_error(tmp_path):
    _copy_model("abstention", tmp_path)
    result = _invoke("nope", "--models-dir", str(tmp_path))
    assert result.exit_code == 2 and "nope" in result.output and "Traceback" not in result.output
