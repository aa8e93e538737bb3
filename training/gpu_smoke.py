"""Helper of `training/gpu_smoke.sh`: preflight, smoke configs, step records and the summary.

The shell script runs the real commands (`prepare`, `accelerate launch ... train`, `export`) so a
reader sees exactly what a GPU run does; this module does the parts that are easier in Python:

- `configs`, after a preflight (the packages the run needs import; a CUDA GPU is visible, else
  exit 3: a smoke run on a CPU by mistake would burn its time budget and prove nothing), writes
  one YAML per task derived from the project's config (`configs/qa_relevance.yaml`,
  `configs/fact_spans_model.yaml`, `configs/tone_model.yaml`) with the smoke overrides below,
  checked with the same typed loader the commands use; `--cpu-dry-run` instead builds a tiny
  random encoder and tiny data, so the whole script can be tested on a CPU in seconds;
- `record`: one line per finished step (task, stage, exit code, seconds, log) in `steps.jsonl`;
- `summarize`: throughput (examples/s), dev metric and the export's parity check per task,
  printed as a table and written as `gpu_smoke.json`; exit 1 when a step failed.

Smoke overrides (GPU): bf16, `--steps` optimizer steps (default 300) over a subsample of one pass,
one dev evaluation at the end, at most 500 dev examples for evaluation and export. The int8 quality
rule is reported, not enforced (`export.int8_max_drop` = 1.0): a few hundred steps prove the path,
not the shipped model's quality; the fp32 parity rule (1e-4) is enforced as configured.

Throughput is the median of the trainer's logged rates (examples/s per process, times the number
of processes): the first interval carries CUDA start-up and the one after an evaluation its time.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import re
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

from autovalidators.inference.config import CONFIG_DIR, ConfigError

logger = logging.getLogger(__name__)

# The project's train/export config per task: the same files the lead trains the shipped models with.
TASK_CONFIGS = {"qa_relevance": "qa_relevance.yaml", "fact_spans": "fact_spans_model.yaml", "tone": "tone_model.yaml"}
# The prepare-section key naming each task's prepared-data folder (train/dev files live in it).
PREPARED_KEY = {"qa_relevance": "output_dir", "fact_spans": "out_dir", "tone": "output_dir"}
# How the project's configs spell the shared datasets folder; replaced by --data-root. Schema
# defaults (data_prep/qa_relevance.py) spell it as an absolute path beside the repository.
DEFAULT_DATA_ROOT = "../shared/datasets"
DATA_ROOT_SPELLINGS = (DEFAULT_DATA_ROOT, str(CONFIG_DIR.resolve().parent.parent / "shared" / "datasets"))
GPU_STEPS, CPU_STEPS = 300, 2
MAX_SMOKE_DEV = 500  # dev examples for the final evaluation and the export's checks
NO_GPU_EXIT = 3
REQUIRED_MODULES = ("torch", "transformers", "accelerate", "tokenizers", "onnx", "onnxruntime", "pydantic",
                    "seqeval", "sklearn", "yaml", "typer", "rich")
RATE = re.compile(r"step (\d+)/(\d+) loss \S+ lr \S+ ([\d.]+) examples/s")


# ---- preflight ---------------------------------------------------------------------------------
def preflight(mode: str, work: Path) -> int:
    """0 when the run can start; 2 for missing packages, NO_GPU_EXIT without a GPU (GPU mode)."""
    # find_spec looks the packages up without importing them: the no-GPU answer stays quick.
    missing = [module for module in REQUIRED_MODULES if importlib.util.find_spec(module) is None]
    if missing:
        logger.error("missing Python packages: %s; install the train extra: pip install -e '.[train]'",
                     ", ".join(missing))
        return 2
    import torch

    device: dict[str, Any] = {"mode": mode, "torch": torch.__version__, "torch_cuda": torch.version.cuda}
    if mode == "gpu":
        if not torch.cuda.is_available():
            logger.error("no CUDA GPU visible (torch %s, built for CUDA %s): run this on a GPU machine, or pass "
                         "--cpu-dry-run to check the script itself on a CPU", torch.__version__, torch.version.cuda)
            return NO_GPU_EXIT
        if not torch.cuda.is_bf16_supported():
            logger.error("GPU %s has no bf16 support; the smoke run trains in bf16", torch.cuda.get_device_name(0))
            return NO_GPU_EXIT
        device.update(gpus=torch.cuda.device_count(), name=torch.cuda.get_device_name(0))
        from autovalidators.training.base_models.registry import BaseModelError, resolve_base_model

        try:
            resolve_base_model("minilm")
        except BaseModelError as exc:
            logger.error("%s", exc)
            return 2
    else:
        device.update(gpus=0, name="cpu (dry run: tiny random encoder)")
    work.mkdir(parents=True, exist_ok=True)
    (work / "device.json").write_text(json.dumps(device, indent=2) + "\n")
    logger.info("device: %s", device)
    return 0


# ---- configs -----------------------------------------------------------------------------------
def _relocate(value: Any, data_root: str) -> Any:
    """Every string starting with a spelling of the shared-datasets path, pointed at `data_root`."""
    if isinstance(value, dict):
        return {k: _relocate(v, data_root) for k, v in value.items()}
    if isinstance(value, list):
        return [_relocate(v, data_root) for v in value]
    for spelling in DATA_ROOT_SPELLINGS if isinstance(value, str) else ():
        if value == spelling or value.startswith(spelling + "/"):
            return data_root + value[len(spelling):]
    return value


def smoke_config(task: str, mode: str, work: Path, steps: int, *, data_root: str = DEFAULT_DATA_ROOT,
                 prepared: Path | None = None, encoder: Path | None = None, processes: int = 1) -> dict[str, Any]:
    """The project's config for `task` with the smoke overrides (see the module docstring).

    Prepared data goes to (or, with `prepared`, is read from) `<work or prepared>/<task>/`, runs to
    `<work>/runs/<task>`. In `cpu` mode `encoder` (the tiny one) replaces the base model.
    """
    from autovalidators.training.tasks import get_task

    raw = yaml.safe_load((CONFIG_DIR / TASK_CONFIGS[task]).read_text(encoding="utf-8"))
    # Every prepare default written out, so that data paths left to the schema are relocated too.
    raw["prepare"] = get_task(task).prepare_schema.model_validate(raw["prepare"]).model_dump(mode="json")
    raw = _relocate(raw, data_root)
    prepare, train, export = raw["prepare"], raw.setdefault("train", {}), raw.setdefault("export", {})
    key = PREPARED_KEY[task]
    old_dir, new_dir = Path(prepare[key]), (prepared or work / "prepared") / task
    prepare[key] = str(new_dir)
    if "data_root" in prepare:  # tone: else its label config's own ../shared/datasets is used
        prepare["data_root"] = data_root
    for name in ("train_file", "dev_file"):
        # Same file names, in the relocated prepared folder (train_mix.jsonl, dev_sampled.jsonl...).
        train[name] = str(new_dir / Path(train[name]).relative_to(old_dir))
    batch = train.get("batch_size", 32) * train.get("grad_accumulation", 1) * processes
    train.update(
        output_dir=str(work / "runs" / task), max_steps=steps, eval_every=steps, save_every=0,
        log_every=max(1, min(20, steps // 10)),
        max_train_examples=steps * batch,  # one pass: no time spent encoding data the run never sees
        max_dev_examples=min(train.get("max_dev_examples") or MAX_SMOKE_DEV, MAX_SMOKE_DEV),
        early_stopping={**train.get("early_stopping", {}), "patience": 0},
    )
    export.update(int8_max_drop=1.0, max_dev_examples=min(export.get("max_dev_examples") or MAX_SMOKE_DEV,
                                                           MAX_SMOKE_DEV))
    if mode == "gpu":
        train.update(mixed_precision="bf16", cpu_threads=None)
    else:
        # bf16 autocast on the CPU too: the dry run goes through the same mixed-precision code path.
        train.update(base_model=str(encoder), mixed_precision="bf16", cpu_threads=1, max_length=64, batch_size=4,
                     eval_batch_size=8, learning_rate=1e-3, max_train_examples=None)
        export.update(optimize=False)  # fusing a 32-wide toy graph proves nothing and costs seconds
    return raw


def tiny_records() -> dict[str, list[dict]]:
    """A dozen records per task, in each task's prepared format (for the CPU dry run)."""
    from autovalidators.training.tiny import tiny_qa_records

    facts = ["paris is the capital of france.", "the nile flows through egypt.", "bees make honey from nectar.",
             "the war ended in 1945."]
    spans = []
    for i, fact in enumerate(facts):
        context = f"{fact} {facts[(i + 2) % len(facts)]}"
        other = facts[(i + 1) % len(facts)]
        base = {"question": "what is true", "context": context, "ignored": [], "facts": [], "source": "tiny",
                "group": f"g{i}", "language": "en", "task_type": "QA", "origin": "synthetic", "grounding_usable": True}
        spans.append({**base, "id": f"f{i}", "answer": fact,
                      "spans": [{"start": 0, "end": len(fact), "label": "FACT"}]})
        answer = f"sure! {fact} {other}"
        spans.append({**base, "id": f"h{i}", "answer": answer, "spans": [
            {"start": 0, "end": 5, "label": "NOISE"}, {"start": 6, "end": 6 + len(fact), "label": "FACT"},
            {"start": 7 + len(fact), "end": len(answer), "label": "HALLUCINATION"}]})
    labels = ("toxicity", "obscenity", "insult", "threat", "identity_hate", "politics")
    texts = [("you are a complete idiot", {"toxicity": 1, "insult": 1}), ("thanks for the help", {}),
             ("i will hurt you", {"toxicity": 1, "threat": 1}), ("the war ended in 1945", {"politics": 1}),
             ("bees make honey", {}), ("damn idiot", {"toxicity": 1, "obscenity": 1, "insult": 1})]
    tone = [{"id": f"t{i}", "text": text, "source": "tiny", "group": f"t{i}", "language": "en",
             "labels": {label: hits.get(label, 0) if label != "identity_hate" else None for label in labels}}
            for i, (text, hits) in enumerate(texts * 2)]
    return {"qa_relevance": tiny_qa_records(repeats=2), "fact_spans": spans, "tone": tone}


def write_configs(mode: str, work: Path, tasks: list[str], steps: int | None, data_root: str,
                  prepared: Path | None, processes: int) -> list[dict[str, Any]]:
    """Writes `<work>/configs/<task>.yaml` (and the tiny encoder and data in `cpu` mode); returns the
    plan the shell script follows, one row per task."""
    from autovalidators.data_prep.io import write_jsonl

    from autovalidators.training.config import load_task_config
    from autovalidators.training.tasks import get_task

    steps = steps or (GPU_STEPS if mode == "gpu" else CPU_STEPS)
    encoder = records = None
    if mode == "cpu":
        from autovalidators.training.tiny import build_tiny_encoder

        records = tiny_records()
        words = {w.strip(".!?,") for rows in records.values() for r in rows
                 for w in " ".join(str(r.get(k, "")) for k in ("question", "answer", "context", "text")).split()}
        encoder = build_tiny_encoder(work / "tiny_encoder", sorted(words - {""}))
        prepared = None
    (work / "configs").mkdir(parents=True, exist_ok=True)
    plan = []
    for task in tasks:
        spec = get_task(task)
        raw = smoke_config(task, mode, work, steps, data_root=data_root, prepared=prepared, encoder=encoder,
                           processes=processes)
        path = work / "configs" / f"{task}.yaml"
        path.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True), encoding="utf-8")
        config = load_task_config(path, spec.prepare_schema, task)  # the commands' own check, before any work
        train_file, dev_file = Path(config.train.train_file), Path(config.train.dev_file)
        if records is not None:
            write_jsonl(train_file, records[task])
            write_jsonl(dev_file, records[task])
        needs_prepare = not (train_file.is_file() and dev_file.is_file())
        if needs_prepare and prepared is not None:
            raise FileNotFoundError(f"--prepared {prepared}: {train_file} or {dev_file} is missing")
        plan.append({"task": task, "cli": spec.cli_name, "config": str(path), "prepare": needs_prepare,
                     "mixed_precision": config.train.mixed_precision, "run": config.train.output_dir,
                     "models": str(work / "models" / task)})
    (work / "plan.json").write_text(json.dumps(plan, indent=2) + "\n")
    return plan


# ---- records and summary -----------------------------------------------------------------------
def record_step(work: Path, task: str, stage: str, rc: int, seconds: float, log: str) -> None:
    """Appends one finished step to `<work>/steps.jsonl`."""
    with open(work / "steps.jsonl", "a", encoding="utf-8") as sink:
        sink.write(json.dumps({"task": task, "stage": stage, "rc": rc, "seconds": round(seconds, 2),
                               "log": log}) + "\n")


def logged_rates(log_text: str) -> list[float]:
    """The trainer's `... N examples/s` rates, in log order."""
    return [float(m.group(3)) for m in RATE.finditer(log_text)]


def _read_json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def task_summary(entry: dict[str, Any], steps: dict[str, dict[str, Any]], processes: int) -> dict[str, Any]:
    """One task's row: step outcomes, throughput, dev metric and the export's checks."""
    from autovalidators.training.tasks import get_task

    spec = get_task(entry["task"])
    summary: dict[str, Any] = {"task": entry["task"], "mixed_precision": entry["mixed_precision"],
                               "stages": {name: {k: v for k, v in step.items() if k not in ("task", "stage")}
                                          for name, step in steps.items()}}
    train = steps.get("train")
    if train:
        log = Path(train["log"])
        rates = logged_rates(log.read_text(encoding="utf-8", errors="replace")) if log.is_file() else []
        summary["logged_rates"] = rates
        summary["examples_per_s"] = statistics.median(rates) * processes if rates else None
    run = _read_json(Path(entry["run"]) / "best" / "run.json")
    if run:
        batch = run["config"]["batch_size"] * run["config"]["grad_accumulation"] * processes
        summary.update(best_step=run["best_step"], total_steps=run["total_steps"], main_metric=spec.main_metric,
                       dev_main_metric=run["dev_metrics"].get(spec.main_metric),
                       train_examples=run["data"]["train"]["examples"], examples_per_optimizer_step=batch)
    report = _read_json(Path(entry["run"]) / "onnx" / "export_report.json")
    if report:
        summary["parity_fp32"] = report.get("parity_fp32")
        summary["parity_fused"] = report.get("parity_fused")
        summary["int8_drop"] = report.get("int8_drop")
    manifest = _read_json(Path(entry["models"]) / "manifest.json")
    if manifest:
        summary["model_mb"] = manifest["metrics"].get("model_mb")
    parity_ok = bool((summary.get("parity_fp32") or {}).get("passed"))
    stages_ok = all(step["rc"] == 0 for step in steps.values()) and {"train", "export"} <= set(steps)
    summary["ok"] = stages_ok and parity_ok and manifest is not None
    return summary


def summarize(work: Path, out: Path, processes: int) -> dict[str, Any]:
    """Builds, prints and writes `<out>/gpu_smoke.json`; `ok` is False when any task failed."""
    plan = json.loads((work / "plan.json").read_text())
    steps: dict[str, dict[str, dict[str, Any]]] = {}
    if (work / "steps.jsonl").is_file():
        for line in (work / "steps.jsonl").read_text().splitlines():
            step = json.loads(line)
            steps.setdefault(step["task"], {})[step["stage"]] = step
    tasks = [task_summary(entry, steps.get(entry["task"], {}), processes) for entry in plan]
    result = {"device": _read_json(work / "device.json"), "processes": processes, "work_dir": str(work),
              "tasks": {t["task"]: t for t in tasks}, "ok": all(t["ok"] for t in tasks)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_smoke.json").write_text(json.dumps(result, indent=2) + "\n")
    _print_table(result)
    return result


def _print_table(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    def number(value: Any, digits: int = 1) -> str:
        return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)

    device = result["device"] or {}
    table = Table(title=f"GPU smoke on {device.get('name', '?')} ({result['processes']} process(es))")
    for column in ("task", "ok", "precision", "steps", "examples/s", "train s", "dev metric", "parity fp32 max|diff|",
                   "parity", "int8 drop", "export s", "model MB"):
        table.add_column(column, justify="left" if column == "task" else "right")
    for task in result["tasks"].values():
        parity, drop = task.get("parity_fp32") or {}, task.get("int8_drop") or {}
        metric = task.get("dev_main_metric")
        table.add_row(task["task"], "yes" if task["ok"] else "[red]NO[/red]", task["mixed_precision"],
                      number(task.get("total_steps")), number(task.get("examples_per_s")),
                      number(task["stages"].get("train", {}).get("seconds")),
                      f"{task.get('main_metric')} {metric:.4f}" if metric is not None else "-",
                      f"{parity['max_abs_diff']:.2e}" if parity else "-",
                      {True: "passed", False: "[red]FAILED[/red]"}.get(parity.get("passed"), "-"),
                      number(drop.get("drop"), 4), number(task["stages"].get("export", {}).get("seconds")),
                      number(task.get("model_mb"), 2))
    Console(stderr=True, width=160).print(table)


# ---- command line ------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autovalidators.training.gpu_smoke", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    configs = commands.add_parser("configs", help="preflight, then write the smoke configs (and the tiny data "
                                                  "in cpu mode); prints the task plan")
    configs.add_argument("--mode", choices=("gpu", "cpu"), required=True)
    configs.add_argument("--work", type=Path, required=True)
    configs.add_argument("--tasks", default=",".join(TASK_CONFIGS))
    configs.add_argument("--steps", type=int, default=None)
    configs.add_argument("--data-root", default=DEFAULT_DATA_ROOT)
    configs.add_argument("--prepared", type=Path, default=None, help="already prepared data: <dir>/<task>/")
    configs.add_argument("--processes", type=int, default=1)
    record = commands.add_parser("record", help="append one finished step to <work>/steps.jsonl")
    record.add_argument("--work", type=Path, required=True)
    for name in ("--task", "--stage", "--log"):
        record.add_argument(name, required=True)
    record.add_argument("--rc", type=int, required=True)
    record.add_argument("--started", type=float, required=True, help="epoch seconds (date +%%s.%%N)")
    record.add_argument("--ended", type=float, required=True)
    summary = commands.add_parser("summarize", help="print and write gpu_smoke.json; exit 1 on any failure")
    summary.add_argument("--work", type=Path, required=True)
    summary.add_argument("--out", type=Path, required=True)
    summary.add_argument("--processes", type=int, default=1)
    args = parser.parse_args(argv)

    if args.command == "configs":
        tasks = [t.strip().replace("-", "_") for t in args.tasks.split(",") if t.strip()]
        unknown = sorted(set(tasks) - set(TASK_CONFIGS))
        if unknown or not tasks:
            logger.error("--tasks: unknown %s; choose from %s", unknown, ", ".join(TASK_CONFIGS))
            return 2
        status = preflight(args.mode, args.work)  # one interpreter start for both: torch loads once
        if status:
            return status
        try:
            plan = write_configs(args.mode, args.work, tasks, args.steps, args.data_root, args.prepared,
                                 args.processes)
        except (ConfigError, FileNotFoundError, ValueError) as exc:
            logger.error("%s", exc)
            return 2
        # The shell script reads this: task, CLI name, config, prepare (1/0), mixed precision, run, models.
        for row in plan:
            sys.stdout.write("\t".join([row["task"], row["cli"], row["config"], str(int(row["prepare"])),
                                        row["mixed_precision"], row["run"], row["models"]]) + "\n")
        return 0
    if args.command == "record":
        record_step(args.work, args.task, args.stage, args.rc, args.ended - args.started, args.log)
        return 0
    return 0 if summarize(args.work, args.out, args.processes)["ok"] else 1


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="gpu_smoke: %(levelname)s %(message)s")
    sys.exit(main())
