"""Other engines find the committed files from the commit log, as docs/datasets.md says."""

import json
from pathlib import Path

import duckdb


def committed_files(root):
    """The committed data files of the lake at `root`, by the procedure of docs/datasets.md."""
    meta = Path(root) / "_dexlake"
    version = json.loads((meta / "_last_checkpoint.json").read_text())["version"]
    files = json.loads((meta / "checkpoint" / f"{version:020}.files.json").read_text())["files"]
    while True:
        version += 1
        entry = meta / "log" / f"{version:020}.json"
        if not entry.exists():
            return files
        commit = json.loads(entry.read_text())
        for path in commit.get("remove", []):
            files.pop(path, None)
        files.update(commit.get("add", {}))


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
    swaps = sorted(
        str(Path(root) / p) for p, e in committed_files(root).items() if e["dataset"] == "swaps"
    )
    listed = ", ".join(f"'{p}'" for p in swaps)
    con = duckdb.connect()
    (n,) = con.execute(f"SELECT count(*) FROM read_parquet([{listed}], hive_partitioning = true)").fetchone()
    assert n == counts["swaps"]
