"""`dexlake.Lake(root, as_of=...)`: the package reads a lake as of a version, as `--as-of` does,
and `lake.files` / `lake.views` name exactly the committed files of that version."""

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest

import dexlake

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import build_lake  # noqa: E402


def run(*args):
    return subprocess.run(
        [os.environ["DEXLAKE_BIN"], *args], check=True, capture_output=True, text=True, timeout=300
    ).stdout


@pytest.fixture(scope="module")
def synced_lake(tmp_path_factory):
    """Two tokens' swaps synced from the simulator one after the other: a version with the
    first only, a newer one with both."""
    exe = os.environ["DEXLAKE_BIN"]
    root = tmp_path_factory.mktemp("versions") / "lake"
    root.mkdir()
    market = build_lake.catalog(exe)
    tokens = sorted(market["altchain"]["tokens"], key=lambda t: -t["swap_count"])[:2]
    proc, url = build_lake.start_simulator(exe)
    try:
        env = dict(os.environ, DEXLAKE_BASE_URL=url, DEXLAKE_API_KEY=build_lake.API_KEY)
        env.pop("DEXLAKE_LAKE", None)
        for token in tokens:
            build_lake.sync(exe, root, env, "swaps", "--token", token["address"], "--no-compact")
    finally:
        build_lake.stop_simulator(proc)
    return root


@pytest.fixture()
def lake_copy(synced_lake, tmp_path):
    """A copy of that lake, compacted: the compaction replaces the small files."""
    copy = tmp_path / "lake"
    shutil.copytree(synced_lake, copy)
    run("--lake", str(copy), "compact")
    return copy


def test_a_pinned_lake_reads_what_its_version_committed(lake_copy):
    newest = dexlake.Lake(lake_copy)
    records = json.loads(run("--lake", str(lake_copy), "log", "--format", "json"))["records"]
    versions = [r["version"] for r in records]
    assert versions[0] == max(versions) and records[0]["operation"] == "compact"
    first_write = min(v for v in versions if v > 0)
    old = dexlake.Lake(lake_copy, as_of=first_write)
    then = old.scan("swaps").collect()
    now = newest.scan("swaps").collect()
    assert 0 < then.height < now.height
    # The same bars the CLI computes as of that version.
    token = old.scan("swaps").collect()["token_address_out"][0]
    out = lake_copy.parent / "bars.parquet"
    run("--lake", str(lake_copy), "ohlcv", "--token", token, "--interval", "3600",
        "--as-of", str(first_write), "--format", "parquet", "--out", str(out))
    bars = old.bars(token, interval=3600)
    assert bars.equals(pl.read_parquet(out).select(bars.columns))
    # A time: the last version committed at or before it.
    at = dt.datetime.fromisoformat(
        next(r for r in records if r["version"] == first_write)["committed_at"].replace("Z", "+00:00")
    )
    by_time = dexlake.Lake(lake_copy, as_of=at)
    assert by_time.scan("swaps").collect().equals(old.scan("swaps").collect())
    assert dexlake.Lake(lake_copy, as_of=at.isoformat()).files("swaps") == old.files("swaps")


def test_the_views_of_a_version_read_its_committed_files(lake_copy):
    """The replaced files stay on disk for the older versions: a glob counts their rows twice,
    the views (of the newest version, or of an older one) count what each version commits."""
    newest = dexlake.Lake(lake_copy)
    con = duckdb.connect()
    glob = con.execute(
        f"SELECT count(*) FROM read_parquet('{lake_copy}/swaps/**/*.parquet')"
    ).fetchone()[0]
    con.execute(newest.views())
    committed = con.execute("SELECT count(*) FROM swaps").fetchone()[0]
    assert committed == newest.scan("swaps").collect().height
    assert glob > committed, "the compaction's replaced files are retained"
    on_disk = {str(p) for p in (lake_copy / "swaps").rglob("*.parquet")}
    assert set(newest.files("swaps")) < on_disk
    old = dexlake.Lake(lake_copy, as_of=1)
    con = duckdb.connect()
    con.execute(old.views())
    assert con.execute("SELECT count(*) FROM swaps").fetchone()[0] == old.scan("swaps").collect().height


def test_a_vacuumed_or_future_version_is_refused_by_name(lake_copy):
    newest = dexlake.Lake(lake_copy)
    with pytest.raises(dexlake.InvalidArgumentError, match="does not exist yet"):
        dexlake.Lake(lake_copy, as_of=10**9)
    with pytest.raises(dexlake.InvalidArgumentError, match="RFC 3339"):
        dexlake.Lake(lake_copy, as_of="yesterday")
    with pytest.raises(TypeError):
        dexlake.Lake(lake_copy, as_of=1.5)
    out = run("--lake", str(lake_copy), "vacuum", "--retain", "0s")
    assert "committed as version" in out
    with pytest.raises(dexlake.InvalidArgumentError, match="the oldest readable version is"):
        dexlake.Lake(lake_copy, as_of=1)
    # The newest version reads as before, and now a glob reads only the committed files.
    con = duckdb.connect()
    glob = con.execute(
        f"SELECT count(*) FROM read_parquet('{lake_copy}/swaps/**/*.parquet')"
    ).fetchone()[0]
    assert glob == newest.scan("swaps").collect().height
