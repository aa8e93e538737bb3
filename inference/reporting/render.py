"""Markdown and self-contained HTML from a `Report` and its figures.

HTML: inline CSS, images as base64 `data:` URIs, no script, nothing fetched. Every piece of text
from a benchmark (answers, questions, ids, commands) goes through `html.escape`. Numbers are
formatted by `fmt` only, so a test can look for the benchmark's values in the output.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from typing import Any, Sequence

from .schema import ErrorExample, Highlight, MetricRow, Report, ValidatorSection

MAX_EXTRA_COLUMNS = 8
# In this order; a scope not listed comes after them as "Per <scope>".
SCOPE_TITLES = {"task": "Per task / split", "validator": "Per validator", "summary": "Summary metrics",
                "label": "Per label", "language": "Per language", "source": "Per source"}
CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0 auto;max-width:1200px;padding:1.5rem;
color:#1d2330;background:#fafbfc;line-height:1.45}
h1{margin-bottom:.2rem}h2{border-bottom:2px solid #d8dee8;padding-bottom:.3rem;margin-top:2.5rem}
h3{margin-top:1.6rem;color:#34405a}
table{border-collapse:collapse;margin:.6rem 0;font-size:.85rem;background:#fff}
th,td{border:1px solid #d8dee8;padding:.25rem .5rem;text-align:right;vertical-align:top}
th{background:#eef2f7}td.l,th.l{text-align:left}
code{background:#eef2f7;padding:.1rem .3rem;border-radius:3px;font-size:.8rem;word-break:break-all}
.badge{display:inline-block;padding:.1rem .5rem;border-radius:9px;font-size:.8rem;color:#fff}
.benchmarked{background:#3c8d5a}.not-benchmarked{background:#9a9a9a}.unreadable{background:#b5443b}
.figures{display:flex;flex-wrap:wrap;gap:.8rem}.figures figure{margin:0;background:#fff;border:1px solid #d8dee8;
padding:.4rem}.figures figcaption{font-size:.75rem;color:#5a6478;max-width:460px}
.example{background:#fff;border:1px solid #d8dee8;border-left:4px solid #b5443b;padding:.5rem .8rem;margin:.6rem 0}
.example .meta{font-size:.78rem;color:#5a6478}.example .text{white-space:pre-wrap;margin:.3rem 0}
mark{padding:0 .1rem;border-radius:2px}mark.gold{background:#ffd7d2;border-bottom:2px solid #c0392b}
mark.predicted{background:#fff3b0}mark.noise{background:#e4e7ec}mark.gold.predicted{background:#ffb48a}
.legend mark{margin-right:.6rem}.notes{font-size:.85rem;color:#34405a}
"""


@dataclass(frozen=True)
class Figure:
    section: str
    kind: str  # pr, confusion, calibration, latency
    title: str
    png: bytes
    file: str  # relative path of the PNG written next to report.md


def fmt(value: Any) -> str:
    """The one number format of the report: 4 decimals for floats, plain ints, '–' for none."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _extra(row: MetricRow) -> str:
    return ", ".join(f"{k} {fmt(v)}" for k, v in row.extra.items())


def _metric_table(rows: Sequence[MetricRow]) -> tuple[list[str], list[list[str]]]:
    """Headers and cells: the extra numbers get their own columns when there are few kinds of them."""
    keys = list(dict.fromkeys(k for r in rows for k in r.extra))
    headers = ["group", "precision", "recall", "F1", "support"]
    cells = [[r.group, fmt(r.precision), fmt(r.recall), fmt(r.f1), fmt(r.support)] for r in rows]
    if all(r.precision is r.recall is r.f1 is r.support is None for r in rows):
        headers, cells = headers[:1], [c[:1] for c in cells]  # summaries: only their own numbers
    if len(keys) <= MAX_EXTRA_COLUMNS:
        return headers + [k.replace("_", " ") for k in keys], [c + [fmt(r.extra.get(k)) for k in keys]
                                                               for c, r in zip(cells, rows)]
    return headers + ["other"], [c + [_extra(r)] for c, r in zip(cells, rows)]


def _scopes(rows: Sequence[MetricRow]) -> list[tuple[str, list[MetricRow]]]:
    present = set(r.scope for r in rows)
    order = [s for s in SCOPE_TITLES if s in present] + sorted(present - set(SCOPE_TITLES))
    return [(SCOPE_TITLES.get(scope, f"Per {scope}"), [r for r in rows if r.scope == scope]) for scope in order]


def highlighted_html(text: str, marks: Sequence[Highlight]) -> str:
    """`text` escaped, with each highlight (possibly overlapping) wrapped in <mark class=...>."""
    cuts = sorted({0, len(text), *(m.start for m in marks), *(m.end for m in marks)})
    out = []
    for start, end in zip(cuts, cuts[1:]):
        piece = html.escape(text[start:end])
        covering = [m.label for m in marks if m.start <= start and end <= m.end]
        if covering:
            classes = sorted({"noise" if "NOISE" in label else label.split()[0] for label in covering})
            out.append(f'<mark class="{" ".join(classes)}" title="{html.escape("; ".join(covering))}">{piece}</mark>')
        else:
            out.append(piece)
    return "".join(out)


def highlighted_md(text: str, marks: Sequence[Highlight]) -> str:
    spans = sorted({(m.start, m.end) for m in marks})
    out, cursor = [], 0
    for start, end in spans:
        if start < cursor:
            continue  # overlapping marks: the first one is shown
        out.append(text[cursor:start] + "**⟦" + text[start:end] + "⟧**")
        cursor = end
    return _md_cell("".join(out) + text[cursor:])


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# ------------------------------------------------------------------------------------------------ HTML


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[str]], left: int = 1) -> str:
    head = "".join(f'<th class="l">{h}</th>' if i < left else f"<th>{h}</th>" for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(f'<td class="l">{c}</td>' if i < left else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _html_example(example: ErrorExample) -> str:
    e = html.escape
    parts = [f'<div class="example"><div class="meta"><b>{e(example.error)}</b> · {e(example.group)} · id '
             f'<code>{e(example.id)}</code> · score {fmt(example.score)} · gold {e(example.gold)}'
             + (f" · {e(example.language)}" if example.language else "") + "</div>"]
    if example.question:
        parts.append(f'<div class="text"><b>Q:</b> {e(example.question)}</div>')
    parts.append(f'<div class="text"><b>A:</b> {highlighted_html(example.text, example.highlights)}</div>')
    if example.context:
        parts.append(f'<details><summary>context</summary><div class="text">{e(example.context)}</div></details>')
    return "".join(parts) + "</div>"


def _html_section(section: ValidatorSection, figures: Sequence[Figure]) -> str:
    e, p = html.escape, section.provenance
    status = section.status.replace(" ", "-")
    out = [f'<h2 id="{e(section.name)}">{e(section.name)} <span class="badge {status}">{e(section.status)}</span></h2>']
    if section.message:
        out.append(f"<p>{e(section.message)}</p>")
    recorded = "" if p.command_recorded else " (default command: the benchmark JSON does not record its own)"
    rows = [["command", f"<code>{e(p.command)}</code>{e(recorded)}"]]
    if p.benchmark_file:
        rows.append(["benchmark JSON",
                     f"<code>{e(p.benchmark_file)}</code> sha256 <code>{e(p.benchmark_sha256)}</code>"])
    if p.model_sha256 or p.model_version:
        rows.append(["model", f"sha256 <code>{e(p.model_sha256)}</code> version <code>{e(p.model_version)}</code>"])
    rows += [[f"data {e(name)}", f"sha256 <code>{e(sha)}</code>"] for name, sha in p.data.items()]
    out.append(_html_table(["provenance", ""], rows, left=2))
    for title, scope_rows in _scopes(section.metrics):
        out.append(f"<h3>{e(title)}</h3>")
        headers, cells = _metric_table(scope_rows)
        # The row name carries its JSON path as a tooltip: where the numbers came from.
        out.append(_html_table([e(h) for h in headers],
                               [[f'<span title="{e(r.source_key)}">{e(c[0])}</span>', *(e(x) for x in c[1:])]
                                for r, c in zip(scope_rows, cells)]))
    if figures:
        out.append("<h3>Figures</h3><div class=\"figures\">")
        for figure in figures:
            data = base64.b64encode(figure.png).decode("ascii")
            out.append(f'<figure><img alt="{e(figure.title)}" src="data:image/png;base64,{data}">'
                       f"<figcaption>{e(figure.title)}</figcaption></figure>")
        out.append("</div>")
    if section.latency:
        out.append("<h3>Latency</h3>")
        out.append(_html_table(["runtime", "setting", "p50 ms", "p95 ms"],
                               [[e(r.runtime), e(r.setting), fmt(r.p50_ms), fmt(r.p95_ms)] for r in section.latency],
                               left=2))
    if section.errors:
        out.append("<h3>Worst errors</h3>")
        if any(x.highlights for x in section.errors):
            out.append('<p class="legend"><mark class="gold">gold hallucination</mark><mark class="predicted">'
                       'predicted</mark><mark class="gold predicted">both</mark><mark class="noise">noise</mark></p>')
        out += [_html_example(x) for x in section.errors]
    if section.notes:
        out.append('<ul class="notes">' + "".join(f"<li>{e(n)}</li>" for n in section.notes) + "</ul>")
    return "\n".join(out)


def short_sha(text: str) -> str:
    """12 hex digits of a sha256; each model's of a "name=sha; name=sha" list."""
    if "=" in text:
        return "; ".join(f"{n}={v[:12]}" for n, _, v in (part.strip().partition("=") for part in text.split(";")))
    return text[:12]


def _headline(section: ValidatorSection) -> str:
    row = next((r for r in section.metrics if r.f1 is not None), None)
    return f"F1 {fmt(row.f1)} ({row.group})" if row else "–"


def render_html(report: Report, figures: Sequence[Figure]) -> str:
    e = html.escape
    summary = [[f'<a href="#{e(s.name)}">{e(s.name)}</a>', e(s.status), e(_headline(s)),
                f"<code>{e(short_sha(s.provenance.model_sha256))}</code>", f"<code>{e(s.provenance.command)}</code>"]
               for s in report.sections]
    body = [f"<h1>autovalidators report: {e(report.name)}</h1>",
            f"<p>built {e(report.created_utc)} by <code>{e(report.command)}</code></p>",
            _html_table(["validator", "status", "headline", "model sha256", "command"], summary, left=5)]
    for section in report.sections:
        body.append(_html_section(section, [f for f in figures if f.section == section.name]))
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>autovalidators report: {e(report.name)}</title><style>{CSS}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")


# -------------------------------------------------------------------------------------------- Markdown


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers),
            *("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows), ""]


def render_markdown(report: Report, figures: Sequence[Figure]) -> str:
    lines = [f"# autovalidators report: {report.name}", "", f"built {report.created_utc} by `{report.command}`", ""]
    lines += _md_table(["validator", "status", "headline", "model sha256", "command"],
                       [[s.name, s.status, _headline(s), f"`{short_sha(s.provenance.model_sha256)}`",
                         f"`{s.provenance.command}`"] for s in report.sections])
    for section in report.sections:
        p = section.provenance
        lines += [f"## {section.name} ({section.status})", ""]
        if section.message:
            lines += [section.message, ""]
        lines += [f"- command: `{p.command}`" + ("" if p.command_recorded else " (default command)")]
        if p.benchmark_file:
            lines.append(f"- benchmark JSON: `{p.benchmark_file}` sha256 `{p.benchmark_sha256}`")
        if p.model_sha256:
            lines.append(f"- model sha256: `{p.model_sha256}` version `{p.model_version}`")
        lines += [f"- data {name}: sha256 `{sha}`" for name, sha in p.data.items()] + [""]
        for title, rows in _scopes(section.metrics):
            lines += [f"### {title}", ""]
            lines += _md_table(*_metric_table(rows))
        for figure in (f for f in figures if f.section == section.name):
            lines += [f"![{figure.title}]({figure.file})", ""]
        if section.latency:
            lines += ["### Latency", ""]
            lines += _md_table(["runtime", "setting", "p50 ms", "p95 ms"],
                               [[r.runtime, r.setting, fmt(r.p50_ms), fmt(r.p95_ms)] for r in section.latency])
        if section.errors:
            lines += ["### Worst errors (⟦highlighted⟧: gold or predicted spans)", ""]
            for x in section.errors:
                lines += [f"- **{x.error}** ({x.group}, id `{x.id}`, score {fmt(x.score)}, gold {x.gold})"]
                if x.question:
                    lines.append(f"  - Q: {_md_cell(x.question)}")
                lines.append(f"  - A: {highlighted_md(x.text, x.highlights)}")
            lines.append("")
        lines += [f"> {note}" for note in section.notes] + [""]
    return "\n".join(lines)
