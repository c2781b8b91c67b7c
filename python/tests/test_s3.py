"""A lake on an S3-compatible server read by other engines: pyarrow and polars list the
committed files from the commit log on S3 and read them from S3, and get the rows of the same
lake written to a folder.

The server is moto, started in this process on loopback; the dexlake binary reaches it through
the AWS variables.
"""

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark"))
from committed_files import committed_files, dataset_files  # noqa: E402

pytest.importorskip("moto.server", reason="moto is not installed; run `make venv`")
pytest.importorskip("boto3", reason="boto3 is not installed; run `make venv`")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import s3_server  # noqa: E402

BUCKET = "lake-interop"
DATASETS = ["swaps", "trades", "candles", "price_history", "prices", "price_stats", "token_profiles", "portfolios"]


@pytest.fixture(scope="module")
def s3():
    """A moto server on loopback with one bucket; yields (endpoint, environment for dexlake)."""
    server, endpoint, client = s3_server.start([BUCKET])
    env = dict(
        os.environ,
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="test",
        AWS_SECRET_ACCESS_KEY="test",
        AWS_REGION="us-east-1",
    )
    yield endpoint, env, client
    server.stop()


def fixture_lake(root, env):
    binary = os.environ.get("DEXLAKE_BIN")
    if not binary:
        pytest.fail("DEXLAKE_BIN must name the dexlake binary (run the tests with `make py-test`)")
    subprocess.run(
        [binary, "fixture-lake", str(root), "--rows", "150"],
        check=True,
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )


def s3_reader(client, prefix):
    """A reader for committed_files: relative path -> text, None when the object is absent."""

    def read(relative):
        try:
            body = client.get_object(Bucket=BUCKET, Key=f"{prefix}/{relative}")["Body"]
        except client.exceptions.NoSuchKey:
            return None
        return body.read().decode()

    return read


def test_pyarrow_and_polars_read_the_committed_files_of_an_s3_lake(s3, tmp_path):
    endpoint, env, client = s3
    folder = tmp_path / "lake"
    fixture_lake(folder, env)
    fixture_lake(f"s3://{BUCKET}/interop", env)

    on_s3 = committed_files(read=s3_reader(client, "interop"))
    on_disk = committed_files(folder)
    assert on_s3, "the S3 lake commits no file"
    # Same datasets, same rows per dataset (file names differ: they hold a random tag).
    for dataset in DATASETS:
        rows = lambda files: sum(e["rows"] for e in files.values() if e["dataset"] == dataset)
        assert rows(on_s3) == rows(on_disk), dataset

    fs = pafs.S3FileSystem(
        endpoint_override=endpoint, scheme="http", access_key="test", secret_key="test",
        region="us-east-1",
    )
    storage = {
        "aws_endpoint_url": endpoint, "aws_access_key_id": "test", "aws_secret_access_key": "test",
        "aws_region": "us-east-1", "aws_allow_http": "true",
    }
    checked = 0
    for dataset in DATASETS:
        remote = dataset_files(on_s3, dataset)
        local = dataset_files(on_disk, dataset)
        if not local:
            continue
        # pyarrow: the listed objects, with the hive columns of their paths.
        got = ds.dataset(
            [f"{BUCKET}/interop/{p}" for p in remote], filesystem=fs, format="parquet",
            partitioning="hive", partition_base_dir=f"{BUCKET}/interop",
        ).to_table()
        want = ds.dataset(
            [str(folder / p) for p in local], format="parquet", partitioning="hive",
            partition_base_dir=str(folder),
        ).to_table()
        assert got.num_rows == want.num_rows > 0, dataset
        assert pl.from_arrow(got).sort(pl.all()).equals(pl.from_arrow(want).sort(pl.all())), dataset
        # polars: reads the same objects straight from S3.
        frame = pl.read_parquet([f"s3://{BUCKET}/interop/{p}" for p in remote], storage_options=storage)
        assert frame.height == want.num_rows, dataset
        checked += 1
    assert checked >= 6, f"only {checked} datasets were compared"
