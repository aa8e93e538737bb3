"""One training loop for every task, on accelerate: CPU plainly, `accelerate launch` for GPUs.

Read top to bottom: data → model → optimizer/schedule → loop (accumulate, clip, step, evaluate,
save best, checkpoint, stop early). Resuming reloads model, optimizer, scheduler and RNG states
from `<output_dir>/last/` and skips the batches of the interrupted epoch already seen.

Output folder layout:
    best/        the best dev model (save_pretrained), tokenizer.json, run.json (config, metrics)
    last/        accelerate state + trainer_state.json: the resumable checkpoint
    metrics.jsonl  one line per evaluation
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from functools import partial
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from autovalidators.data_prep.io import read_jsonl
from autovalidators.inference.manifest import sha256_of

from autovalidators.training.base_models.registry import load_tokenizer, resolve_base_model
from autovalidators.training.config import TrainConfig
from autovalidators.training.base_models.e5 import read_provenance
from autovalidators.training.tasks.base import IGNORE_INDEX, ProblemType, TaskSpec

logger = logging.getLogger(__name__)

STATE_FILE = "trainer_state.json"


@dataclass
class TrainState:
    """What a resumed run needs beyond the accelerate state."""

    step: int = 0  # optimizer steps done
    epoch: int = 0
    batches_in_epoch: int = 0  # micro-batches of `epoch` already consumed
    best_metric: float | None = None
    best_step: int = 0
    evals_without_improvement: int = 0
    stopped_early: bool = False


def load_records(path: str | Path, limit: int | None, seed: int) -> list[dict]:
    """Prepared JSONL records, a seeded subsample of `limit` of them when set."""
    records = list(read_jsonl(path))
    if limit is not None and len(records) > limit:
        records = random.Random(seed).sample(records, limit)
    return records


def epoch_batches(lengths: Sequence[int], batch_size: int, seed: int, bucket: int = 50) -> list[list[int]]:
    """Seeded batches of similar length: shuffle, sort within chunks of `bucket` batches, shuffle
    the batches. Padding to each batch's longest member then wastes little (pairs average ~50 of
    128 tokens), which roughly halves CPU time, while the order stays random enough to train on."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(lengths)).tolist()
    batches: list[list[int]] = []
    chunk = batch_size * bucket
    for start in range(0, len(order), chunk):
        members = sorted(order[start:start + chunk], key=lambda i: lengths[i])
        batches += [members[i:i + batch_size] for i in range(0, len(members), batch_size)]
    rng.shuffle(batches)
    return batches


def collate(features: Sequence[dict[str, Any]], problem_type: ProblemType | None = None, pad_id: int = 0):
    """Pads a batch to its longest member (dynamic padding: short pairs cost less).

    `problem_type` says what `labels` are (required when the features carry labels): per-token ids
    padded with IGNORE_INDEX (token), one target row per example with -1 for missing labels
    (multi_label), or one class id per example (single_label). Guessing from the shapes fails when
    a text has as many tokens as the task has labels.
    """
    import torch

    width = max(len(f["input_ids"]) for f in features)
    batch: dict[str, Any] = {}
    for key, pad in (("input_ids", pad_id), ("attention_mask", 0), ("token_type_ids", 0)):
        batch[key] = torch.tensor([f[key] + [pad] * (width - len(f[key])) for f in features], dtype=torch.long)
    if "labels" not in features[0]:
        return batch
    if problem_type == "token":
        rows = [list(f["labels"]) + [IGNORE_INDEX] * (width - len(f["labels"])) for f in features]
        batch["labels"] = torch.tensor(rows, dtype=torch.long)
    elif problem_type == "multi_label":
        batch["labels"] = torch.tensor([list(f["labels"]) for f in features], dtype=torch.float)
    elif problem_type == "single_label":
        batch["labels"] = torch.tensor([f["labels"] for f in features], dtype=torch.long)
    else:
        raise ValueError(f"collate needs the problem type to batch labels, got {problem_type!r}")
    return batch


def build_model(spec: TaskSpec, config: TrainConfig, model_path: str):
    """The encoder with the task head, cut to `keep_layers` and partly frozen as configured."""
    model = spec.model_class().from_pretrained(model_path, **spec.model_kwargs())
    encoder = model.base_model
    layers = encoder.encoder.layer
    if config.freeze.keep_layers is not None and config.freeze.keep_layers < len(layers):
        import torch

        # Dropping top layers makes the exported model smaller and faster; the config must agree
        # so that save_pretrained/from_pretrained rebuild the same shape.
        encoder.encoder.layer = torch.nn.ModuleList(list(layers)[: config.freeze.keep_layers])
        model.config.num_hidden_layers = config.freeze.keep_layers
    if config.freeze.embeddings:
        for parameter in encoder.embeddings.parameters():
            parameter.requires_grad = False
    for layer in list(encoder.encoder.layer)[: config.freeze.first_layers]:
        for parameter in layer.parameters():
            parameter.requires_grad = False
    return model


def predict_logits(model, features: Sequence[dict], batch_size: int, accelerator=None) -> np.ndarray:
    """Logits for `features` in their order; batches are built from length-sorted features."""
    import torch

    order = sorted(range(len(features)), key=lambda i: len(features[i]["input_ids"]))
    outputs: list[np.ndarray | None] = [None] * len(features)
    model.eval()
    device = accelerator.device if accelerator else next(model.parameters()).device
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            batch = collate([{k: v for k, v in features[i].items() if k != "labels"} for i in chunk])
            logits = model(**{k: v.to(device) for k, v in batch.items()}).logits.float().cpu().numpy()
            for row, index in enumerate(chunk):
                length = len(features[index]["input_ids"])
                outputs[index] = logits[row][:length] if logits.ndim == 3 else logits[row]
    model.train()
    if features and np.ndim(outputs[0]) == 2:  # token logits: ragged, keep as an object array
        return np.array(outputs, dtype=object)
    return np.stack(outputs) if outputs else np.zeros((0,))


def _better(value: float, best: float | None, mode: str) -> bool:
    if best is None or math.isnan(best):
        return not math.isnan(value)
    return value > best if mode == "max" else value < best


def _optimizer_groups(model, weight_decay: float) -> list[dict]:
    # No decay on biases and LayerNorm weights, as in the BERT recipe.
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        (no_decay if parameter.ndim < 2 or "LayerNorm" in name else decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def read_warm_start(model_path: str | Path) -> dict[str, Any] | None:
    """The earlier run a base folder was taken from, when its `run.json` came along (a warm start from
    another run's best/): recipe, data, best step and that run's own warm start, so a chain of passes
    can be rebuilt from the last one's manifest."""
    path = Path(model_path) / "run.json"
    if not path.is_file():
        return None
    run = json.loads(path.read_text())
    return {key: run.get(key) for key in ("config_source", "config", "data", "best_step", "base_model_source",
                                          "warm_start")}


def train(spec: TaskSpec, config: TrainConfig, *, resume: bool = False, config_source: str = "") -> dict:
    """Fine-tunes `spec`'s model as configured; returns the best dev metrics and where they are."""
    import torch
    from accelerate import Accelerator
    from accelerate.utils import set_seed
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    out = Path(config.output_dir)
    last_dir, best_dir = out / "last", out / "best"
    if out.exists() and any(out.iterdir()) and not resume:
        raise FileExistsError(f"{out} is not empty; pass --resume to continue it or choose another output_dir")
    out.mkdir(parents=True, exist_ok=True)
    if config.cpu_threads:
        torch.set_num_threads(config.cpu_threads)
    accelerator = Accelerator(mixed_precision=config.mixed_precision,
                              gradient_accumulation_steps=config.grad_accumulation)
    set_seed(config.seed)

    model_path = resolve_base_model(config.base_model)
    tokenizer = load_tokenizer(model_path)
    train_records = load_records(config.train_file, config.max_train_examples, config.seed)
    dev_records = load_records(config.dev_file, config.max_dev_examples, config.seed)
    if not train_records or not dev_records:
        raise ValueError(f"empty training or dev data: {config.train_file}, {config.dev_file}")
    spec.on_train_records(train_records)
    train_features = [spec.encode(tokenizer, r, config.max_length) for r in train_records]
    dev_features = [spec.encode(tokenizer, r, config.max_length) for r in dev_records]
    lengths = [len(f["input_ids"]) for f in train_features]
    logger.info("%d train / %d dev examples, base model %s", len(train_features), len(dev_features), model_path)

    model = build_model(spec, config, model_path)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    logger.info("parameters: %d trainable of %d", trainable, sum(p.numel() for p in model.parameters()))
    batches_per_epoch = math.ceil(len(train_features) / config.batch_size)
    steps_per_epoch = max(1, batches_per_epoch // config.grad_accumulation)
    total_steps = config.max_steps or max(1, math.ceil(config.epochs * steps_per_epoch))
    optimizer = torch.optim.AdamW(_optimizer_groups(model, config.weight_decay), lr=config.learning_rate)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(config.warmup_ratio * total_steps), total_steps)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)

    state = TrainState()
    if resume and (last_dir / STATE_FILE).is_file():
        accelerator.load_state(str(last_dir))
        state = TrainState(**json.loads((last_dir / STATE_FILE).read_text()))
        logger.info("resumed from %s at step %d (epoch %d, batch %d)", last_dir, state.step, state.epoch,
                    state.batches_in_epoch)

    run_info = {
        "task": spec.name, "base_model": config.base_model, "base_model_path": model_path,
        # A folder from `autovalidators base-model build` says what it was built from.
        "base_model_source": read_provenance(model_path),
        "warm_start": read_warm_start(model_path),
        "config": config.model_dump(mode="json"), "config_source": config_source,
        "data": {"train": {"file": config.train_file, "sha256": sha256_of(Path(config.train_file)),
                           "examples": len(train_features)},
                 "dev": {"file": config.dev_file, "sha256": sha256_of(Path(config.dev_file)),
                         "examples": len(dev_features)}},
        "total_steps": total_steps,
    }

    def evaluate() -> dict[str, float]:
        logits = predict_logits(accelerator.unwrap_model(model), dev_features, config.eval_batch_size, accelerator)
        return spec.metrics(logits, dev_records)

    def checkpoint() -> None:
        accelerator.save_state(str(last_dir))
        if accelerator.is_main_process:
            (last_dir / STATE_FILE).write_text(json.dumps(state.__dict__, indent=2))

    def evaluate_and_save() -> bool:
        """Evaluates, keeps the best model, checkpoints; True when training should stop early."""
        metrics = evaluate()
        if config.early_stopping.metric not in metrics:
            raise ValueError(
                f"early_stopping.metric {config.early_stopping.metric!r} is not among the dev metrics of "
                f"{spec.name} ({', '.join(sorted(metrics))}); check train.early_stopping.metric in the config")
        value = metrics[config.early_stopping.metric]
        improved = _better(value, state.best_metric, config.early_stopping.mode)
        if improved:
            state.best_metric, state.best_step, state.evals_without_improvement = value, state.step, 0
            if accelerator.is_main_process:
                accelerator.unwrap_model(model).save_pretrained(str(best_dir), safe_serialization=True)
                tokenizer.save(str(best_dir / "tokenizer.json"))
                (best_dir / "run.json").write_text(json.dumps(
                    {**run_info, "best_step": state.step, "dev_metrics": metrics}, indent=2, ensure_ascii=False))
        else:
            state.evals_without_improvement += 1
        patience = config.early_stopping.patience
        stop = bool(patience) and state.evals_without_improvement >= patience
        state.stopped_early = stop
        if accelerator.is_main_process:
            with open(out / "metrics.jsonl", "a", encoding="utf-8") as sink:
                sink.write(json.dumps({"step": state.step, "epoch": state.epoch, **metrics,
                                       "best": improved}) + "\n")
        logger.info("step %d dev %s=%.4f%s (%s)", state.step, config.early_stopping.metric, value,
                    " *best*" if improved else "", ", ".join(f"{k} {v:.4f}" for k, v in metrics.items()
                                                                if isinstance(v, float)))
        checkpoint()
        return stop

    model.train()
    progress = tqdm(total=total_steps, initial=state.step, desc=f"train {spec.name}",
                    disable=not accelerator.is_local_main_process)
    running_loss, running_count, started = 0.0, 0, time.time()
    stop = state.stopped_early
    while state.step < total_steps and not stop:
        # A fresh seeded order per epoch: reproducible, and a resumed run sees the same order.
        batches = epoch_batches(lengths, config.batch_size, config.seed + state.epoch)
        loader = torch.utils.data.DataLoader(train_features, batch_sampler=batches,
                                             collate_fn=partial(collate, problem_type=spec.problem_type))
        loader = accelerator.prepare(loader)
        if state.batches_in_epoch:
            loader = accelerator.skip_first_batches(loader, state.batches_in_epoch)
        for batch in loader:
            with accelerator.accumulate(model):
                labels = batch.pop("labels")
                loss = spec.loss(model(**batch).logits, labels)
                accelerator.backward(loss)
                if accelerator.sync_gradients and config.grad_clip > 0:
                    accelerator.clip_grad_norm_(model.parameters(), config.grad_clip)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            state.batches_in_epoch += 1
            running_loss += loss.item()
            running_count += 1
            if not accelerator.sync_gradients:
                continue
            state.step += 1
            progress.update(1)
            if state.step % config.log_every == 0:
                rate = running_count * config.batch_size / max(time.time() - started, 1e-9)
                logger.info("step %d/%d loss %.4f lr %.2e %.1f examples/s", state.step, total_steps,
                            running_loss / running_count, scheduler.get_last_lr()[0], rate)
                progress.set_postfix(loss=f"{running_loss / running_count:.4f}")
                running_loss, running_count, started = 0.0, 0, time.time()
            at_eval = config.eval_every and state.step % config.eval_every == 0
            if at_eval or state.step >= total_steps:
                stop = evaluate_and_save()
            elif config.save_every and state.step % config.save_every == 0:
                checkpoint()
            if stop or state.step >= total_steps:
                break
        else:
            state.epoch += 1
            state.batches_in_epoch = 0
            if not config.eval_every:
                stop = evaluate_and_save()
    progress.close()
    if state.best_metric is None:  # e.g. resumed after the last step: make sure `best/` exists
        evaluate_and_save()
    if stop:
        logger.info("stopped early at step %d: no dev improvement in %d evaluations", state.step,
                    config.early_stopping.patience)
    accelerator.wait_for_everyone()
    best = json.loads((best_dir / "run.json").read_text())
    return {"best_dir": str(best_dir), "best_step": best["best_step"], "dev_metrics": best["dev_metrics"],
            "steps": state.step, "stopped_early": stop}
