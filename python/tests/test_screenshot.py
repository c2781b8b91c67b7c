"""python/screenshot.py on a good page and on one with a broken image.

Needs headless Chromium and its driver (Debian's chromium and chromium-driver, which .ci/run and
`make screenshot` install) and selenium and Pillow (in `.venv`). Without them the tests are
skipped, except under `make test`, which sets DEXLAKE_REQUIRE_CHROMIUM=1: then they fail.
"""

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCRIPT = Path(__file__).resolve().parents[1] / "screenshot.py"


def _missing():
    """What the tests need and this machine lacks, as text (empty when nothing is missing)."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    for module in ("selenium", "PIL.Image"):
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(f"the {module.split('.')[0]} module")
    return ", ".join(missing)


if _missing():
    why = f"the page checker needs {_missing()} (apt-get install chromium chromium-driver; make venv)"
    if os.environ.get("DEXLAKE_REQUIRE_CHROMIUM") == "1":
        pytest.fail(f"DEXLAKE_REQUIRE_CHROMIUM=1: {why}", pytrace=False)
    pytest.skip(why, allow_module_level=True)

from PIL import Image  # noqa: E402


def page(folder, image_src):
    charts = folder / "charts"
    charts.mkdir(parents=True)
    chart = Image.new("RGB", (320, 160), "white")
    for x in range(320):
        chart.putpixel((x, 80 + (x % 40) - 20), (31, 119, 180))
    chart.save(charts / "candles_TEST.png")
    index = folder / "index.html"
    index.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>report</title></head><body>"
        f"<h1>Daily report</h1><img src='{image_src}' alt='candles'>"
        "<table><tr><th>token</th><th>close</th></tr><tr><td>TEST</td><td>1.0</td></tr></table>"
        "</body></html>"
    )
    return index


def run(index, out):
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(index), str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_good_page_gives_a_small_png(tmp_path):
    index = page(tmp_path / "good", "charts/candles_TEST.png")
    out = tmp_path / "shot.png"
    result = run(index, out)
    assert result.returncode == 0, result.stderr
    with Image.open(out) as shot:
        assert shot.width == 1200
        assert shot.height > 0
    assert out.stat().st_size < 300 * 1024


def test_a_broken_image_fails_and_is_named(tmp_path):
    index = page(tmp_path / "bad", "charts/candles_MISSING.png")
    out = tmp_path / "shot.png"
    result = run(index, out)
    assert result.returncode != 0
    assert "broken image: 'charts/candles_MISSING.png'" in result.stderr
    assert "console error" in result.stderr
    assert not out.exists()
