"""Other engines find the committed files from the commit log, as docs/datasets.md says."""

import sys
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark"))
from committed_files import committed_files, dataset_files  # noqa: E402


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
