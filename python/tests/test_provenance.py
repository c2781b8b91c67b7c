"""Provenance: a Parquet output of the CLI names, in its footer's key-value metadata read back
with pyarrow, the lake version it read, the command and its arguments (never the API key), its
coverage and its warnings; and ``Lake.version`` is that version, moving when a sync commits.
"""

import json
import os
import subprocess

import pyarrow.parquet as pq
import pytest

import dexlake

API_KEY = "demo-key"


def cli(*args):
    """Runs the dexlake binary; returns the completed process (failing the test on an error)."""
    binary = os.environ.get("DEXLAKE_BIN")
    if not binary:
        pytest.fail("DEXLAKE_BIN must name the dexlake binary (run the tests with `make py-test`)")
    out = subprocess.run([binary, *map(str, args)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"dexlake {args}: {out.stderr}"
    return out


def test_a_parquet_output_names_the_version_and_query_lake_version_reads(tmp_path):
    root = tmp_path / "lake"
    with dexlake.Simulator(seed=7, scale="tiny") as sim:
        tokens = [t["address"] for t in sim.catalog()["altchain"]["tokens"][:2]]
        report = dexlake.sync(root, jobs=[{"dataset": "swaps", "token": tokens[0]}],
                              base_url=sim.base_url, api_key=API_KEY, progress=False)
        assert [j["outcome"] for j in report] == ["done"], report
        lake = dexlake.Lake(root)
        version = lake.version
        assert isinstance(version, int) and version > 0

        out = tmp_path / "bars.parquet"
        args = ["--lake", root, "ohlcv", "--tokens", f"{tokens[0]},NOPE", "--interval", "3600",
                "--format", "parquet", "--out", out]
        done = cli("--api-key", API_KEY, *args)
        assert done.stderr.splitlines()[0] == f"note: lake version {version}"

        meta = pq.read_metadata(out).metadata
        assert int(meta[b"dexlake.version"]) == version
        query = json.loads(meta[b"dexlake.query"])
        assert query == {"command": "ohlcv", "args": [str(a) for a in args if a != "ohlcv"]}
        assert API_KEY.encode() not in b"".join(meta.values())
        coverage = json.loads(meta[b"dexlake.coverage"])
        assert coverage["dataset"] == "swaps"
        assert {t["target"] for t in coverage["targets"]} == {f"token={tokens[0]}", "token=NOPE"}
        warnings = json.loads(meta[b"dexlake.warnings"])
        assert {w["kind"] for w in warnings} == {"no_events", "coverage"}, warnings
        assert all("NOPE" in w["text"] for w in warnings), warnings
        # The warnings are the ones printed, in order, after the version.
        assert done.stderr.splitlines()[1:] == [f"warning: {w['text']}" for w in warnings]
        assert meta[b"dexlake.created_by"].startswith(b"dexlake ")

        # A sync commits: the handle sees the new version, and a new output names it.
        dexlake.sync(root, jobs=[{"dataset": "swaps", "token": tokens[1]}],
                     base_url=sim.base_url, api_key=API_KEY, progress=False)
    assert lake.version > version
    later = tmp_path / "later.parquet"
    cli("--lake", root, "ohlcv", "--token", tokens[1], "--interval", "3600",
        "--format", "parquet", "--out", later)
    assert int(pq.read_metadata(later).metadata[b"dexlake.version"]) == lake.version
    assert dexlake.Lake(root).version == lake.version
