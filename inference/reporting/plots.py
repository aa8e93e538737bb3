"""The report's figures as PNG bytes (matplotlib, Agg backend: no display, no network).

matplotlib comes with the `train` extra; `require_matplotlib` says so when it is missing.
Curves are computed here from a `ScoredSet`'s per-example scores with NumPy only.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .schema import Confusion, LatencyRow, ScoredSet

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

RUNTIME_COLOURS = {"torch_eager": "#c0504d", "onnx_fp32": "#4f81bd", "onnx_int8": "#9bbb59", "onnx": "#8064a2",
                   "gate": "#f79646"}


def require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError("the report's plots need matplotlib: pip install 'autovalidators[train]' "
                          "(or pip install matplotlib)") from None


def _figure(width: float = 4.6, height: float = 3.4) -> "Figure":
    from matplotlib.figure import Figure

    # A bare Figure (no pyplot) keeps no global state, so building reports in threads is safe.
    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def _png(figure: "Figure") -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def pr_points(scores: Sequence[float], labels: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(precision, recall, threshold) at every distinct score, from the highest cut down."""
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=int)
    order = np.argsort(-s, kind="stable")
    s, y = s[order], y[order]
    last_of_each = np.r_[np.flatnonzero(np.diff(s)), len(s) - 1]  # a cut keeps every tie together
    tp = np.cumsum(y)[last_of_each]
    fp = (last_of_each + 1) - tp
    positives = max(int(y.sum()), 1)
    return tp / np.maximum(tp + fp, 1), tp / positives, s[last_of_each]


def operating_point(scored: ScoredSet) -> tuple[float, float] | None:
    """(precision, recall) at the set's threshold, or None without a threshold or positives."""
    if scored.threshold is None or not any(scored.labels):
        return None
    s, y = np.asarray(scored.scores), np.asarray(scored.labels)
    predicted = s >= scored.threshold
    tp = int((predicted & (y == 1)).sum())
    return (tp / int(predicted.sum()) if predicted.any() else 1.0), tp / int(y.sum())


def pr_curve(scored: ScoredSet) -> bytes:
    figure = _figure()
    axes = figure.add_subplot()
    if any(scored.labels) and not all(scored.labels):
        precision, recall, _ = pr_points(scored.scores, scored.labels)
        axes.plot(np.r_[0.0, recall], np.r_[precision[0], precision], drawstyle="steps-post", color="#4f81bd")
        base = sum(scored.labels) / len(scored.labels)
        axes.axhline(base, color="#999999", linestyle=":", linewidth=1, label=f"base rate {base:.2f}")
        point = operating_point(scored)
        if point:
            axes.plot(point[1], point[0], "o", color="#c0504d", markersize=8,
                      label=f"threshold {scored.threshold:.3f}: P {point[0]:.3f} R {point[1]:.3f}")
        axes.legend(loc="lower left", fontsize=7)
    else:
        axes.text(0.5, 0.5, "one class only: no curve", ha="center", va="center")
    axes.set(xlabel="recall", ylabel="precision", xlim=(0, 1.01), ylim=(0, 1.02), title=scored.name)
    axes.title.set_fontsize(9)
    axes.grid(alpha=0.3)
    return _png(figure)


def reliability(scored: ScoredSet, bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean score, share of positives, count) per equal-width score bin that holds examples."""
    s, y = np.asarray(scored.scores, dtype=float), np.asarray(scored.labels, dtype=float)
    index = np.clip((s * bins).astype(int), 0, bins - 1)
    counts = np.bincount(index, minlength=bins)
    used = counts > 0
    mean_score = np.bincount(index, weights=s, minlength=bins)[used] / counts[used]
    positive_share = np.bincount(index, weights=y, minlength=bins)[used] / counts[used]
    return mean_score, positive_share, counts[used]


def expected_calibration_error(scored: ScoredSet, bins: int) -> float:
    mean_score, positive_share, counts = reliability(scored, bins)
    return float(np.sum(counts * np.abs(mean_score - positive_share)) / max(int(counts.sum()), 1))


def calibration_plot(sets: Sequence[ScoredSet], bins: int) -> bytes:
    figure = _figure(5.2, 3.8)
    axes = figure.add_subplot()
    axes.plot([0, 1], [0, 1], color="#999999", linestyle=":", linewidth=1, label="perfect")
    for scored in sets[:8]:  # more lines than this is unreadable; the JSON keeps them all
        mean_score, positive_share, _ = reliability(scored, bins)
        ece = expected_calibration_error(scored, bins)
        axes.plot(mean_score, positive_share, "o-", markersize=3, label=f"{scored.name} (ECE {ece:.3f})")
    axes.set(xlabel="mean predicted score", ylabel="share of positives", xlim=(0, 1), ylim=(0, 1),
             title=f"reliability ({bins} bins)")
    axes.legend(fontsize=6, loc="upper left")
    axes.grid(alpha=0.3)
    return _png(figure)


def confusion_plot(confusion: Confusion) -> bytes:
    figure = _figure(3.4, 3.0)
    axes = figure.add_subplot()
    matrix = np.asarray(confusion.matrix)
    axes.imshow(matrix, cmap="Blues")
    for (row, column), value in np.ndenumerate(matrix):
        axes.text(column, row, str(value), ha="center", va="center",
                  color="white" if value > matrix.max() / 2 else "black", fontsize=11)
    negative, positive = confusion.labels
    axes.set_xticks([0, 1], [f"pred {negative}", f"pred {positive}"], fontsize=7)
    axes.set_yticks([0, 1], [f"gold {negative}", f"gold {positive}"], fontsize=7)
    cut = "" if confusion.threshold is None else f" @ {confusion.threshold:.3f}"
    axes.set_title(f"{confusion.name}{cut}", fontsize=8)
    return _png(figure)


def latency_plot(rows: Sequence[LatencyRow]) -> bytes:
    """Grouped bars: one group per setting, one bar per runtime (p50), whiskers up to p95."""
    settings = list(dict.fromkeys(r.setting for r in rows))
    runtimes = list(dict.fromkeys(r.runtime for r in rows))
    figure = _figure(max(4.6, 1.6 * len(settings) + 2), 3.4)
    axes = figure.add_subplot()
    width = 0.8 / max(len(runtimes), 1)
    for k, runtime in enumerate(runtimes):
        xs, p50, whisker = [], [], []
        for i, setting in enumerate(settings):
            row = next((r for r in rows if r.runtime == runtime and r.setting == setting), None)
            if row is None or row.p50_ms is None:
                continue
            xs.append(i + (k - (len(runtimes) - 1) / 2) * width)
            p50.append(row.p50_ms)
            whisker.append(max((row.p95_ms or row.p50_ms) - row.p50_ms, 0.0))
        bars = axes.bar(xs, p50, width, yerr=[np.zeros(len(whisker)), whisker], capsize=3, label=runtime,
                        color=RUNTIME_COLOURS.get(runtime, "#7f7f7f"))
        axes.bar_label(bars, fmt="%.1f", fontsize=6)
    axes.set_xticks(range(len(settings)), settings, fontsize=7)
    axes.set(ylabel="ms per call (p50; whisker to p95)", title="latency")
    axes.legend(fontsize=7)
    axes.grid(axis="y", alpha=0.3)
    return _png(figure)


def preference_plot(rows: Sequence[tuple[str, float, float, float]]) -> bytes:
    """Stacked horizontal bars per validator: share siding with the context / no preference / the world."""
    figure = _figure(5.2, 0.5 * len(rows) + 1.4)
    axes = figure.add_subplot()
    names = [r[0] for r in rows]
    left = np.zeros(len(rows))
    for column, label, colour in ((1, "sides with context", "#3c8d5a"), (2, "no preference", "#c9ced6"),
                                  (3, "sides with world", "#c0504d")):
        values = np.asarray([r[column] for r in rows])
        axes.barh(names, values, left=left, color=colour, label=label)
        left += values
    axes.set(xlim=(0, 1), xlabel="share of pairs", title="obedience: who follows the context")
    axes.invert_yaxis()
    axes.legend(fontsize=7, loc="lower right")
    return _png(figure)
