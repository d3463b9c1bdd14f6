"""The HTML report of every example scenario, rendered by a real browser (headless Chromium).

Chromium is required, not optional: without it this test fails and says how to install it (``.ci/run``
installs Debian's ``chromium`` when it is missing). ``STARTD_REPORT_SCREENSHOT=1`` also saves the desktop
example's screenshot as docs/report.png, the picture in the README.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from pngkit import colours, pixels
from startd.sim.report.model import STATE_COLOURS, read_events
from test_html import CONFIGS, expected_spans, report_of

ROOT = Path(__file__).resolve().parents[2]
WINDOW = (1400, 900)


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("headless Chromium is needed to check the HTML report and none is installed: "
                "run `apt-get update && apt-get install -y chromium` (as .ci/run does)", pytrace=False)


def _run(args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    cmd = [chromium(), "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
           "--force-color-profile=srgb", f"--user-data-dir={tmp / 'profile'}", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}"
    return done


def _rgb(hex_colour: str, opacity: float) -> tuple[int, int, int]:
    c = [int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]
    r, g, b = (round(v * opacity + 255 * (1 - opacity)) for v in c)
    return r, g, b


def _count_near(rows: list[bytes], want: tuple[int, int, int], tol: int = 3) -> int:
    return sum(1 for r in rows for k in range(0, len(r), 3)
               if all(abs(r[k + i] - want[i]) <= tol for i in range(3)))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_chromium_renders_a_band_per_state_span(path: Path, tmp_path: Path) -> None:
    events, page = report_of(path)
    html = tmp_path / "report.html"
    html.write_text(page, encoding="utf-8")
    url = html.as_uri()

    # the browser's own DOM: it parsed the inline SVG into one band rect per state span
    dom = _run(["--dump-dom", url], tmp_path).stdout
    assert len(re.findall(r'<rect class="band"', dom)) == expected_spans(events)

    png = tmp_path / "report.png"
    _run([f"--screenshot={png}", f"--window-size={WINDOW[0]},{WINDOW[1]}", url], tmp_path)
    width, height, rows = pixels(png)
    assert (width, height) == WINDOW
    assert len(colours(rows)) > 50, "the screenshot is (nearly) blank"

    # the State/Activity the slots spent longest in is drawn: its band colour covers a good area
    tl = read_events(events)
    time_in: Counter[tuple[str, str]] = Counter()
    for s in tl.spans:
        if s.activity != "Suspended" and s.state in STATE_COLOURS:
            time_in[(s.state, s.activity)] += s.t1 - s.t0
    (state, activity), _ = time_in.most_common(1)[0]
    want = _rgb(STATE_COLOURS[state], 0.55 if activity == "Idle" else 1.0)
    assert _count_near(rows, want) > 1000, f"no {state}/{activity} band ({want}) in the screenshot"

    if path.name == "desktop.scenario.yaml" and os.environ.get("STARTD_REPORT_SCREENSHOT"):
        shutil.copyfile(png, ROOT / "docs" / "report.png")
