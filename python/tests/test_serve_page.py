"""`dexlake serve --follow`'s token page in a real headless Chromium, against the live simulator.

Starts `dexlake sim --live --speed 600` (ten simulated minutes per second) and `dexlake serve
--follow TOKEN --interval 60 --poll 2` on a fresh lake, opens the token page, and checks that:

- the page loads with no console error;
- the candles the page holds (`window.dexlakeBars`, the API's rows as it received them: the
  latest span first, older spans as the chart is dragged to the left) equal `dexlake ohlcv
  --format json` on the lake over the same span;
- new closed bars arrive without a reload, most of them within the poll interval plus 500 ms
  of their close (the close mapped from the simulator's clock to this machine's);
- the server killed and started again under the open page resumes: the page reconnects and
  holds every bar of the lake once, none missing, none repeated.

Every wait is bounded (minutes), so a loaded machine is slow, never wrong. With
DEXLAKE_SERVE_PNG=PATH the token page's screenshot is saved there (docs/serve.png in the
README). Needs Debian's chromium and chromium-driver and selenium (and Pillow for the
screenshot); without them the test is skipped, except under `make test`
(DEXLAKE_REQUIRE_CHROMIUM=1), where it fails.
"""

import importlib
import io
import json
import os
import selectors
import shutil
import signal
import socket
import statistics
import subprocess
import threading
import time
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SPEED = 600  # simulated seconds per real second
INTERVAL = 60  # seconds of a bar
POLL = 2.0  # seconds between the follower's polls
STARTUP = 120  # seconds a process may take to print its first line
WAIT = 300  # seconds any condition may take to hold


def _missing():
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    for module in ("selenium", "PIL.Image"):
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(f"the {module.split('.')[0]} module")
    return ", ".join(missing)


if _missing():
    why = f"the page test needs {_missing()} (apt-get install chromium chromium-driver; make venv)"
    if os.environ.get("DEXLAKE_REQUIRE_CHROMIUM") == "1":
        pytest.fail(f"DEXLAKE_REQUIRE_CHROMIUM=1: {why}", pytrace=False)
    pytest.skip(why, allow_module_level=True)

os.environ.setdefault("SE_OFFLINE", "true")
os.environ.setdefault("SE_AVOID_STATS", "true")

from PIL import Image  # noqa: E402
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402


def binary():
    path = os.environ.get("DEXLAKE_BIN")
    if not path:
        pytest.fail("DEXLAKE_BIN must name the dexlake binary (run the tests with `make py-test`)")
    return path


def start(args, env=None, prefix="listening on "):
    """Starts `dexlake ARGS`; the process and what follows `prefix` on its first line."""
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    line = proc.stdout.readline() if sel.select(timeout=STARTUP) else ""
    sel.close()
    if not line.startswith(prefix):
        stop(proc)
        raise AssertionError(f"{args[1:4]} printed {line!r}: {proc.stderr.read()[-2000:]}")
    # Keep draining the pipes so a full one never stalls the process.
    for pipe in (proc.stdout, proc.stderr):
        threading.Thread(target=pipe.read, daemon=True).start()
    return proc, line[len(prefix):].strip()


def stop(proc, sig=signal.SIGINT):
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def get_json(url):
    with urllib.request.urlopen(url, timeout=60) as response:
        return json.load(response), response.headers


def until(what, condition, timeout=WAIT, every=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"waited {timeout} s for {what}")


def seconds(text):
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


OHLCV = ("timestamp", "open", "high", "low", "close", "volume", "count")


def candles(rows):
    return [{k: r.get(k) for k in OHLCV} for r in rows]


def test_the_token_page_follows_the_market_and_resumes(tmp_path):
    dexlake = binary()
    sim, base_url = start([dexlake, "sim", "--live", "--speed", str(SPEED), "--seed", "7"])
    procs = [sim]
    driver = None
    try:
        catalog, _ = get_json(f"{base_url}/sim/catalog")
        token = max(catalog["altchain"]["tokens"], key=lambda t: t["swap_count"])["address"]
        lake = tmp_path / "lake"
        port = free_port()
        env = dict(os.environ, DEXLAKE_BASE_URL=base_url, DEXLAKE_API_KEY="demo-key")
        env.pop("DEXLAKE_LAKE", None)
        serve_args = [dexlake, "--lake", str(lake), "serve", "--addr", f"127.0.0.1:{port}",
                      "--follow", token, "--interval", str(INTERVAL), "--poll", str(POLL)]

        def serve():
            proc, _ = start(serve_args, env=env)
            procs.append(proc)
            return proc

        server = serve()
        site = f"http://127.0.0.1:{port}"
        # The first poll syncs the token's history and sets the watermark.
        until("the follow's first watermark",
              lambda: get_json(f"{site}/api/follow")[0]["watermark"])

        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--no-first-run", "--disable-background-networking", "--hide-scrollbars",
                     "--force-device-scale-factor=1", "--window-size=1200,900",
                     f"--user-data-dir={tmp_path / 'profile'}"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
        driver.set_script_timeout(60)
        driver.get(f"{site}/token/{token}")
        state = lambda: driver.execute_script("return window.dexlakeState")  # noqa: E731
        until("the page's bars and its live stream",
              lambda: state() and state()["loaded"] and state().get("connected"))
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == [], errors

        # New bars close and arrive without a reload.
        loaded = len(driver.execute_script("return window.dexlakeBars"))
        until("ten new closed bars",
              lambda: len(driver.execute_script("return window.dexlakeArrivals") or {}) >= 10)
        # The simulator's clock against this machine's: the close of a bar (its end, in
        # simulated time) happened at this machine's `real(close)`.
        now_real = time.time()
        now_sim = get_json(f"{base_url}/sim/catalog")[0]["now"]
        now_sim = datetime.fromisoformat(now_sim.replace("Z", "+00:00")).timestamp()
        arrivals = driver.execute_script("return window.dexlakeArrivals")
        latencies = []
        for bar_time, arrived_ms in arrivals.items():
            close = int(bar_time) + INTERVAL
            close_real = now_real - (now_sim - close) / SPEED
            latencies.append(arrived_ms / 1000 - close_real)
        median = statistics.median(latencies)
        assert median <= POLL + 0.5, (median, sorted(latencies))

        # The page's candles are `dexlake ohlcv` on the lake, over the same span.
        def same_as_the_lake():
            bars = driver.execute_script("return window.dexlakeBars")
            first, last = bars[0]["timestamp"], bars[-1]["timestamp"]
            out = subprocess.run(
                [dexlake, "--lake", str(lake), "ohlcv", "--token", token, "--interval",
                 str(INTERVAL), "--from", first, "--to", str(seconds(last) + INTERVAL),
                 "--format", "json"],
                capture_output=True, text=True, timeout=300, check=True)
            lake_bars = json.loads(out.stdout)
            return candles(bars), candles(lake_bars)

        page, lake_bars = same_as_the_lake()
        assert len(page) > loaded
        assert page == lake_bars

        # Dragged to the left, the chart loads the span before its first bar (unless the page
        # holds every bar already), and the bars stay the lake's.
        first = driver.execute_script("return window.dexlakeBars[0].timestamp")
        spans = state()["older"]
        chart = driver.find_element("id", "chart")

        def dragged():
            if state()["older"] > spans or state()["complete"]:
                return True
            ActionChains(driver).move_to_element(chart).click_and_hold() \
                .move_by_offset(400, 0).release().perform()
            return False

        until("an older span", dragged, every=0.5)
        if state()["older"] > spans:
            assert seconds(driver.execute_script("return window.dexlakeBars[0].timestamp")) < seconds(first)
        page, lake_bars = same_as_the_lake()
        assert page == lake_bars

        if os.environ.get("DEXLAKE_SERVE_PNG"):
            shot = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("RGB")
            shot = shot.resize((shot.width * 3 // 4, shot.height * 3 // 4))
            shot = shot.quantize(colors=64)
            shot.save(os.environ["DEXLAKE_SERVE_PNG"], optimize=True)

        # The server dies under the open page and starts again: the page reconnects, gets
        # what it missed from the lake (by the last bar's id), and nothing twice.
        before = state()["reconnects"]
        held = len(driver.execute_script("return window.dexlakeBars"))
        stop(server, signal.SIGKILL)
        time.sleep(3 * POLL)  # the market goes on: bars close while no server runs
        server = serve()
        until("the page's reconnection", lambda: state()["reconnects"] > before)
        until("bars after the restart",
              lambda: len(driver.execute_script("return window.dexlakeBars")) > held + 10)
        page, lake_bars = same_as_the_lake()
        times = [seconds(b["timestamp"]) for b in page]
        assert times == sorted(set(times)), "a bar repeated or out of order"
        assert state().get("repeated") is None
        assert page == lake_bars
    finally:
        if driver is not None:
            driver.quit()
        for proc in reversed(procs):
            stop(proc)
