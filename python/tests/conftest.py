"""Fixtures of the interop tests: a lake of every dataset written by the dexlake binary."""

import json
import os
import subprocess
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def fixture_lake(tmp_path_factory):
    """Writes the deterministic sample lake and returns (root, row counts, source records)."""
    binary = os.environ.get("DEXLAKE_BIN")
    if not binary:
        pytest.fail("DEXLAKE_BIN must name the dexlake binary (run the tests with `make py-test`)")
    root = tmp_path_factory.mktemp("interop") / "lake"
    records_path = root.parent / "records.json"
    out = subprocess.run(
        [binary, "fixture-lake", str(root), "--rows", "200", "--records", str(records_path)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    counts = json.loads(out.stdout)
    records = json.loads(Path(records_path).read_text())
    return root, counts, records
