"""What the compare scripts share: timing a call, and running dexlake for its peak memory."""

import re
import subprocess
import sys
import time


def dexlake_peak_mib(binary, args):
    """Runs `binary args` under /usr/bin/time -v (exits on failure); returns peak RSS in MiB."""
    r = subprocess.run(["/usr/bin/time", "-v", binary, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"dexlake failed: {r.stderr}")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    return int(m.group(1)) / 1024 if m else float("nan")


def timed(f, *args):
    """(seconds, result) of f(*args)."""
    t = time.perf_counter()
    extra = f(*args)
    return time.perf_counter() - t, extra
