"""Every Python block of README.md and python/README.md runs, as a reader would run it.

A block runs when its fence's language is ``python``; ``python no-run`` opts a block out (none
does today). Shell blocks are not run: they hold placeholders such as ``<TOKEN>`` and start
long-lived servers. Each block runs alone, in a fresh interpreter, in a folder that holds the
``lake`` the README's shell steps would have synced (``python/build_lake.py``: the simulator's
tiny market), with no ``DEXLAKE_*`` variable set, as for a new user: a block that needs a key it
does not get fails with the service's HTTP 401.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READMES = [ROOT / "README.md", ROOT / "python" / "README.md"]
FENCE = re.compile(r"^```(.*)$")


def blocks(path):
    """The ``(first line, code)`` of each runnable Python block of the Markdown file."""
    out = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        info = m.group(1).replace(",", " ").split()
        start = i + 1
        i = start
        while i < len(lines) and not lines[i].startswith("```"):
            i += 1
        if info[:1] == ["python"] and "no-run" not in info:
            out.append((start, "\n".join(lines[start:i]) + "\n"))
        i += 1
    return out


CASES = [(path, line, code) for path in READMES for line, code in blocks(path)]


def test_the_readmes_have_python_blocks():
    assert {path.name for path, _, _ in CASES} == {"README.md"}
    assert len({path for path, _, _ in CASES}) == 2
    assert len(CASES) >= 3


@pytest.fixture(scope="module")
def synced_lake(tmp_path_factory):
    """A lake synced from the simulator as the READMEs' shell steps would."""
    binary = os.environ.get("DEXLAKE_BIN")
    if not binary:
        pytest.fail("DEXLAKE_BIN must name the dexlake binary (run the tests with `make py-test`)")
    out = tmp_path_factory.mktemp("readme") / "lake"
    subprocess.run(
        [sys.executable, str(ROOT / "python" / "build_lake.py"), "--bin", binary, "--out", str(out)],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return out


@pytest.mark.parametrize(
    "path,line,code",
    CASES,
    ids=[f"{p.relative_to(ROOT)}:{line}" for p, line, _ in CASES],
)
def test_the_block_runs(path, line, code, synced_lake, tmp_path):
    shutil.copytree(synced_lake, tmp_path / "lake")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEXLAKE_")}
    env["MPLBACKEND"] = "Agg"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (
        f"{path.relative_to(ROOT)}, the block at line {line}:\n{code}\n"
        f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
