#!/usr/bin/env python3
"""Checks an HTML report in headless Chromium and saves a screenshot of it.

    python python/screenshot.py report/index.html docs/report.png

The page is opened over file:// (so relative image paths such as `charts/candles_X.png`
resolve against the page's folder, and nothing listens on a port). The check fails, with a
non-zero exit status and one line per problem, when an <img> did not load (not complete, or
naturalWidth 0) or when the browser console has a SEVERE entry (a resource that failed to load,
a script error). When the page passes, the whole page at 1200 CSS pixels wide is saved as a
PNG, shrunk with Pillow (palette, then scale) until it is under --max-kb.

Uses Debian's /usr/bin/chromium and /usr/bin/chromedriver (`apt-get install chromium
chromium-driver`) through a selenium Service, so selenium never downloads a driver or a browser.
"""

import argparse
import io
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

# Selenium Manager is only consulted when no driver path is given; keep it offline regardless.
os.environ.setdefault("SE_OFFLINE", "true")
os.environ.setdefault("SE_AVOID_STATS", "true")

from PIL import Image  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import TimeoutException, WebDriverException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROME_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
]
MAX_HEIGHT = 16000  # CSS pixels of page captured at most

# Every <img> of the page with what the browser made of it.
IMAGES_JS = """
return Array.from(document.images).map(img => ({
    src: img.getAttribute('src'),
    url: img.currentSrc || img.src,
    complete: img.complete,
    width: img.naturalWidth,
}));
"""


class PageError(Exception):
    """The page failed a check; the message names what broke."""


def start_browser(chromium, chromedriver, width, profile_dir):
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile_dir}")
    options.add_argument(f"--window-size={width},900")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)


def load(driver, url, width, timeout):
    """Opens the page at `width` CSS pixels and waits until it and its images have loaded."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
    )
    driver.set_page_load_timeout(timeout)
    driver.get(url)
    wait = WebDriverWait(driver, timeout)
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete")
    # Lazy images load once they are in view: make the viewport the whole page.
    height = min(MAX_HEIGHT, int(driver.execute_script(
        "return Math.max(document.documentElement.scrollHeight, document.body ? document.body.scrollHeight : 0)"
    )))
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": max(height, 1), "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        wait.until(lambda d: all(i["complete"] for i in d.execute_script(IMAGES_JS)))
    except TimeoutException:
        pass  # reported below as images that did not load
    time.sleep(0.2)  # let the console catch up with the last resource


def problems(driver):
    """One line per broken image and per SEVERE console entry."""
    found = []
    for img in driver.execute_script(IMAGES_JS):
        if not img["complete"] or not img["width"]:
            state = "did not finish loading" if not img["complete"] else "has no pixels (naturalWidth 0)"
            found.append(f"broken image: {img['src']!r} ({img['url']}) {state}")
    for entry in driver.get_log("browser"):
        if entry.get("level") == "SEVERE":
            found.append(f"console error: {entry.get('message', '').strip()}")
    return found


def capture(driver):
    """The page as PNG bytes (the viewport already spans the page)."""
    return driver.get_screenshot_as_png()


def shrink(png, max_bytes, max_height=None):
    """PNG bytes under max_bytes: the top max_height pixels (all when None), an adaptive
    256-colour palette, then smaller sizes."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    if max_height and image.height > max_height:
        image = image.crop((0, 0, image.width, max_height))

    def encode(img):
        out = io.BytesIO()
        img.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
            out, format="PNG", optimize=True
        )
        return out.getvalue()

    data = encode(image)
    scale = 1.0
    while len(data) > max_bytes and scale > 0.2:
        scale *= 0.85
        size = (max(1, int(image.width * scale)), max(1, int(image.height * scale)))
        data = encode(image.resize(size, Image.Resampling.LANCZOS))
    return data


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", help="the HTML file, e.g. report/index.html")
    parser.add_argument("out", help="the PNG to write, e.g. docs/report.png")
    parser.add_argument("--width", type=int, default=1200, help="page width in CSS pixels")
    parser.add_argument("--max-kb", type=int, default=300, help="largest PNG size wanted, in KB")
    parser.add_argument(
        "--max-height", type=int, default=None, help="keep only the top of the page, in pixels"
    )
    parser.add_argument("--timeout", type=float, default=60, help="seconds to load the page")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()

    page = Path(args.page)
    if not page.is_file():
        sys.exit(f"screenshot: no page at {page}")
    for binary in (args.chromium, args.chromedriver):
        if not shutil.which(binary):
            sys.exit(f"screenshot: {binary} not found (apt-get install chromium chromium-driver)")

    profile_dir = tempfile.mkdtemp(prefix="screenshot-profile-")
    driver = None
    try:
        driver = start_browser(args.chromium, args.chromedriver, args.width, profile_dir)
        load(driver, page.resolve().as_uri(), args.width, args.timeout)
        found = problems(driver)
        if found:
            raise PageError("\n".join(found))
        png = capture(driver)
    except PageError as err:
        print(f"screenshot: {page} failed its checks:\n{err}", file=sys.stderr)
        sys.exit(1)
    except (WebDriverException, TimeoutException) as err:
        msg = getattr(err, "msg", None) or str(err)
        sys.exit(f"screenshot: the browser failed on {page}: {msg.strip().splitlines()[0]}")
    finally:
        if driver is not None:
            driver.quit()
        shutil.rmtree(profile_dir, ignore_errors=True)

    data = shrink(png, args.max_kb * 1024, args.max_height)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    with Image.open(io.BytesIO(data)) as img:
        size = img.size
    print(f"screenshot: {page} passed; wrote {out} ({size[0]}x{size[1]}, {len(data) // 1024} KB)")


if __name__ == "__main__":
    main()
