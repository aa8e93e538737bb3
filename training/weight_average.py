"""Weight averaging ("model soup"): one model whose weights are the mean of several runs' best/.

Runs fine-tuned from the same starting weights (one warm start, different data, seeds or
objectives) land in one basin, so their mean is a model of the same shape that usually ranks
better than any of them; it costs no inference time, unlike an ensemble. `greedy` follows
Wortsman et al. 2022: ingredients in order of their own dev score, each kept only when the soup's
dev score does not drop. Selection is on dev rows only; the benchmark sets stay unseen.

Output: `<to>/best/` laid out like a training run's (model, config, tokenizer, run.json), so
`autovalidators export <task> --run <to>` ships it; run.json's `weight_average` lists every
ingredient (run, best step, recipe, data sha256, weights sha256, dev score, kept or not).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Sequence

from autovalidators.inference.manifest import sha256_of

from autovalidators.training.config import TrainConfig
from autovalidators.training.tasks.base import TaskSpec
from autovalidators.training.trainer import load_records, predict_logits

logger = logging.getLogger(__name__)

WEIGHTS_FILE = "model.safetensors"


class AverageError(ValueError):
    """The runs cannot be averaged (missing files, other task, other shapes, other start)."""


def _read_run(run_dir: Path, task: str) -> dict[str, Any]:
    best = run_dir / "best"
    for name in (WEIGHTS_FILE, "config.json", "tokenizer.json", "run.json"):
        if not (best / name).is_file():
            raise AverageError(f"{best / name} is missing: --run takes a training output_dir that holds best/")
    run = json.loads((best / "run.json").read_text())
    if run.get("task") != task:
        raise AverageError(f"{best / 'run.json'}: task {run.get('task')!r}, not {task!r}")
    return run


def lineage(info: dict[str, Any]) -> list[str]:
    """The weights a run started from, then what those started from (its recorded warm-start chain)."""
    chain, warm = [info.get("base_model")], info.get("warm_start")
    while warm:
        chain.append((warm.get("config") or {}).get("base_model"))
        warm = warm.get("warm_start")
    return [base for base in chain if base]


def _check_compatible(runs: Sequence[Path], infos: Sequence[dict], states: Sequence[dict]) -> None:
    first, first_state = runs[0], states[0]
    first_tokenizer = sha256_of(first / "best" / "tokenizer.json")
    for run, info, state in zip(runs[1:], infos[1:], states[1:]):
        # Averaging needs one basin: a common starting point somewhere in both runs' recorded lineage.
        if not set(lineage(info)) & set(lineage(infos[0])):
            raise AverageError(f"{run} started from {lineage(info)}, {first} from {lineage(infos[0])}: no common "
                               "starting weights in their recorded lineage, and only such runs average")
        if sha256_of(run / "best" / "tokenizer.json") != first_tokenizer:
            raise AverageError(f"{run}/best/tokenizer.json differs from {first}/best/tokenizer.json")
        if set(state) != set(first_state):
            extra = sorted(set(state) ^ set(first_state))[:3]
            raise AverageError(f"{run}: its tensors differ from {first}'s (e.g. {extra})")
        for key, tensor in state.items():
            if tuple(tensor.shape) != tuple(first_state[key].shape):
                raise AverageError(f"{run}: tensor {key} has shape {tuple(tensor.shape)}, "
                                   f"{first} has {tuple(first_state[key].shape)}")


def mean_state(states: Sequence[dict]) -> dict:
    """Element-wise mean of same-shaped state dicts (float32; integer buffers taken from the first)."""
    averaged = {}
    for key, tensor in states[0].items():
        if tensor.is_floating_point():
            averaged[key] = sum(state[key].float() for state in states) / len(states)
        else:
            averaged[key] = tensor.clone()
    return averaged


def average_runs(spec: TaskSpec, runs: Sequence[Path], to: Path, train: TrainConfig, *,
                 greedy: bool = True, metric: str | None = None) -> dict[str, Any]:
    """Averages `runs` (greedily by dev `metric`, default the task's main one, or all of them) into
    `<to>/best/`; returns its run.json."""
    import torch
    from safetensors.torch import load_file

    from autovalidators.training.base_models.registry import load_tokenizer

    runs = [Path(run) for run in runs]
    if len(runs) < 2:
        raise AverageError("weight averaging needs at least two --run folders")
    if len(set(map(str, runs))) != len(runs):
        raise AverageError("the same --run is given twice")
    if to.exists() and any(to.iterdir()):
        raise AverageError(f"{to} is not empty; choose another --to")
    infos = [_read_run(run, spec.name) for run in runs]
    states = [load_file(str(run / "best" / WEIGHTS_FILE)) for run in runs]
    _check_compatible(runs, infos, states)

    dev_records = load_records(train.dev_file, train.max_dev_examples, train.seed)
    if not dev_records:
        raise AverageError(f"{train.dev_file} has no dev records to choose the ingredients on")
    tokenizer = load_tokenizer(str(runs[0] / "best"))
    dev_features = [spec.encode(tokenizer, record, train.max_length) for record in dev_records]
    model = spec.model_class().from_pretrained(str(runs[0] / "best"), **spec.model_kwargs())
    torch.set_num_threads(train.cpu_threads or torch.get_num_threads())

    def dev_metrics(state: dict) -> dict[str, float]:
        model.load_state_dict(state)
        return spec.metrics(predict_logits(model, dev_features, train.eval_batch_size), dev_records)

    metric = metric or spec.main_metric
    own_metrics = []
    for run, state in zip(runs, states):
        own_metrics.append(dev_metrics(state))
        if metric not in own_metrics[-1]:
            raise AverageError(f"--metric {metric!r} is not a dev metric of {spec.name} "
                               f"({', '.join(sorted(own_metrics[-1]))})")
        logger.info("ingredient %s: dev %s %.4f", run, metric, own_metrics[-1][metric])
    scores = [values[metric] for values in own_metrics]
    order = sorted(range(len(runs)), key=lambda i: -scores[i]) if greedy else list(range(len(runs)))
    kept = [order[0]] if greedy else list(order)
    soup_metrics = own_metrics[order[0]]  # greedy: the soup's dev metrics so far (already measured)
    tried: dict[int, float] = {}
    if greedy:
        for index in order[1:]:
            candidate = dev_metrics(mean_state([states[i] for i in kept + [index]]))
            tried[index] = candidate[metric]
            keep = tried[index] >= soup_metrics[metric]
            logger.info("add %s: soup dev %s %.4f (%s)", runs[index], metric, tried[index], "kept" if keep else "left out")
            if keep:
                kept.append(index)
                soup_metrics = candidate
    # The first kept ingredient that records a recipe stands for it (base, data, warm start; `export` reads
    # it); the others are listed. A folder of weights given a run.json by hand (a shipped model read back
    # from ONNX) records none, so it can be averaged in but cannot lead.
    with_recipe = [i for i in kept if infos[i].get("config")]
    if not with_recipe:
        raise AverageError(f"no kept run records its recipe (a 'config' in best/run.json: "
                           f"{', '.join(str(runs[i]) for i in kept)}), and export needs one")
    final_state = mean_state([states[i] for i in kept])
    # A greedy soup was measured when its last ingredient went in; a uniform one not yet.
    final_metrics = soup_metrics if greedy else dev_metrics(final_state)

    best = to / "best"
    best.mkdir(parents=True, exist_ok=True)
    model.load_state_dict(final_state)
    model.save_pretrained(str(best), safe_serialization=True)
    tokenizer.save(str(best / "tokenizer.json"))
    ingredients = [{"run": str(run), "best_step": info.get("best_step"), "config_source": info.get("config_source"),
                    "train_sha256": info.get("data", {}).get("train", {}).get("sha256"),
                    "weights_sha256": sha256_of(run / "best" / WEIGHTS_FILE), f"dev_{metric}": scores[i],
                    "soup_dev_when_added": tried.get(i), "kept": i in kept}
                   for i, (run, info) in enumerate(zip(runs, infos))]
    lead = infos[with_recipe[0]]
    record = {**{key: lead.get(key) for key in ("task", "base_model", "base_model_path", "base_model_source",
                                                 "warm_start", "config", "config_source", "data")},
              "best_step": None, "dev_metrics": final_metrics,
              "weight_average": {"method": "greedy" if greedy else "uniform", "selected_on": train.dev_file,
                                 "metric": metric, "ingredients": ingredients}}
    (best / "run.json").write_text(json.dumps(record, indent=2, ensure_ascii=False))
    logger.info("averaged %d of %d runs into %s: dev %s %.4f", len(kept), len(runs), best, metric,
                final_metrics[metric])
    return record
