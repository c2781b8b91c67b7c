"""dexlake.spark on the 10M compare lakes: Spark local[1] and local[2] against the CLI, the
time split into read, shuffle and kernel.

Run with `make compare-spark` (release binary and package; the lakes of `make compare` and
`make compare-pnl` must exist), or
`python benches/compare/spark.py --dexlake target/release/dexlake --swaps-lake DIR
--trades-lake DIR [--runs 3]` with the `dexlake` package installed in release, pyspark and
Java 17.

For each answer (1-minute bars of every token of the 10M-swap lake; FIFO ledgers of every
wallet of the 10M-trade lake) and each master, in a fresh Spark session each:

- read: the committed files scanned, every column the kernels read (`write.format("noop")`);
- shuffle: the same rows grouped as the answer groups them (by token; by one of 1024 groups of
  wallets for the PnL) and handed to Python as Arrow, without
  a kernel (an `applyInArrow` that returns nothing);
- total: `dexlake.spark.bars` / `.pnl`, written to `noop`;
- kernel: total − shuffle (shuffle includes the read; on a small lake the difference is noise
  of the same size as Spark's start-up, so read it on the 10M lakes only);
- CLI: `dexlake ohlcv --all-tokens --interval 60` / `dexlake pnl --all-wallets`, Parquet out.

Prints one JSON line per measurement (the median of `--runs`), seconds.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, os, sys, time
os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession
import pyarrow as pa
import dexlake, dexlake.spark
master, answer, lake_root = sys.argv[1], sys.argv[2], sys.argv[3]
spark = (SparkSession.builder.master(master).config("spark.sql.session.timeZone", "UTC")
         .config("spark.ui.enabled", "false").config("spark.driver.memory", "6g")
         .config("spark.sql.shuffle.partitions", str(4 * int(master[6:-1] or 1))).getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
lake = dexlake.Lake(lake_root)
dataset, key = ("swaps", "token_address_in") if answer == "bars" else ("trades", "wallet_address")
frame = dexlake.spark.events(spark, lake, dataset)
out = {}
t = time.perf_counter()
frame.write.format("noop").mode("overwrite").save()
out["read"] = time.perf_counter() - t
def nothing(key, table):
    return pa.table({"n": pa.array([table.num_rows], pa.int64())})
t = time.perf_counter()
if answer == "pnl":
    # The PnL's groups: the wallets dealt by a hash of their address (dexlake.spark.pnl's default).
    from pyspark.sql import functions as F
    frame = frame.withColumn("_group", F.pmod(F.xxhash64(key), F.lit(1024)))
    key = "_group"
frame.groupBy(key).applyInArrow(nothing, "n long").write.format("noop").mode("overwrite").save()
out["shuffle"] = time.perf_counter() - t
t = time.perf_counter()
if answer == "bars":
    result = dexlake.spark.bars(spark, lake, interval=60)
else:
    result = dexlake.spark.pnl(spark, lake, method="fifo")
result.write.format("noop").mode("overwrite").save()
out["total"] = time.perf_counter() - t
out["kernel"] = out["total"] - out["shuffle"]
spark.stop()
print(json.dumps(out))
"""


def spark_run(master, answer, lake):
    r = subprocess.run([sys.executable, "-c", CHILD, master, answer, lake],
                       capture_output=True, text=True, timeout=7200)
    if r.returncode != 0:
        sys.exit(f"the Spark run failed:\n{r.stderr[-4000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def cli_run(binary, answer, lake):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.parquet")
        args = (["ohlcv", "--all-tokens", "--interval", "60"] if answer == "bars"
                else ["pnl", "--all-wallets"])
        t = time.perf_counter()
        subprocess.run([binary, "--lake", lake, *args, "--format", "parquet", "--out", out],
                       check=True, capture_output=True, timeout=7200)
        return {"total": time.perf_counter() - t}


def median(runs):
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dexlake", required=True, help="the release dexlake binary")
    parser.add_argument("--swaps-lake", required=True, help="the 10M-swap lake of `make compare`")
    parser.add_argument("--trades-lake", required=True, help="the 10M-trade lake of `make compare-pnl`")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for answer, lake in [("bars", args.swaps_lake), ("pnl", args.trades_lake)]:
        cli = median([cli_run(args.dexlake, answer, lake) for _ in range(args.runs)])
        print(json.dumps({"answer": answer, "engine": "cli", **cli}), flush=True)
        for master in ["local[1]", "local[2]"]:
            spark = median([spark_run(master, answer, lake) for _ in range(args.runs)])
            print(json.dumps({"answer": answer, "engine": master, **spark}), flush=True)


if __name__ == "__main__":
    main()
