#!/usr/bin/env python3
"""Builds a small dexlake lake from the built-in simulator, for the notebooks.

    python python/build_lake.py --bin target/debug/dexlake --out /tmp/lake

Starts `dexlake sim --seed 7 --scale tiny` on a free loopback port, then syncs into OUT:
swaps and trades of the most active altchain tokens, 1-minute and hourly candles, a price-stats
and a prices snapshot of those tokens, and every altchain token profile. The simulator is
stopped at the end, also when a step fails. Every step has a bounded timeout.
"""

import argparse
import json
import os
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

SEED = 7
SCALE = "tiny"
API_KEY = "demo-key"
STARTUP_TIMEOUT = 30  # seconds to wait for the simulator's `listening on` line
STEP_TIMEOUT = 180  # seconds for one sync command

# The search-profiles body that asks for every part of every profile (as in the README).
ALL_PROFILES = {
    "options": {
        "include_metadata": True,
        "include_market": True,
        "include_labels": True,
        "include_metrics": ["7d", "1d", "6h", "1h", "5m", "1m"],
    }
}


def log(message):
    print(f"build_lake: {message}", file=sys.stderr, flush=True)


def catalog(binary):
    """The simulated market: tokens, pools and wallets per chain, and its fixed `now`."""
    out = subprocess.run(
        [binary, "sim", "--seed", str(SEED), "--scale", SCALE, "--catalog"],
        check=True,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT,
    )
    return json.loads(out.stdout)


def start_simulator(binary):
    """Starts the simulator and returns (process, base URL) once it listens."""
    proc = subprocess.Popen(
        [binary, "sim", "--seed", str(SEED), "--scale", SCALE, "--addr", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + STARTUP_TIMEOUT
    line = ""
    while time.monotonic() < deadline:
        if not sel.select(timeout=max(0.0, deadline - time.monotonic())):
            break
        line = proc.stdout.readline()
        break
    sel.close()
    prefix = "listening on "
    if not line.startswith(prefix):
        stop_simulator(proc)
        raise RuntimeError(
            f"the simulator did not print `{prefix}http://IP:PORT` within {STARTUP_TIMEOUT} s"
            f" (got {line.strip()!r}, exit status {proc.poll()})"
        )
    # Keep reading what it prints so a full pipe never stalls it.
    threading.Thread(target=proc.stdout.read, daemon=True).start()
    return proc, line[len(prefix) :].strip()


def stop_simulator(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def sync(binary, lake, env, *args):
    cmd = [binary, "--lake", str(lake), "sync", *args]
    log(" ".join(cmd[3:]))
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT)
    if out.returncode != 0:
        raise RuntimeError(
            f"`dexlake sync {' '.join(args)}` failed with status {out.returncode}:\n"
            f"{out.stderr.strip()}"
        )


def rfc3339(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def build(binary, lake, tokens_count):
    market = catalog(binary)
    now = datetime.fromisoformat(market["now"].replace("Z", "+00:00")).astimezone(timezone.utc)
    tokens = sorted(market["altchain"]["tokens"], key=lambda t: -t["swap_count"])[:tokens_count]
    addresses = [t["address"] for t in tokens]
    log("tokens " + ", ".join(f"{t['symbol']} ({t['swap_count']} swaps)" for t in tokens))

    proc, url = start_simulator(binary)
    try:
        log(f"simulator at {url}")
        env = dict(os.environ, DEXLAKE_BASE_URL=url, DEXLAKE_API_KEY=API_KEY)
        env.pop("DEXLAKE_LAKE", None)
        for token in addresses:
            sync(binary, lake, env, "swaps", "--token", token)
            sync(binary, lake, env, "trades", "--token", token)
            sync(binary, lake, env, "candles", "--token", token, "--interval", "60",
                 "--from", rfc3339(now - timedelta(days=2)))
            sync(binary, lake, env, "candles", "--token", token, "--interval", "3600",
                 "--from", rfc3339(now - timedelta(days=30)))
        joined = ",".join(addresses)
        sync(binary, lake, env, "price-stats", "--altchain", "--tokens", joined)
        sync(binary, lake, env, "prices", "--altchain", "--tokens", joined)
        with tempfile.TemporaryDirectory() as tmp:
            request = Path(tmp) / "all-profiles.json"
            request.write_text(json.dumps(ALL_PROFILES))
            sync(binary, lake, env, "profiles", "--altchain", "--request", str(request))
    finally:
        stop_simulator(proc)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True, help="path of the dexlake binary")
    parser.add_argument("--out", required=True, help="folder of the lake to write")
    parser.add_argument("--tokens", type=int, default=3, help="how many of the most active tokens")
    args = parser.parse_args()
    binary = str(Path(args.bin).resolve())
    if not os.access(binary, os.X_OK):
        sys.exit(f"build_lake: {binary} is not an executable dexlake binary")
    lake = Path(args.out)
    lake.mkdir(parents=True, exist_ok=True)
    try:
        build(binary, lake, args.tokens)
    except (RuntimeError, subprocess.SubprocessError, OSError, ValueError, KeyError) as err:
        sys.exit(f"build_lake: {err}")
    log(f"lake written to {lake}")


if __name__ == "__main__":
    main()
