#!/usr/bin/env python3
"""OHLCV bars and wallet PnL of a dexlake lake, computed by Spark with dexlake's kernels.

    python python/spark/dexlake_spark.py --lake LAKE --out OUT [--master local[2]]

A command-line job over `dexlake.spark` (python/README.md, "Spark"): it writes
OUT/bars.parquet, the rows of `dexlake ohlcv --all-tokens --interval N`, and OUT/pnl.parquet,
the ledgers of `dexlake pnl --all-wallets --method M` (Spark writes each as a folder of part
files). Every rule is dexlake's own, run inside the executors; this file only parses
arguments and writes.
"""

import argparse
import sys
from pathlib import Path


def session(master, shuffle_partitions):
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(master)
        .appName("dexlake")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", required=True, help="the lake's root: a folder, or s3://bucket/prefix")
    parser.add_argument("--out", required=True, help="folder of bars.parquet and pnl.parquet (any Hadoop URL)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--interval", type=int, default=60, help="bar width, seconds (default 60)")
    parser.add_argument("--method", default="fifo", help="cost basis: fifo, lifo, hifo or avg (default fifo)")
    parser.add_argument("--as-of", default=None, help="read the lake as of this version or time")
    parser.add_argument("--shuffle-partitions", type=int, default=4,
                        help="spark.sql.shuffle.partitions (default 4, for a small machine)")
    args = parser.parse_args()
    try:
        import dexlake
        import dexlake.spark
    except ImportError as err:
        sys.exit(f"dexlake_spark: {err} (install the package: pip install ./python)")
    lake_root = args.lake if "://" in args.lake else str(Path(args.lake).resolve())
    out = args.out if "://" in args.out else str(Path(args.out).resolve())
    try:
        lake = dexlake.Lake(lake_root, as_of=args.as_of)
    except dexlake.DexlakeError as err:
        sys.exit(f"dexlake_spark: {err}")
    spark = session(args.master, args.shuffle_partitions)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        outputs = {
            "bars": dexlake.spark.bars(spark, lake, args.interval),
            "pnl": dexlake.spark.pnl(spark, lake, args.method),
        }
        for name, frame in outputs.items():
            target = f"{out.rstrip('/')}/{name}.parquet"
            frame.write.mode("overwrite").parquet(target)
            print(f"dexlake_spark: {name} written to {target}", file=sys.stderr)
    except dexlake.DexlakeError as err:
        sys.exit(f"dexlake_spark: {err}")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
