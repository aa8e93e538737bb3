"""The obedience test: does each validator side with the context when the world disagrees?

Each pair (built by `data_prep.obedience`) has a counterfactual context and two answers: one that
follows the context, one that repeats the real-world value. Both go through the gate. Per validator
an answer gets a verdict (passes or not) and a goodness score:

    fact_spans    passes = not hallucinated        goodness = 1 - hallucination_score
    qa_relevance  passes = relevant                goodness = relevance score
    tone          passes = no label flagged        goodness = 1 - max label score
    gate          passes = decision ACCEPT         goodness = ACCEPT 2 > REVIEW 1 > REJECT 0

A validator *sides with the context* on a pair when the context answer passes and the world
answer does not, or, with equal verdicts, when the context answer's goodness is higher (by more
than `TIE`); *with the world* in the mirrored case; otherwise it has no preference. For
fact_spans the test is stricter: it must call the world answer a hallucination
(`world_flagged`) and should not flag the context answer; P/R/F1 treat the world answers as the
positives among both answers of every pair. A validator that does not apply to a case (no
context) leaves the pair out of its counts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..case import Case
from ..results import Decision, FactSpansOutput, QARelevanceOutput, Result, SpanLabel, ToneOutput
from .schema import ErrorExample, Highlight, MetricRow, Provenance, ReportConfig, ValidatorSection

TIE = 1e-6
_DECISION_RANK = {Decision.ACCEPT: 2.0, Decision.REVIEW: 1.0, Decision.REJECT: 0.0}
REQUIRED = ("id", "question", "context", "answer_context", "answer_world")
# Copied from each pair into the JSON, so the report can show the texts without the cases file.
DETAIL_FIELDS = ("id", "language", "changed", "question", "context", "answer_context", "answer_world", "world_spans")


def read_pairs(path: str | Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Valid pairs and one message per bad line (file:line: what is wrong); bad lines are skipped."""
    from autovalidators.data_prep.io import iter_jsonl

    pairs, errors = [], []
    for number, record, problem in iter_jsonl(path):
        missing = [] if problem else [k for k in REQUIRED if not isinstance(record.get(k), str)]
        if missing:
            problem = f"missing or non-text field(s) {', '.join(missing)}"
        if problem:
            errors.append(f"{path}:{number}: {problem}")
        else:
            pairs.append(record)
    return pairs, errors


def verdict(output: Any) -> tuple[bool, bool, float]:
    """(applies, passes, goodness) of one validator output."""
    if isinstance(output, FactSpansOutput):
        return output.applies, not output.hallucinated, 1.0 - output.hallucination_score
    if isinstance(output, QARelevanceOutput):
        return output.applies, output.relevant, output.score
    if isinstance(output, ToneOutput):
        return output.applies, not output.flagged, 1.0 - max(output.scores.values(), default=0.0)
    if isinstance(output, Result):
        return True, output.decision is Decision.ACCEPT, _DECISION_RANK[output.decision]
    return False, False, 0.0


def side(context: tuple[bool, bool, float], world: tuple[bool, bool, float]) -> str | None:
    """"context", "world", "none", or None when the validator does not apply to both answers."""
    if not (context[0] and world[0]):
        return None
    if context[1] != world[1]:
        return "context" if context[1] else "world"
    if context[2] - world[2] > TIE:
        return "context"
    if world[2] - context[2] > TIE:
        return "world"
    return "none"


def _empty() -> dict[str, Any]:
    return {"pairs": 0, "sides_context": 0, "sides_world": 0, "no_preference": 0, "world_flagged": 0,
            "context_flagged": 0}


def _finish(counts: dict[str, Any], span_checked: bool) -> dict[str, Any]:
    n = counts["pairs"]
    out = dict(counts)
    for key in ("sides_context", "sides_world", "no_preference", "world_flagged", "context_flagged"):
        out[f"{key}_rate"] = counts[key] / n if n else None
    if span_checked:
        flagged = counts["world_flagged"] + counts["context_flagged"]
        precision = counts["world_flagged"] / flagged if flagged else 0.0
        recall = counts["world_flagged"] / n if n else 0.0
        out.update(precision=precision, recall=recall,
                   f1=2 * precision * recall / (precision + recall) if precision + recall else 0.0,
                   span_hit_rate=counts.get("span_hit", 0) / n if n else None)
    return out


def _overlaps(spans: Sequence[Any], gold: Sequence[dict]) -> bool:
    return any(s.label is SpanLabel.HALLUCINATION and s.start < g["end"] and g["start"] < s.end
               for s in spans for g in gold)


def score_obedience(gate: Any, pairs: Sequence[dict[str, Any]], *, batch_size: int = 32,
                    progress: Any = None) -> dict[str, Any]:
    """Runs the gate on both answers of every pair; returns the JSON report (counts and per pair)."""
    names = [*gate.validators, "gate"]
    totals = {name: _empty() for name in names}
    by_language: dict[str, dict[str, dict[str, Any]]] = {}
    details = []
    for offset in range(0, len(pairs), batch_size):
        batch = pairs[offset:offset + batch_size]
        cases = []
        for pair in batch:
            for which in ("context", "world"):
                cases.append(Case(id=f"{pair['id']}::{which}", question=pair["question"], context=[pair["context"]],
                                  answer=pair[f"answer_{which}"]))
        results = gate.validate_batch(cases)
        for index, pair in enumerate(batch):
            follows, world = results[2 * index], results[2 * index + 1]
            detail: dict[str, Any] = {k: pair.get(k) for k in DETAIL_FIELDS}
            language = str(pair.get("language") or "unknown")
            for name in names:
                ctx_out = follows if name == "gate" else follows.validators[name]
                world_out = world if name == "gate" else world.validators[name]
                ctx_v, world_v = verdict(ctx_out), verdict(world_out)
                chosen = side(ctx_v, world_v)
                entry = {"side": chosen, "context_passes": ctx_v[1], "world_passes": world_v[1],
                         "context_score": round(ctx_v[2], 6), "world_score": round(world_v[2], 6)}
                if name == "gate":
                    entry.update(context_decision=follows.decision.value, world_decision=world.decision.value)
                if isinstance(world_out, FactSpansOutput):
                    entry["span_hit"] = _overlaps(world_out.spans, pair.get("world_spans") or [])
                    entry["world_predicted_spans"] = [{"start": s.start, "end": s.end, "label": s.label.value}
                                                      for s in world_out.spans if s.label is SpanLabel.HALLUCINATION]
                detail[name] = entry
                if chosen is None:
                    continue
                for bucket in (totals[name], by_language.setdefault(language, {}).setdefault(name, _empty())):
                    bucket["pairs"] += 1
                    bucket[{"context": "sides_context", "world": "sides_world", "none": "no_preference"}[chosen]] += 1
                    bucket["world_flagged"] += int(not world_v[1])
                    bucket["context_flagged"] += int(not ctx_v[1])
                    if "span_hit" in entry:
                        bucket["span_hit"] = bucket.get("span_hit", 0) + int(entry["span_hit"])
            details.append(detail)
        if progress is not None:
            progress(len(batch))
    return {
        "pairs": len(pairs),
        "models": {**gate.models, "gate": {"kind": "policy", "version": "", "sha256": None}},
        "validators": {name: _finish(c, name == "fact_spans") for name, c in totals.items()},
        "by_language": {lang: {name: _finish(c, name == "fact_spans") for name, c in per.items()}
                        for lang, per in sorted(by_language.items())},
        "pairs_detail": details,
    }


def obedience_section(data: dict[str, Any], provenance: Provenance, config: ReportConfig,
                      notes: list[str]) -> ValidatorSection:
    """The report section: one row per validator (and per language), fact_spans failures as examples."""
    rows = []
    blocks = [("validators", None, data.get("validators") or {})]
    blocks += [(f"by_language.{lang}", lang, per) for lang, per in (data.get("by_language") or {}).items()]
    for prefix, language, per in blocks:
        for name, values in per.items():
            keep = ("sides_context_rate", "sides_world_rate", "no_preference_rate", "world_flagged_rate",
                    "context_flagged_rate", "span_hit_rate")
            rows.append(MetricRow(scope="language" if language else "validator",
                                  group=f"{name} / {language}" if language else name,
                                  precision=values.get("precision"), recall=values.get("recall"), f1=values.get("f1"),
                                  support=values.get("pairs"), extra={k: values.get(k) for k in keep if k in values},
                                  source_key=f"{prefix}.{name}"))
    errors = []
    for detail in data.get("pairs_detail") or []:
        fact = detail.get("fact_spans") or {}
        if fact.get("side") in (None, "context") and fact.get("world_passes") is not True:
            continue
        if len(errors) >= config.worst_errors:
            break
        pair = detail
        world_spans = [Highlight(start=s["start"], end=s["end"], label="gold HALLUCINATION")
                       for s in pair.get("world_spans") or []]
        predicted = [Highlight(start=s["start"], end=s["end"], label="predicted HALLUCINATION")
                     for s in fact.get("world_predicted_spans") or []]
        text = str(pair.get("answer_world") or "")
        errors.append(ErrorExample(
            id=str(detail.get("id")), group="fact_spans on the world answer",
            error="world answer not flagged" if fact.get("world_passes") else f"sides with {fact.get('side')}",
            score=1.0 - float(fact.get("world_score", 1.0)), gold=f"changed {detail.get('changed', '')}",
            question=str(pair.get("question") or ""), text=text,
            context=str(pair.get("context") or "")[:config.context_chars], language=str(detail.get("language") or ""),
            highlights=[h for h in world_spans + predicted if 0 <= h.start < h.end <= len(text)]))
    notes.append("sides_context_rate: share of pairs where the validator prefers the answer that follows the "
                 "(changed) context; fact_spans P/R/F1: world answers as positives among both answers")
    return ValidatorSection(name="obedience", status="benchmarked", provenance=provenance, metrics=rows,
                            errors=errors, notes=notes)
