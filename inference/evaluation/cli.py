"""`autovalidators compare | evaluate ... | testset ...`: the evaluation commands.

Exit codes: 0 done; 1 done, but some records were bad, a quota check failed, or (with
`--fail-on-regression`) B is significantly worse than A; 2 the command could not run.
Nothing heavy is imported at import time; scipy is imported by the significance test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from ..case import Case, CaseError, read_cases
from ..cli import _build_gate, _fail, app, console
from ..config import ConfigError
from .config import EvaluationConfig, load_evaluation_config

evaluate_app = typer.Typer(no_args_is_help=True, help="Pointwise scores, review samples and demo systems.")
testset_app = typer.Typer(no_args_is_help=True, help="Build, check and refresh test sets with category quotas.")
app.add_typer(evaluate_app, name="evaluate")
app.add_typer(testset_app, name="testset")

_EVAL_CONFIG = typer.Option(None, "--config", help="evaluation YAML (default: configs/evaluation.yaml)")
_GATE_CONFIG = typer.Option(None, "--gate-config", help="gate policy YAML for the local judge")
_JUDGE = typer.Option(None, "--judge", help="local or llm (default: the config's `judge`)")
_DEFAULT_SOURCE = Path(__file__).resolve().parent / "data" / "tydiqa_goldp_en_dev_200.jsonl"


def _config(path: Optional[Path]) -> EvaluationConfig:
    try:
        return load_evaluation_config(path)
    except ConfigError as exc:
        raise _fail(str(exc)) from None


def _judge_kind(config: EvaluationConfig, judge: Optional[str]) -> str:
    kind = judge or config.judge
    if kind not in ("local", "llm"):
        raise _fail(f"--judge must be local or llm, got {kind!r}")
    return kind


def _judges(kind: str, config: EvaluationConfig, gate_config: Optional[Path]) -> tuple[Any, Any]:
    """(pointwise judge, pairwise judge) of the chosen kind."""
    if kind == "llm":
        from .llm_judge import LLMPairwiseJudge, LLMPointwiseJudge, make_client

        try:
            client = make_client(config)
            return LLMPointwiseJudge.from_config(config, client), LLMPairwiseJudge.from_config(config, client)
        except (ConfigError, ValueError) as exc:
            raise _fail(str(exc)) from None
    from .local_judge import LocalPairwiseJudge, LocalPointwiseJudge

    pointwise = LocalPointwiseJudge(_build_gate(gate_config, None, None), config)
    return pointwise, LocalPairwiseJudge(pointwise, config)


def _read_good(path: Path) -> tuple[list[Case], list[CaseError]]:
    if not path.is_file():
        raise _fail(f"{path}: no such file")
    records = list(read_cases(path))
    return [r for r in records if isinstance(r, Case)], [r for r in records if isinstance(r, CaseError)]


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}" if value < 1e-3 else f"{value:.{digits}f}"


@app.command("compare")
def compare(
    run_a: Path = typer.Argument(..., help="JSONL of cases answered by system A (the baseline)"),
    run_b: Path = typer.Argument(..., help="JSONL of the same cases answered by system B (the candidate)"),
    output: Path = typer.Option(Path("out/eval/compare.json"), "--output", "-o", help="report JSON"),
    cases_out: Optional[Path] = typer.Option(None, help="per-case verdicts JSONL (default: next to the report)"),
    mode: Optional[str] = typer.Option(None, help="pairwise (every pair, both orders; default) or hybrid"),
    judge: Optional[str] = _JUDGE,
    config: Optional[Path] = _EVAL_CONFIG,
    gate_config: Optional[Path] = _GATE_CONFIG,
    fail_on_regression: bool = typer.Option(False, help="exit 1 when B is significantly worse than A (CI)"),
    scores_a: Optional[Path] = typer.Option(None, help="hybrid: reuse A's `evaluate pointwise` scores (same judge)"),
    scores_b: Optional[Path] = typer.Option(None, help="hybrid: reuse B's `evaluate pointwise` scores (same judge)"),
    cadence: Optional[str] = typer.Option(None, help="a job from the config's `cadence` (e.g. per_pr): its judge, "
                                                     "mode, max_cases and fail_on apply unless given here"),
) -> None:
    """Is B better than A? Win rate of B among decisive pairs, a one-sided binomial test, per category."""
    from .pairwise import hybrid_compare, join_runs, judge_both_orders, summarize

    for path in (run_a, run_b):
        if not path.is_file():
            raise _fail(f"{path}: no such file")
    eval_config = _config(config)
    max_cases = None
    if cadence is not None:
        job = eval_config.cadence.get(cadence)
        if job is None or job.command != "compare":
            jobs = [n for n, j in eval_config.cadence.items() if j.command == "compare"]
            raise _fail(f"--cadence {cadence!r} is not a compare job in the config; choose from {', '.join(jobs)}")
        judge, mode, max_cases = judge or job.judge, mode or job.mode, job.max_cases
        fail_on_regression = fail_on_regression or job.fail_on == "significant_regression"
    mode = mode or "pairwise"
    if mode not in ("pairwise", "hybrid"):
        raise _fail(f"--mode must be pairwise or hybrid, got {mode!r}")
    kind = _judge_kind(eval_config, judge)
    joined = join_runs(run_a, run_b)
    if not joined.pairs:
        raise _fail(f"no case id appears in both {run_a} and {run_b}")
    if max_cases is not None and len(joined.pairs) > max_cases:
        console.print(f"cadence {cadence}: judging the first {max_cases} of {len(joined.pairs)} pairs")
        joined.pairs = joined.pairs[:max_cases]
    pointwise, pairwise = _judges(kind, eval_config, gate_config)
    with console.status(f"judging {len(joined.pairs)} pairs ({mode}, {kind} judge)"):
        if mode == "hybrid":
            known = [_known_scores(path, pointwise.name) for path in (scores_a, scores_b)]
            hybrid = hybrid_compare(joined.pairs, pointwise, pairwise, eval_config, known_a=known[0], known_b=known[1])
            outcomes = hybrid.outcomes
            # Saved against full pairwise (2 calls per pair); pointwise calls are the price, unless reused.
            calls = {"pointwise": hybrid.pointwise_calls, "pairwise": hybrid.pairwise_calls,
                     "pairwise_saved": hybrid.pairwise_calls_saved,
                     "net_saved": 2 * len(joined.pairs) - hybrid.pointwise_calls - hybrid.pairwise_calls}
        else:
            if scores_a or scores_b:
                raise _fail("--scores-a/--scores-b are for --mode hybrid")
            outcomes = judge_both_orders(joined.pairs, pairwise)
            calls = {"pointwise": 0, "pairwise": 2 * len(joined.pairs), "pairwise_saved": 0, "net_saved": 0}
    report = summarize(outcomes, eval_config, judge=getattr(pairwise, "name", kind), mode=mode, calls=calls,
                       joined=joined)
    payload = {"run_a": str(run_a), "run_b": str(run_b), **report.to_dict()}
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    by_id = {a.id: (a, b) for a, b in joined.pairs}
    rows = [{**o.__dict__, "question": by_id[o.id][0].question, "answer_a": by_id[o.id][0].answer,
             "answer_b": by_id[o.id][1].answer} for o in outcomes]
    cases_path = cases_out or output.with_name(output.stem + ".cases.jsonl")
    _write_jsonl(cases_path, rows)
    _print_compare(report)
    console.print(f"wrote {output} and {cases_path}")
    if joined.errors or joined.duplicates:
        raise typer.Exit(code=1)
    if fail_on_regression and report.significant_regression:
        console.print("[bold red]B is significantly worse than A[/bold red]")
        raise typer.Exit(code=1)


def _known_scores(path: Optional[Path], judge: str) -> dict[str, Any] | None:
    from ...data_prep.io import DataError, read_jsonl
    from .pointwise import load_pointwise_rows

    if path is None:
        return None
    if not path.is_file():
        raise _fail(f"{path}: no such file")
    try:
        return load_pointwise_rows(list(read_jsonl(path)), judge=judge)
    except (DataError, ValueError, TypeError) as exc:
        raise _fail(f"{path}: {exc}") from None


def _print_compare(report: Any) -> None:
    table = Table(title=f"B vs A ({report.mode}, judge {report.judge})")
    for column in ("category", "pairs", "B wins", "A wins", "ties", "pos. inconsistent", "errors",
                   "B win rate", "p (B better)"):
        table.add_column(column, justify="right" if column != "category" else "left")
    for name, t in [*report.by_category.items(), ("ALL", report.total)]:
        style = "bold" if name == "ALL" else ""
        table.add_row(name, str(t.pairs), str(t.wins_b), str(t.wins_a), str(t.ties), str(t.position_inconsistent),
                      str(t.errors), _fmt(t.win_rate_b), _fmt(t.p_value), style=style)
    console.print(table)
    colour = "green" if report.significant else "red" if report.significant_regression else "yellow"
    console.print(f"[{colour}]{report.verdict}[/{colour}] (significant = p < {report.alpha} and win rate >= "
                  f"{report.min_win_rate}; p for A better {_fmt(report.p_value_a_better)})")
    console.print("judge calls: " + ", ".join(f"{k} {v}" for k, v in report.calls.items()))
    if report.only_in_a or report.only_in_b:
        console.print(f"[yellow]ids only in A: {len(report.only_in_a)}, only in B: {len(report.only_in_b)}[/yellow] "
                      f"(first: {(report.only_in_a + report.only_in_b)[:5]})")
    if report.judge_errors:
        console.print("[yellow]judge errors:[/yellow] " + ", ".join(f"{k} {v}" for k, v in report.judge_errors.items()))
    for line in report.bad_records:
        console.print(f"[red]bad record[/red] {line}")


@evaluate_app.command("pointwise")
def pointwise(
    run: Path = typer.Argument(..., help="JSONL of cases (the `validate` input format)"),
    output: Path = typer.Option(Path("out/eval/pointwise.jsonl"), "--output", "-o", help="per-case scores JSONL"),
    judge: Optional[str] = _JUDGE,
    config: Optional[Path] = _EVAL_CONFIG,
    gate_config: Optional[Path] = _GATE_CONFIG,
) -> None:
    """Score every answer 1-5 on correctness, helpfulness, clarity, safety and overall; summary JSON too."""
    from .pointwise import summarize_pointwise

    eval_config = _config(config)
    cases, errors = _read_good(run)
    judge_impl, _ = _judges(_judge_kind(eval_config, judge), eval_config, gate_config)
    with console.status(f"scoring {len(cases)} answers"):
        judged = judge_impl.judge(cases)
    rows, summary = summarize_pointwise(cases, judged, eval_config, judge=judge_impl.name)
    _write_jsonl(output, rows)
    summary.update({"run": str(run), "bad_records": [str(e) for e in errors]})
    summary_path = output.with_suffix(".summary.json")
    summary_path.write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    table = Table(title=f"pointwise scores ({summary['judge']}), {summary['scored']} of {summary['cases']} scored")
    for column in ("category", "n", "correctness", "helpfulness", "clarity", "safety", "overall", "composite"):
        table.add_column(column, justify="left" if column == "category" else "right")
    for name, means in [*summary["by_category"].items(), ("ALL", summary["means"])]:
        table.add_row(name, str(means["n"]), *(_fmt(means[k], 2) for k in
                      ("correctness", "helpfulness", "clarity", "safety", "overall", "composite")))
    console.print(table)
    if summary["errors"]:
        counts = ", ".join(f"{k} {v}" for k, v in summary["errors"].items())
        console.print(f"[yellow]invalid judge outputs:[/yellow] {counts}")
    for error in errors:
        console.print(f"[red]bad record[/red] {error}")
    console.print(f"wrote {output} and {summary_path}")
    if errors:
        raise typer.Exit(code=1)


@evaluate_app.command("sample-for-review")
def sample_for_review(
    judged: Path = typer.Argument(..., help="per-case JSONL from `evaluate pointwise` or `compare`"),
    output: Path = typer.Option(Path("out/eval/review.md"), "--output", "-o", help="Markdown checklist"),
    n: Optional[int] = typer.Option(None, "--n", min=1, help="cases to sample (default: review.sample_size)"),
    seed: Optional[int] = typer.Option(None, help="sampling seed (default: review.seed)"),
    config: Optional[Path] = _EVAL_CONFIG,
) -> None:
    """The sanity checklist: random judged cases with their rationales, for a person to read."""
    from ...data_prep.io import DataError
    from .review import write_review

    if not judged.is_file():
        raise _fail(f"{judged}: no such file")
    eval_config = _config(config)
    try:
        count = write_review(judged, output, n=n or eval_config.review.sample_size,
                             seed=eval_config.review.seed if seed is None else seed)
    except DataError as exc:
        raise _fail(str(exc)) from None
    console.print(f"wrote {count} cases to {output} (verdict sheet {output.with_suffix('.jsonl')})")


@evaluate_app.command("demo-systems")
def demo_systems(
    out_dir: Path = typer.Option(Path("out/eval/demo"), "--out", help="folder for system_a.jsonl / system_b.jsonl"),
    source: Path = typer.Option(_DEFAULT_SOURCE, help="SQuAD-format JSON (XQuAD, TyDi GoldP) or QA-record JSONL"),
    hallucinate: float = typer.Option(0.3, min=0.0, max=1.0, help="share of B's answers with an injected error"),
    out_of_scope: float = typer.Option(0.1, min=0.0, max=1.0, help="share of cases given another article's context"),
    seed: int = typer.Option(13),
    limit: Optional[int] = typer.Option(None, min=2, help="use only the first N usable questions"),
) -> None:
    """Two systems with a known winner: A grounded, B with injected hallucinations (proof of the judges)."""
    from .synthetic import build_systems, read_squad

    if not source.is_file():
        raise _fail(f"{source}: no such file")
    try:
        system_a, system_b = build_systems(read_squad(source), hallucinate=hallucinate, out_of_scope=out_of_scope,
                                           seed=seed, limit=limit)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    _write_jsonl(out_dir / "system_a.jsonl", [c.model_dump(mode="json") for c in system_a])
    _write_jsonl(out_dir / "system_b.jsonl", [c.model_dump(mode="json") for c in system_b])
    injected = sum(1 for c in system_b if c.meta.get("injected"))
    console.print(f"wrote {len(system_a)} cases per system to {out_dir} (system_a = grounded, "
                  f"system_b = {injected} injected hallucinations); source {source}")


def _quota_table(report: Any) -> None:
    table = Table(title=f"test set: {report.size} cases")
    for column in ("category", "count", "share", "quota", "ok"):
        table.add_column(column)
    for row in report.categories:
        mark = "[green]ok[/green]" if row.ok else "[red]off[/red]"
        table.add_row(row.category, str(row.count), f"{row.share:.3f}", f"{row.quota:.3f}", mark)
    console.print(table)


@testset_app.command("build")
def testset_build(
    pool: Path = typer.Argument(..., help="JSONL of candidate cases with meta.category"),
    output: Path = typer.Option(..., "--output", "-o", help="test set JSONL to write"),
    size: int = typer.Option(..., min=1, help="number of cases"),
    seed: Optional[int] = typer.Option(None, help="sampling seed (default: testset.seed)"),
    config: Optional[Path] = _EVAL_CONFIG,
) -> None:
    """Compose a test set meeting the category quotas exactly, by seeded sampling from POOL."""
    from .testsets import QuotaError, build_testset, check_testset

    eval_config = _config(config)
    cases, errors = _read_good(pool)
    try:
        chosen = build_testset(cases, size, eval_config.testset, seed=seed)
    except (QuotaError, ValueError) as exc:
        raise _fail(str(exc)) from None
    _write_jsonl(output, [c.model_dump(mode="json") for c in chosen])
    _quota_table(check_testset(chosen, eval_config.testset))
    skipped = f"; {len(errors)} bad pool record(s) skipped" if errors else ""
    console.print(f"wrote {len(chosen)} cases to {output}{skipped}")


@testset_app.command("check")
def testset_check(
    testset: Path = typer.Argument(..., help="test set JSONL"),
    config: Optional[Path] = _EVAL_CONFIG,
) -> None:
    """Check category shares against the quotas (within testset.tolerance); exit 1 when off."""
    from .testsets import check_testset

    eval_config = _config(config)
    cases, errors = _read_good(testset)
    report = check_testset(cases, eval_config.testset)
    _quota_table(report)
    for case_id in report.uncategorized[:10]:
        console.print(f"[red]no quota category[/red] {case_id}")
    for case_id in report.duplicate_ids[:10]:
        console.print(f"[red]duplicate id[/red] {case_id}")
    for error in errors:
        console.print(f"[red]bad record[/red] {error}")
    if not report.ok or errors:
        console.print(f"[red]the test set does not meet its quotas (tolerance {eval_config.testset.tolerance})[/red]")
        raise typer.Exit(code=1)
    console.print("[green]quotas met[/green]")


@testset_app.command("refresh")
def testset_refresh(
    testset: Path = typer.Argument(..., help="current test set JSONL"),
    pool: Path = typer.Option(..., help="JSONL of candidate cases; fresh = ids not in the test set"),
    output: Path = typer.Option(..., "--output", "-o", help="refreshed test set JSONL (may equal TESTSET)"),
    seed: Optional[int] = typer.Option(None, help="sampling seed (default: testset.seed)"),
    config: Optional[Path] = _EVAL_CONFIG,
) -> None:
    """Replace testset.refresh_share of each category with fresh pool cases; keep the rest."""
    from .testsets import QuotaError, check_testset, refresh_testset

    eval_config = _config(config)
    current, errors = _read_good(testset)
    candidates, _ = _read_good(pool)
    if errors:
        raise _fail(f"{testset}: {len(errors)} bad record(s), first: {errors[0]}")
    try:
        result = refresh_testset(current, candidates, eval_config.testset, seed=seed)
    except QuotaError as exc:
        raise _fail(str(exc)) from None
    _write_jsonl(output, [c.model_dump(mode="json") for c in result.cases])
    log = output.with_suffix(".refresh.json")
    log.write_text(json.dumps({"from": str(testset), "pool": str(pool), "share": eval_config.testset.refresh_share,
                               "removed": result.removed, "added": result.added}, indent=1) + "\n", encoding="utf-8")
    _quota_table(check_testset(result.cases, eval_config.testset))
    console.print(f"replaced {len(result.removed)} of {len(current)} cases; wrote {output} and {log}")
