"""The data files a dexlake lake commits, read from its commit log (docs/datasets.md,
section "Committed files").

A glob of a dataset's folder can see files that are not committed (a commit in progress, the
leftovers of a crashed writer, the files a compaction replaced, which stay for the older
versions until `dexlake vacuum` deletes them). Engines that
must read exactly the committed data take the list from `_dexlake/`:

1. `_dexlake/_last_checkpoint.json` names the newest checkpoint version V;
2. `_dexlake/checkpoint/<V:020>.files.json` holds `{"files": {path: entry}}`;
3. for v = V+1, V+2, ... while `_dexlake/log/<v:020>.json` exists, drop the paths of its
   `remove` list and add the keys of its `add` object.

Lakes written before the log existed hold a single `_dexlake/manifest.json` (`{"version": V,
"files": {...}}`) instead of a checkpoint: it is read as the checkpoint of its version.

Paths are relative to the lake root. The reading of a file is a parameter, so the same
procedure serves a local folder (the default) and any other store (e.g. the Hadoop file
system of a Spark session, see dexlake_spark.py).
"""

import json
from pathlib import Path

LAST_CHECKPOINT = "_dexlake/_last_checkpoint.json"
CHECKPOINT_DIR = "_dexlake/checkpoint"
LOG_DIR = "_dexlake/log"
LEGACY_MANIFEST = "_dexlake/manifest.json"


class LakeError(Exception):
    """The lake's commit log is missing or cannot be read."""


def local_reader(root):
    """A reader of the local lake at `root`: relative path -> text, or None when absent."""
    base = Path(root)

    def read(relative):
        try:
            return (base / relative).read_text()
        except FileNotFoundError:
            return None

    return read


def committed_files(root=None, read=None):
    """The committed data files of a lake: {path relative to the root: entry}.

    Give the local lake folder `root`, or `read`, a function from a path relative to the lake
    root to the file's text (None when the file does not exist). Each entry holds the file's
    `dataset`, `rows`, `bytes`, `min_time`, `max_time` (and `min_id`, `max_id`).
    """
    if read is None:
        if root is None:
            raise ValueError("give the lake folder `root` or a `read` function")
        read = local_reader(root)
    where = root if root is not None else "the lake"

    def load(relative, what):
        text = read(relative)
        if text is None:
            return None
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise LakeError(f"{where}: {relative} ({what}) is not valid JSON: {err}") from err

    last = load(LAST_CHECKPOINT, "the newest checkpoint's version")
    if last is not None:
        version = int(last["version"])
        path = f"{CHECKPOINT_DIR}/{version:020}.files.json"
        checkpoint = load(path, "the checkpoint's file list")
        if checkpoint is None:
            raise LakeError(f"{where}: {LAST_CHECKPOINT} names checkpoint {version}, but {path} is missing")
        files = dict(checkpoint["files"])
    else:
        legacy = load(LEGACY_MANIFEST, "the manifest of a lake written before the log")
        if legacy is None:
            raise LakeError(
                f"{where}: neither {LAST_CHECKPOINT} nor {LEGACY_MANIFEST} exists: not a dexlake"
                " lake, or its manifest is missing (`dexlake verify --repair` rebuilds it)"
            )
        version = int(legacy.get("version", 0))
        files = dict(legacy.get("files", {}))
    while True:
        version += 1
        commit = load(f"{LOG_DIR}/{version:020}.json", f"commit {version}")
        if commit is None:
            return files
        for path in commit.get("remove", []):
            files.pop(path, None)
        files.update(commit.get("add", {}))


def dataset_files(files, dataset):
    """The sorted paths of `dataset`'s files in a `committed_files` result."""
    return sorted(path for path, entry in files.items() if entry["dataset"] == dataset)
