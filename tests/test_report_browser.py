"""The report in a real browser: headless Chromium loads report.html and every figure decodes.

Not in the default run (`-m browser`; `scripts/test-browser` installs Chromium if needed and runs it).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from test_bench import synthetic_report
from xtat.report import write_report

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Added to a copy of the page only (the report itself has no script): after the load event,
# each image's decoded size goes into the DOM, which --dump-dom then prints.
PROBE = """<script>
window.addEventListener("load", () => {
  for (const img of document.images) {
    img.setAttribute("data-loaded", img.complete ? "yes" : "no");
    img.setAttribute("data-natural", img.naturalWidth + "x" + img.naturalHeight);
  }
  document.body.setAttribute("data-probed", String(document.images.length));
});
</script>"""


def _chromium() -> str:
    found = shutil.which("chromium") or (CHROMIUM if Path(CHROMIUM).exists() else None)
    if found is None:
        pytest.fail("Chromium is not installed: run scripts/test-browser (it installs the Debian package with "
                    "`apt-get install -y chromium`), or install it yourself")
    return found


@pytest.mark.browser
def test_every_figure_of_the_report_loads_in_headless_chromium(tmp_path):
    chromium = _chromium()
    report = synthetic_report()
    files = write_report(report, tmp_path / "report")
    page = files.html.read_text()
    assert "<script" not in page
    probed = tmp_path / "probed.html"
    probed.write_text(page.replace("</body>", PROBE + "</body>"))

    result = subprocess.run([chromium, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                             "--virtual-time-budget=10000", "--dump-dom", probed.as_uri()],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    assert f'data-probed="{len(report.figures)}"' in dom, dom[:2000]
    images = re.findall(r"<img [^>]*>", dom)
    assert len(images) == len(report.figures) == 4
    for tag in images:
        assert 'data-loaded="yes"' in tag
        width, height = map(int, re.search(r'data-natural="(\d+)x(\d+)"', tag).groups())
        assert width > 100 and height > 100, tag[:200]

    shot = tmp_path / "page.png"
    result = subprocess.run([chromium, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                             f"--screenshot={shot}", "--window-size=1200,3000", files.html.as_uri()],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", result.stderr[-2000:]
