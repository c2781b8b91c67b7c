"""`dexlake serve`: the time from a swap's arrival at the simulator to its bar on the token
page, and the token page's first load on a given lake, in headless Chromium.

    python benches/compare/serve.py latency --dexlake target/release/dexlake [--speed 600]
        [--minutes 60] [--poll 1] [--scale tiny]
    python benches/compare/serve.py first-load --dexlake target/release/dexlake --lake DIR
        --token T [--interval 60] [--runs 3]

**latency.** Starts `dexlake sim --live --speed S` and `dexlake serve --follow T --interval 60
--poll P` (T the busiest token) on a fresh lake, opens `/token/T`, waits until the page is live,
then lets the market trade for `--minutes` simulated minutes. A swap arrives at the simulator at
its block time (mapped to this machine's clock by the simulator's `now`); it is on the page
when the page first holds a bar that counts it: the open bar of its bucket with at least its
rank among the bucket's swaps (`window.dexlakeOpenLog`), or its closed bar
(`window.dexlakeArrivals`). The swaps are read back from the lake with `dexlake sql`. Prints
the median and p99 over the swaps of the window.

**first-load.** Serves the lake (no follow) and times, per run in a fresh browser, from the
navigation to `/token/T` until the page holds its bars (`window.dexlakeState.loaded`).

The page is asked with short calls (a page too busy to answer within 10 s is asked again;
a run that gives up prints the page's console). Needs Debian's chromium and chromium-driver
and selenium. Run release builds for figures.
"""

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

os.environ.setdefault("SE_OFFLINE", "true")
os.environ.setdefault("SE_AVOID_STATS", "true")

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import TimeoutException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from urllib3.exceptions import ReadTimeoutError  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python" / "tests"))
from test_serve_page import get_json, start, stop, until  # noqa: E402

INTERVAL = 60
# Seconds a call into the page may take: the page is asked often, each time briefly, and a
# page too busy to answer is asked again (never one call blocked for minutes).
CALL = 10


def seconds(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def browser(profile):
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--no-first-run", "--disable-background-networking", "--window-size=1200,900",
                 f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
    driver.set_script_timeout(CALL)
    driver.command_executor.client_config.timeout = CALL + 5
    return driver


def ask(driver, script):
    """What `script` returns in the page, or None when the page did not answer within CALL s."""
    try:
        return driver.execute_script(script)
    except (TimeoutException, ReadTimeoutError):
        return None


def console(driver):
    """The page's console lines so far, for a failed run's report."""
    try:
        return [f"{e['level']} {e['message']}" for e in driver.get_log("browser")]
    except (TimeoutException, ReadTimeoutError):
        return ["(the page did not answer)"]


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latency(args):
    with tempfile.TemporaryDirectory() as tmp:
        sim, base_url = start([args.dexlake, "sim", "--live", "--speed", str(args.speed), "--seed", "7",
                                "--scale", args.scale])
        procs, driver = [sim], None
        try:
            catalog, _ = get_json(f"{base_url}/sim/catalog")
            token = max(catalog["altchain"]["tokens"], key=lambda t: t["swap_count"])["address"]
            lake = Path(tmp) / "lake"
            port = free_port()
            env = dict(os.environ, DEXLAKE_BASE_URL=base_url, DEXLAKE_API_KEY="demo-key")
            server, _ = start([args.dexlake, "--lake", str(lake), "serve", "--addr", f"127.0.0.1:{port}",
                               "--follow", token, "--interval", str(INTERVAL), "--poll", str(args.poll)],
                              env=env)
            procs.append(server)
            site = f"http://127.0.0.1:{port}"
            until("the first watermark", lambda: get_json(f"{site}/api/follow")[0]["watermark"])
            driver = browser(Path(tmp) / "profile")
            driver.get(f"{site}/token/{token}")
            try:
                until("the live page", lambda: (ask(driver, "return window.dexlakeState") or {}).get("caughtUp"))
            except AssertionError:
                print("\n".join(console(driver)), file=sys.stderr)
                raise
            real0 = time.time()
            sim0 = seconds(get_json(f"{base_url}/sim/catalog")[0]["now"])
            window = args.minutes * 60
            # The window's swaps, then the bars closed over them.
            time.sleep(window / args.speed + 3 * args.poll + 2)
            until("the window's bars", lambda: any(
                int(t) >= sim0 + window for t in ask(driver, "return window.dexlakeArrivals") or {}))
            arrivals = {int(t): ms / 1000 for t, ms in driver.execute_script("return window.dexlakeArrivals").items()}
            opens = driver.execute_script("return window.dexlakeOpenLog")
            query = (f"select block_time from swaps where (token_address_in = '{token}' or "
                     f"token_address_out = '{token}') order by block_time, block_slot, id")
            out = subprocess.run([args.dexlake, "--lake", str(lake), "sql", query, "--format", "json"],
                                 capture_output=True, text=True, check=True)
            swaps = [seconds(r["block_time"]) for r in json.loads(out.stdout)]
            print(f"{len(swaps)} swaps of the token, {min(swaps, default=None)} to "
                  f"{max(swaps, default=None)}; window from {sim0}", file=sys.stderr)
            swaps = [s for s in swaps if sim0 <= s < sim0 + window]
            latencies = []
            for s in swaps:
                bucket = int(s // INTERVAL * INTERVAL)
                rank = sum(1 for x in swaps if bucket <= x <= s)
                seen = [o["at"] / 1000 for o in opens if o["time"] == bucket and (o["count"] or 0) >= rank]
                if bucket in arrivals:
                    seen.append(arrivals[bucket])
                if not seen:
                    continue
                arrived = real0 + (s - sim0) / args.speed
                latencies.append(min(seen) - arrived)
            print(json.dumps({
                "swaps": len(swaps), "measured": len(latencies), "speed": args.speed, "poll": args.poll,
                "median_s": statistics.median(latencies) if latencies else None,
                "p99_s": percentile(latencies, 0.99) if latencies else None,
            }))
        finally:
            if driver is not None:
                driver.quit()
            for proc in reversed(procs):
                stop(proc)


def first_load(args):
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        server, _ = start([args.dexlake, "--lake", args.lake, "serve", "--addr", f"127.0.0.1:{port}"])
        times = []
        try:
            for run in range(args.runs):
                driver = browser(Path(tmp) / f"profile{run}")
                try:
                    started = time.monotonic()
                    driver.get(f"http://127.0.0.1:{port}/token/{args.token}?kind=time&size={args.interval}")
                    until("the page's bars", lambda: (ask(driver, "return window.dexlakeState") or {}).get("loaded"),
                          every=0.01)
                    times.append(time.monotonic() - started)
                    bars = driver.execute_script("return window.dexlakeBars.length")
                finally:
                    driver.quit()
        finally:
            stop(server, signal.SIGINT)
        print(json.dumps({"runs": times, "median_s": statistics.median(times), "bars": bars}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    lat = sub.add_parser("latency")
    lat.add_argument("--dexlake", required=True)
    lat.add_argument("--speed", type=float, default=600)
    lat.add_argument("--minutes", type=float, default=60)
    lat.add_argument("--poll", type=float, default=1)
    lat.add_argument("--scale", default="tiny", help="the simulated market's size (busier tokens when larger)")
    load = sub.add_parser("first-load")
    load.add_argument("--dexlake", required=True)
    load.add_argument("--lake", required=True)
    load.add_argument("--token", required=True)
    load.add_argument("--interval", type=int, default=60)
    load.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    latency(args) if args.what == "latency" else first_load(args)


if __name__ == "__main__":
    main()
