"""The HTML report opened in headless Chromium: every <img> decodes (naturalWidth > 0), offline.

Chromium is Debian's `chromium` package (`.ci/run` installs it). Outside CI a machine without it
skips this test with the install command; in CI (`CI=true`) its absence is a failure, so the
check cannot silently stop running.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from autovalidators.inference.reporting.build import build_report, draw_figures, write_report
from autovalidators.inference.validators import DEFAULT_MODELS_DIR

pytest.importorskip("matplotlib", reason="the report's plots need matplotlib (the train extra)")

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
# Appended to a copy of the report (the report itself has no script): after `load`, writes the
# natural width of every image into a marker element that --dump-dom prints.
PROBE = """<script>window.addEventListener('load', () => {
  const widths = Array.from(document.images, (img) => img.complete ? img.naturalWidth : -1);
  const marker = document.createElement('pre');
  marker.id = 'image-probe';
  marker.textContent = 'IMAGES ' + widths.length + ' ' + widths.join(',');
  document.body.appendChild(marker);
});</script>"""


def chromium() -> str:
    found = shutil.which("chromium") or (os.path.exists("/usr/bin/chromium") and "/usr/bin/chromium")
    if found:
        return found
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("chromium is missing in CI; .ci/run installs it with `apt-get install -y chromium`")
    pytest.skip("chromium not installed: `apt-get install -y chromium` (Debian) to run the browser check")


def run_chromium(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def assert_every_image_loads(binary: str, html_path: Path, tmp_path: Path, at_least: int) -> None:
    html = html_path.read_text(encoding="utf-8")
    expected = len(re.findall(r"<img ", html))
    assert expected >= at_least
    probed = tmp_path / "probed.html"
    probed.write_text(html.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    # The page is opened from a folder without the img/ files, so only the data: URIs can load.
    done = run_chromium(binary, tmp_path / "profile", "--virtual-time-budget=10000", "--dump-dom", probed.as_uri())
    match = re.search(r"IMAGES (\d+) ([-\d,]*)", done.stdout)
    assert match, f"no probe output; chromium exit {done.returncode}: {done.stderr[-2000:]}"
    widths = [int(w) for w in match.group(2).split(",") if w]
    assert int(match.group(1)) == expected == len(widths)
    assert all(w > 0 for w in widths), f"images that did not load: {widths}"
    # And it renders: a screenshot of the page is a non-trivial PNG.
    shot = tmp_path / "report.png"
    run_chromium(binary, tmp_path / "profile2", "--window-size=1280,2400", "--hide-scrollbars",
                 f"--screenshot={shot}", html_path.as_uri())
    assert shot.is_file() and shot.stat().st_size > 20_000


@pytest.mark.slow
def test_every_image_in_the_html_report_loads_in_chromium(benchmarks, report_config, tmp_path):
    binary = chromium()
    report = build_report(report_config, benchmarks, "browser", "autovalidators report (test)")
    paths = write_report(report, draw_figures(report, report_config), tmp_path / "report")
    assert_every_image_loads(binary, paths["html"], tmp_path, at_least=10)


@pytest.mark.slow
def test_fresh_clone_report_shows_the_shipped_numbers_in_chromium(report_config, tmp_path):
    """No out/benchmarks and no prepared data: the shipped models' own benchmark.json fill the page."""
    binary = chromium()
    config = report_config.model_copy(update={"models_dir": str(DEFAULT_MODELS_DIR)})
    report = build_report(config, tmp_path / "no-benchmarks", "fresh", "autovalidators report")
    shipped = [n for n in ("fact_spans", "qa_relevance", "tone") if (DEFAULT_MODELS_DIR / n / "manifest.json").is_file()]
    assert shipped and {s.name for s in report.sections if s.status == "benchmarked"} == set(shipped)
    paths = write_report(report, draw_figures(report, config), tmp_path / "report")
    html = paths["html"].read_text(encoding="utf-8")
    for name in shipped:
        assert f"{DEFAULT_MODELS_DIR / name / 'benchmark.json'}" in html
    assert_every_image_loads(binary, paths["html"], tmp_path, at_least=4 * len(shipped))
