"""`benchmark gate`, `calibrate` and `prepare gate-sets`: the whole gate on labelled answers."""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any, Optional

import typer
import yaml
from rich.table import Table

from .calibrate import calibrate, file_sha256, render_config
from .case import Case, CaseError, parse_case, read_records
from .cli import _build_gate, _fail, _unreadable, app, benchmark_app, console, prepare_app
from .config import CONFIG_DIR, GateConfig
from .decision import tone_check
from .gate import Gate
from .gate_quality import (evaluate, is_labelled, paired_change, paired_tone_change, parse_labelled, plot_rates,
                           read_labelled, tone_rates)
from .minimums import TUNED_CHECKS, TooFewLabels
from .out_of_sample import OUT_OF_SAMPLE_ROUNDS

BUNDLED_CASES = "examples/cases.jsonl"
TONE_TEXT_FIELDS = ("text", "label", "dataset", "language")


def _pct(value: float | None, interval: list[float] | None = None) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.1f}%" + (f" [{100 * interval[0]:.0f}, {100 * interval[1]:.0f}]" if interval else "")


def _rates_table(title: str, rows: list[dict[str, Any]]) -> Table:
    table = Table(title=title)
    for column in ("group", "good", "bad", "friction [95% CI]", "miss [95% CI]"):
        table.add_column(column, justify="left" if column == "group" else "right")
    for row in rows:
        table.add_row(row["group"], str(row["good"]), str(row["bad"]), _pct(row["friction"], row["friction_ci"]),
                      _pct(row["miss"], row["miss_ci"]))
    return table


def _tone_flags(gate: Gate, texts: list[dict[str, Any]]) -> list[bool]:
    """Whether the gate's tone check fails each text, read alone (an answer with no question or context)."""
    if "tone" not in gate.validators:
        raise _fail("--tone-texts needs the tone validator in the gate")
    cases = [Case(id=str(t.get("id", i)), question="", answer=str(t["text"])) for i, t in enumerate(texts)]
    return [tone_check(output, gate.config).passed is False for output in gate.validators["tone"].predict(cases)]


@benchmark_app.command("gate")
def benchmark_gate(
    cases: Optional[Path] = typer.Option(None, help="JSONL of cases; with `label` (good|bad) or `expected_decision` "
                                         "per line, friction and misses too (default: the bundled examples)"),
    tone_texts: Optional[Path] = typer.Option(None, "--tone-texts", help="JSONL of {text, label: neutral|abusive, "
                                              "dataset, language}: the tone check's flag rates"),
    repeat: int = typer.Option(20, min=1, help="latency: rounds over the first --latency-cases cases"),
    latency_cases: int = typer.Option(30, min=1, help="latency: how many cases to time one by one"),
    json_out: Path = typer.Option(Path("out/benchmarks/gate.json"), "--json", help="where to write the JSON"),
    config: Optional[Path] = typer.Option(None, help="gate policy YAML (default: configs/gate.yaml)"),
    validators: Optional[str] = typer.Option(None, help="comma-separated validator names"),
    models_dir: Optional[Path] = typer.Option(None, help="folder with trained validators"),
    baseline: Optional[Path] = typer.Option(None, "--baseline", help="an earlier `benchmark gate` JSON on the same "
                                            "cases: prints the paired change in friction and miss with intervals "
                                            "(with --tone-texts: in tone flags, per language and per dataset)"),
) -> None:
    """The whole gate: per-case latency, and on labelled cases friction (good answers not ACCEPTed)
    and misses (bad answers ACCEPTed) per task type and language, with what stopped the good ones."""
    from .latency import measure_gate

    gate = _build_gate(config, validators, models_dir)
    source = cases or Path(str(resources.files("autovalidators.inference").joinpath(BUNDLED_CASES)))
    if not source.is_file():
        raise _fail(_unreadable(source))
    records = list(read_records(source))
    unlabelled = not is_labelled(records)
    if unlabelled:
        parsed = [r if isinstance(r, CaseError) else parse_case(r[1], line=r[0], source=str(source)) for r in records]
        plain = [r for r in parsed if isinstance(r, Case)]
        errors = [r for r in parsed if not isinstance(r, Case)]
    else:
        labelled, errors = parse_labelled(records, str(source))
        plain = [item.case for item in labelled]
    for error in errors:
        console.print(f"[red]skipped[/red] {error}")
    if not plain:
        raise _fail(f"{source}: no usable case")
    report: dict[str, Any] = {"command": " ".join(["autovalidators", *sys.argv[1:]]), "source": str(source),
                              "source_sha256": file_sha256(source), "config_sha256": _config_sha(config),
                              "skipped_lines": [str(e) for e in errors]}
    report.update(measure_gate(gate, plain[:latency_cases], repeat=repeat))
    if not unlabelled:
        results = gate.validate_batch(plain)
        quality = evaluate(labelled, results)
        report["quality"] = quality
        for scope in ("all", "language", "task", "set"):
            console.print(_rates_table(f"gate on {source.name}, by {scope}", quality["groups"][scope]))
        for language, counts in quality["good_stopped_by"].items():
            console.print(f"good answers stopped ({language}): " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        for language, counts in quality["bad_accepted_by_kind"].items():
            console.print(f"bad answers served ({language}): " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        for language, kinds in quality["bad_accepted_by_error"].items():
            console.print(f"bad answers served, by marked error ({language}): "
                          + ", ".join(f"{k} {v['served']} of {v['of']}" for k, v in kinds.items()))
        if baseline:
            report["versus_baseline"] = {"baseline": str(baseline), "rows": _print_change(baseline, quality["cases"])}
        plot = plot_rates(quality["groups"]["set"] + quality["groups"]["language"] + quality["groups"]["all"],
                          json_out.with_name(json_out.stem + "_rates.png"))
        report["plot"] = str(plot) if plot else None
    if tone_texts:
        texts = []
        for item in read_records(tone_texts):
            problem = item if isinstance(item, CaseError) else next(
                (CaseError(item[0], key, "is required", source=str(tone_texts)) for key in TONE_TEXT_FIELDS
                 if not isinstance(item[1], dict) or not isinstance(item[1].get(key), str)), None)
            if problem:
                console.print(f"[red]skipped[/red] {problem}")
                errors.append(problem)
            else:
                texts.append(item[1])
        flags = _tone_flags(gate, texts)
        rows = tone_rates(texts, flags)
        report["tone"] = rows
        report["tone_texts"] = [{"id": str(t.get("id", i)), "language": t["language"], "label": t["label"],
                                 "dataset": t["dataset"], "text_sha256": hashlib.sha256(t["text"].encode()).hexdigest(),
                                 "flagged": flag}
                                for i, (t, flag) in enumerate(zip(texts, flags))]
        table = Table(title=f"tone check on {tone_texts.name}: share flagged")
        for column in ("language", "label", "dataset", "texts", "flagged [95% CI]"):
            table.add_column(column)
        for row in rows:
            table.add_row(row["language"], row["label"], row["dataset"], str(row["texts"]),
                          _pct(row["flag_rate"], row["flag_rate_ci"]))
        console.print(table)
        if baseline:
            report["tone_versus_baseline"] = _print_tone_change(baseline, report["tone_texts"])
    single = report["single_case"]
    console.print(f"latency, one case per call ({len(plain[:latency_cases])} cases x {repeat}): p50 "
                  f"{single['p50_ms']:.1f} ms, p95 {single['p95_ms']:.1f} ms; "
                  f"batch {report['batch_cases_per_s']:.0f} cases/s; peak memory {report['peak_rss_mb']:.0f} MB")
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    console.print(f"wrote {json_out}" + (f" and {report['plot']}" if report.get("plot") else ""))
    if errors:
        raise typer.Exit(code=1)


def _print_change(baseline: Path, cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    try:
        earlier = json.loads(baseline.read_text(encoding="utf-8"))["quality"]["cases"]
        rows = paired_change(earlier, cases)
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise _fail(f"{baseline}: not a labelled `benchmark gate` JSON on these cases ({exc})") from None
    table = Table(title=f"change against {baseline.name} (paired, same cases; 95% bootstrap interval)")
    for column in ("scope", "group", "cases", "friction", "change [95% CI]", "miss", "change [95% CI] "):
        table.add_column(column)

    def change(row: dict[str, Any], metric: str) -> str:
        value, interval = row[f"{metric}_change"], row[f"{metric}_change_ci"]
        if value is None:
            return "-"
        return f"{100 * value:+.1f}" + (f" [{100 * interval[0]:+.1f}, {100 * interval[1]:+.1f}]" if interval else "")

    for row in rows:
        table.add_row(row["scope"], row["group"], str(row["cases"]),
                      f"{_pct(row['friction_before'])} -> {_pct(row['friction_after'])}", change(row, "friction"),
                      f"{_pct(row['miss_before'])} -> {_pct(row['miss_after'])}", change(row, "miss"))
    console.print(table)
    return rows


def _print_tone_change(baseline: Path, texts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    try:
        rows = paired_tone_change(json.loads(baseline.read_text(encoding="utf-8"))["tone_texts"], texts)
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise _fail(f"{baseline}: not a `benchmark gate --tone-texts` JSON on these texts ({exc})") from None
    table = Table(title=f"tone flags against {baseline.name} (paired, same texts; 95% bootstrap interval)")
    for column in ("language", "label", "dataset", "texts", "flagged", "change [95% CI]"):
        table.add_column(column)
    for row in rows:
        low, high = row["change_ci"] or (row["change"], row["change"])
        table.add_row(row["language"], row["label"], row["dataset"], str(row["texts"]),
                      f"{_pct(row['before'])} -> {_pct(row['after'])}",
                      f"{100 * row['change']:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]")
    console.print(table)
    return rows


def _config_sha(config: Optional[Path]) -> str:
    return file_sha256(config or CONFIG_DIR / "gate.yaml")


@app.command("calibrate")
def calibrate_command(
    labelled: list[Path] = typer.Argument(..., help="JSONL file(s) of cases with `label` (good|bad) or "
                                          "`expected_decision`; several files are fitted as one set"),
    max_miss: float = typer.Option(0.10, "--max-miss", min=0.01, max=0.5,
                                   help="the highest share of bad answers the gate may ACCEPT"),
    out: Path = typer.Option(Path("out/calibrated/gate.yaml"), "--out", help="the gate config to write"),
    config: Optional[Path] = typer.Option(None, help="base gate config (default: configs/gate.yaml); its "
                                          "comments and other settings are kept"),
    per_task: bool = typer.Option(True, "--per-task/--no-per-task", help="fit minimums per task type where "
                                  "the data allow"),
    leave_one_out: bool = typer.Option(False, "--leave-one-out", help="also fit without each dataset "
                                       "(meta.dataset) and report its rates: what an unseen source will see"),
    balance: bool = typer.Option(False, "--balance/--no-balance", help="average friction and miss over the "
                                 "datasets (meta.dataset) in each task, each weighing the same, instead of "
                                 "pooling their answers"),
    out_of_sample_rounds: int = typer.Option(OUT_OF_SAMPLE_ROUNDS, "--out-of-sample", min=0,
                                             help="rounds of fitting on three quarters of each task's answer "
                                             "groups (meta.group) and deciding the rest: the rates to expect on "
                                             "new answers from the same sources (0: skip)"),
    hold_out_of_sample: bool = typer.Option(False, "--hold-out-of-sample", help="hold each task's out-of-sample "
                                            "miss rate, not its fitted one, to --max-miss: fit it at the largest "
                                            "limit from --max-miss down to half of it whose out-of-sample misses "
                                            "stay within --max-miss"),
    validators: Optional[str] = typer.Option(None, help="comma-separated validator names"),
    models_dir: Optional[Path] = typer.Option(None, help="folder with trained validators"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the fit, curves, separability and "
                                            "leave-one-out rates as JSON"),
) -> None:
    """Fit the gate's minimums to your labelled answers: the least friction at the allowed miss rate."""
    items, errors = [], []
    for path in labelled:
        if not path.is_file():
            raise _fail(_unreadable(path))
        file_items, file_errors = read_labelled(path)
        items += file_items
        errors += file_errors
    counts = Counter(item.case.id for item in items)
    repeated = sorted(str(i) for i, n in counts.items() if n > 1) if len(labelled) > 1 else []
    if repeated:
        raise _fail(f"{', '.join(map(str, labelled))}: case id(s) {', '.join(repeated[:5])} appear more "
                    "than once; a case counted twice would weigh twice in the fit")
    for error in errors:
        console.print(f"[red]skipped[/red] {error}")
    gate = _build_gate(config, validators, models_dir)
    try:
        fitted = calibrate(gate, items, max_miss=max_miss, source=" + ".join(map(str, labelled)), per_task=per_task,
                           leave_one_out=leave_one_out, balance=balance, out_of_sample_rounds=out_of_sample_rounds,
                           hold_out_of_sample=hold_out_of_sample)
    except TooFewLabels as exc:
        raise _fail(str(exc)) from None
    overall = fitted["overall"]
    table = Table(title=f"fitted minimums (max miss {max_miss:.2f}) on {' + '.join(p.name for p in labelled)}")
    for column in ("scope", "good", "bad", *TUNED_CHECKS, "friction", "miss"):
        table.add_column(column)
    table.add_row("all", str(fitted["combined"]["good"]), str(fitted["combined"]["bad"]),
                  *[f"{overall.minimums[c]:.2f}" for c in TUNED_CHECKS], _pct(overall.friction), _pct(overall.miss))
    for task, entry in fitted["tasks"].items():
        fit = entry["fit"]
        table.add_row(task, str(entry["good"]), str(entry["bad"]), *[f"{fit.minimums[c]:.2f}" for c in TUNED_CHECKS],
                      _pct(fit.friction), _pct(fit.miss))
    console.print(table)
    for task, why in fitted["skipped_tasks"].items():
        console.print(f"{task}: the overall minimums apply ({why})")
    curve = Table(title="miss-friction curve per check (others at their fitted minimums, all cases)")
    curve.add_column("minimum")
    for name in TUNED_CHECKS:
        curve.add_column(f"{name} friction/miss")
    # Every other minimum of the fine grid, and every one of a coarser check's grid.
    by_minimum = {name: {p["minimum"]: p for p in fitted["curves"][name]} for name in TUNED_CHECKS}
    shown = sorted({p["minimum"] for name in TUNED_CHECKS
                    for p in fitted["curves"][name][::2 if len(fitted["curves"][name]) > 5 else 1]})
    for minimum in shown:
        cells = [by_minimum[name].get(minimum) for name in TUNED_CHECKS]
        curve.add_row(f"{minimum:.2f}", *[f"{_pct(p['friction'])} / {_pct(p['miss'])}" if p else "" for p in cells])
    console.print(curve)
    separable = Table(title="how well each check alone separates good from bad answers: ROC-AUC [95%] "
                            "(0.5 = chance; a minimum trades friction for misses along this curve)")
    separable.add_column("scope")
    for name in TUNED_CHECKS:
        separable.add_column(name)
    for scope in dict.fromkeys(row["scope"] for row in fitted["separability"]):
        cells = {row["check"]: f"{row['roc_auc']:.2f} [{row['roc_auc_ci'][0]:.2f}, {row['roc_auc_ci'][1]:.2f}]"
                 for row in fitted["separability"] if row["scope"] == scope}
        separable.add_row(scope, *[cells.get(name, "") for name in TUNED_CHECKS])
    console.print(separable)
    combined = fitted["combined"]
    fits = [overall, *(entry["fit"] for entry in fitted["tasks"].values())]
    if any(fit.miss > max_miss + 1e-12 for fit in fits):
        console.print(f"[yellow]warning:[/yellow] no minimums on the grid keep the miss rate at {max_miss:.2f} in "
                      "every scope; the written config has the lowest miss found")
    console.print(f"every case under its task's minimums: friction {_pct(combined['friction'])}, "
                  f"miss {_pct(combined['miss'])} ({combined['good']} good, {combined['bad']} bad; "
                  f"validators ran once, {fitted['scoring_s']:.0f} s)")
    per_source = combined["balanced_over_datasets"]
    console.print(f"averaged over the datasets, each weighing the same: friction {_pct(per_source['friction'])}, "
                  f"miss {_pct(per_source['miss'])}" + ("" if balance else " (pooled rates were fitted; --balance fits these)"))
    if fitted["leave_one_out"]:
        table = Table(title="each dataset left out: its rates under minimums fitted with it / without it")
        for column in ("dataset", "good", "bad", "friction with / without", "miss with / without"):
            table.add_column(column)
        for row in fitted["leave_one_out"]:
            without = row.get("fitted_without_it") or {}
            table.add_row(row["dataset"], str(row["good"]), str(row["bad"]),
                          f"{_pct(row['fitted_with_it']['friction'])} / {_pct(without.get('friction'))}",
                          f"{_pct(row['fitted_with_it']['miss'])} / {_pct(without.get('miss'))}"
                          + (f"  ({row['skipped']})" if "skipped" in row else ""))
        console.print(table)
    held = fitted["held_limits"]
    if held and held["curves"]:
        _print_held_limits(held, max_miss)
    elif held:
        console.print(f"no task type has enough labels in three quarters of its answers to measure its "
                      f"out-of-sample misses; every task is fitted at {max_miss:.2f}")
    unseen = fitted["out_of_sample"]
    if unseen:
        _print_out_of_sample(unseen, fitted)
    base_path = config or CONFIG_DIR / "gate.yaml"
    held_out = {row["dataset"]: {k: round(v, 4) for k, v in row["fitted_without_it"].items() if v is not None}
                for row in fitted["leave_one_out"] if "fitted_without_it" in row}
    provenance = {
        "command": " ".join(["autovalidators", *sys.argv[1:]]),
        **({"data": str(labelled[0]), "data_sha256": file_sha256(labelled[0])} if len(labelled) == 1 else
           {"data": [str(p) for p in labelled], "data_sha256": {str(p): file_sha256(p) for p in labelled}}),
        "cases": {"good": combined["good"], "bad": combined["bad"], "skipped_lines": len(errors)},
        "max_miss": max_miss,
        "balance": fitted["balance"],  # rates averaged over meta.dataset in each task (None: pooled)
        "fitted_on_data": {"friction": round(combined["friction"], 4), "miss": round(combined["miss"], 4),
                           "averaged_over_datasets": {k: round(v, 4) for k, v in per_source.items() if v is not None}},
        **({"leave_one_dataset_out": held_out} if held_out else {}),
        **({"miss_limit_per_task": held["limits"]} if held else {}),
        **({"out_of_sample": {"rounds": unseen["rounds"], "holdout_share": unseen["holdout_share"],
                              **{scope: {k: round(v, 4) for k, v in rates_.items() if v is not None}
                                 for scope, rates_ in unseen["rates"].items()}}} if unseen else {}),
        "roc_auc": {scope: {row["check"]: row["roc_auc"] for row in fitted["separability"] if row["scope"] == scope}
                    for scope in dict.fromkeys(row["scope"] for row in fitted["separability"])},
        "validators": {name: info["sha256"] or info["kind"] for name, info in gate.models.items()},
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
    }
    try:
        text = render_config(base_path.read_text(encoding="utf-8"), fitted["config"], provenance)
        GateConfig.model_validate(yaml.safe_load(text))  # what is written must load as written
    except ValueError as exc:  # pydantic's ValidationError is one too
        raise _fail(f"{base_path}: cannot write the fitted config from it: {exc}; nothing written") from None
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    console.print(f"wrote {out}")
    if json_out:
        report = {"provenance": provenance, "config": str(out),
                  "overall": vars(overall), "tasks": {t: {**e, "fit": vars(e["fit"])} for t, e in fitted["tasks"].items()},
                  "skipped_tasks": fitted["skipped_tasks"], "combined": combined, "curves": fitted["curves"],
                  "separability": fitted["separability"], "leave_one_out": fitted["leave_one_out"],
                  "out_of_sample": unseen, "held_limits": held}
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        console.print(f"wrote {json_out}")
    if errors:
        raise typer.Exit(code=1)


def _print_held_limits(held: dict[str, Any], max_miss: float) -> None:
    """Each task's out-of-sample friction and miss at every limit tried, and the one its fit is held to
    (`held["curves"]` has at least one task)."""
    table = Table(title=f"out-of-sample friction / miss per task at each fitting limit; each task is fitted at "
                        f"the largest limit whose out-of-sample miss is at most {max_miss:.2f} (*)")
    tasks = list(held["curves"])
    table.add_column("limit")
    for task in tasks:
        table.add_column(task)
    for row, limit in enumerate(point["limit"] for point in held["curves"][tasks[0]]):
        cells = []
        for task in tasks:
            point = held["curves"][task][row]
            mark = " *" if held["limits"].get(task) == limit else ""
            cells.append(f"{_pct(point['friction'])} / {_pct(point['miss'])}{mark}")
        table.add_row(f"{limit:.3f}", *cells)
    console.print(table)


def _print_out_of_sample(unseen: dict[str, Any], fitted: dict[str, Any]) -> None:
    """The fitted rates beside the out-of-sample ones, and how far each fitted minimum moved between rounds."""
    table = Table(title=f"out of sample: {unseen['rounds']} rounds, each fitting on "
                        f"{1 - unseen['holdout_share']:.0%} of every task's answer groups and deciding the rest "
                        "(rates: fitted / out of sample; each minimum: its median (lowest to highest) over the rounds)")
    for column in ("scope", "friction", "miss", *TUNED_CHECKS):
        table.add_column(column)
    in_sample = {"all": fitted["combined"], **{task: vars(entry["fit"]) for task, entry in fitted["tasks"].items()}}
    for scope, rates_ in unseen["rates"].items():
        own = in_sample.get(scope, {})
        spread = unseen["spread"].get(scope, {})
        table.add_row(scope, f"{_pct(own.get('friction'))} / {_pct(rates_['friction'])}",
                      f"{_pct(own.get('miss'))} / {_pct(rates_['miss'])}",
                      *[f"{s['median']:.2f} ({s['low']:.2f} to {s['high']:.2f})" if (s := spread.get(name)) else ""
                        for name in TUNED_CHECKS])
    console.print(table)
    if unseen["skipped_rounds"]:
        console.print(f"{unseen['skipped_rounds']} rounds skipped: their fitting part had too few labels")


@prepare_app.command("gate-sets")
def prepare_gate_sets(
    out: Path = typer.Option(Path("out/gate_sets"), "--out", help="folder for dev.jsonl, test.jsonl, tone.jsonl"),
    datasets: Path = typer.Option(Path("../shared/datasets"), "--datasets", help="the public datasets folder"),
) -> None:
    """Labelled gate cases from the public sets (RAGTruth, FaithBench, XQuAD en/ru, TyDi ru, WikiQA),
    split dev/test by source, plus neutral and abusive texts for the tone check."""
    from autovalidators.data_prep.gate_sets import build_gate_sets

    if not datasets.is_dir():
        raise _fail(f"{datasets}: no such folder (see ../shared/datasets/README.md)")
    counts = build_gate_sets(out, datasets)
    for split in ("dev", "test"):
        console.print(f"{split}: " + ", ".join(f"{k} {v}" for k, v in counts[split].items()))
    console.print(f"tone texts: {counts['tone']}; wrote {out}")

