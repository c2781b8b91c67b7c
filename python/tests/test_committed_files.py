"""Other engines find the committed files from the commit log, as docs/datasets.md says."""

import json
import sys
from pathlib import Path

import duckdb
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark"))
from committed_files import LakeError, committed_files, dataset_files  # noqa: E402


def test_the_log_lists_exactly_the_files_on_disk(fixture_lake):
    root, counts, _ = fixture_lake
    files = committed_files(root)
    on_disk = {str(p.relative_to(root)) for p in Path(root).rglob("*.parquet")}
    assert set(files) == on_disk
    rows = {}
    for entry in files.values():
        rows[entry["dataset"]] = rows.get(entry["dataset"], 0) + entry["rows"]
    assert rows == {d: n for d, n in counts.items() if n}


def test_duckdb_reads_the_listed_files(fixture_lake):
    root, counts, _ = fixture_lake
    swaps = [str(Path(root) / p) for p in dataset_files(committed_files(root), "swaps")]
    listed = ", ".join(f"'{p}'" for p in swaps)
    con = duckdb.connect()
    (n,) = con.execute(f"SELECT count(*) FROM read_parquet([{listed}], hive_partitioning = true)").fetchone()
    assert n == counts["swaps"]


def entry(dataset="swaps"):
    return {"dataset": dataset, "rows": 1, "bytes": 1, "min_time": "2025-01-01T00:00:00Z",
            "max_time": "2025-01-01T00:00:00Z"}


def test_a_legacy_manifest_is_the_checkpoint_of_its_version(tmp_path):
    meta = tmp_path / "_dexlake"
    (meta / "log").mkdir(parents=True)
    (meta / "manifest.json").write_text(json.dumps({"version": 3, "files": {"a": entry(), "b": entry()}}))
    # An entry at or before the manifest's version is not applied; the next one is.
    (meta / "log" / f"{3:020}.json").write_text(json.dumps({"add": {"old": entry()}}))
    (meta / "log" / f"{4:020}.json").write_text(json.dumps({"remove": ["a"], "add": {"c": entry("trades")}}))
    files = committed_files(tmp_path)
    assert sorted(files) == ["b", "c"]
    assert dataset_files(files, "trades") == ["c"]


def test_a_lake_without_its_log_is_an_error(tmp_path):
    with pytest.raises(LakeError, match="manifest is missing"):
        committed_files(tmp_path)
    meta = tmp_path / "_dexlake"
    meta.mkdir()
    (meta / "_last_checkpoint.json").write_text(json.dumps({"version": 7}))
    with pytest.raises(LakeError, match="names checkpoint 7"):
        committed_files(tmp_path)


def test_the_duckdb_views_read_the_committed_files_and_a_glob_does_not(fixture_lake, tmp_path):
    """`dexlake views` (DuckDB, the default) defines one view per dataset over the committed
    files; with a leftover file beside them, a glob counts it and the views do not."""
    import os
    import shutil
    import subprocess

    root, counts, _ = fixture_lake
    lake = tmp_path / "lake"
    shutil.copytree(root, lake)
    committed = dataset_files(committed_files(lake), "swaps")
    source = lake / committed[0]
    (source.parent / "part-leftover-uncommitted.parquet").write_bytes(source.read_bytes())
    script = subprocess.run(
        [os.environ["DEXLAKE_BIN"], "--lake", str(lake), "views"],
        check=True, capture_output=True, text=True, timeout=120,
    ).stdout
    con = duckdb.connect()
    con.execute(script)
    for dataset, rows in counts.items():
        if rows:
            (n,) = con.execute(f"SELECT count(*) FROM {dataset}").fetchone()
            assert n == rows, dataset
        else:
            assert f"-- {dataset}: no committed files, no view" in script
    (globbed,) = con.execute(
        f"SELECT count(*) FROM read_parquet('{lake}/swaps/**/*.parquet', hive_partitioning = true)"
    ).fetchone()
    assert globbed > counts["swaps"]
    # The hive columns come from the paths, as with the glob.
    (chains,) = con.execute("SELECT count(DISTINCT chain) FROM swaps").fetchone()
    assert chains == 1


def test_sql_counts_what_the_duckdb_views_count_and_not_a_leftover(fixture_lake, tmp_path):
    """`dexlake sql` and `Lake.sql` read the committed files: with a leftover file beside
    them, their count is DuckDB's through `dexlake views`, where a glob counts more."""
    import os
    import shutil
    import subprocess

    import dexlake

    root, counts, _ = fixture_lake
    lake = tmp_path / "lake"
    shutil.copytree(root, lake)
    committed = dataset_files(committed_files(lake), "swaps")
    source = lake / committed[0]
    (source.parent / "part-leftover-uncommitted.parquet").write_bytes(source.read_bytes())
    binary = os.environ["DEXLAKE_BIN"]
    script = subprocess.run(
        [binary, "--lake", str(lake), "views", "--engine", "duckdb"],
        check=True, capture_output=True, text=True, timeout=120,
    ).stdout
    con = duckdb.connect()
    con.execute(script)
    (by_views,) = con.execute("SELECT count(*) FROM swaps").fetchone()
    (globbed,) = con.execute(
        f"SELECT count(*) FROM read_parquet('{lake}/swaps/**/*.parquet', hive_partitioning = true)"
    ).fetchone()
    assert globbed > by_views == counts["swaps"]

    out = subprocess.run(
        [binary, "--lake", str(lake), "sql", "select count(*) as n from swaps", "--format", "json"],
        check=True, capture_output=True, text=True, timeout=120,
    ).stdout
    assert json.loads(out) == [{"n": by_views}]
    frame = dexlake.Lake(str(lake)).sql("select count(*) as n from swaps")
    assert frame["n"].to_list() == [by_views]

    # A group-by over a hive column agrees with DuckDB's over the views.
    query = "select cast(date as varchar) as day, count(*) as n from swaps group by date order by day"
    duck = con.execute(query).fetchall()
    ours = dexlake.Lake(str(lake)).sql(query)
    assert list(zip(ours["day"].to_list(), ours["n"].to_list())) == duck

    with pytest.raises(dexlake.InvalidArgumentError, match="not a query"):
        dexlake.Lake(str(lake)).sql("drop table swaps")
