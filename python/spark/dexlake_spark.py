#!/usr/bin/env python3
"""1-minute OHLCV bars and FIFO realized PnL of a dexlake lake, computed with Spark.

    python python/spark/dexlake_spark.py --lake LAKE --out OUT [--master local[2]]

Writes two Parquet datasets (Spark writes each as a folder of part files):
- OUT/bars.parquet: the bars of `dexlake ohlcv --all-tokens --interval 60`, one row per
  (token_address, timestamp), with the same columns;
- OUT/pnl.parquet: the ledgers of `dexlake pnl --all-wallets` (FIFO, zero-cost oversells,
  dust 0, marked at each token's latest price), one row per (wallet_address, token_address).

Only the files the lake commits are read: the list comes from the lake's commit log
(committed_files.py, docs/datasets.md "Committed files"), never from a glob of the folders, and
Spark reads exactly those paths with the lake root as `basePath`, so the hive columns `chain`
and `date` come from the paths as usual.

The lake may be a local folder or any Hadoop file system URL. An `s3a://bucket/prefix` lake
needs the hadoop-aws jar (and its AWS SDK) on Spark's classpath, e.g. `--packages
org.apache.hadoop:hadoop-aws:<Spark's Hadoop version>` with spark-submit, and the usual
`fs.s3a.*` settings; the tests use a local lake.

Semantics (those of dexlake's analytics, see the module docs of
src/analytics/events.rs, ohlcv/ and pnl.rs):
- A swap's token side: the bought side (`*_out`) of a `quote_token` swap, the sold side
  (`*_in`) of a `token_quote` swap, both sides of a `token_token` swap; `quote_quote` and
  unknown types carry none. Its price, base amount and USD amount are that side's
  `token_price_*`, `token_amount_*`, `usd_amount_*`; it is a buy on the `*_out` side.
- Bars: buckets `[start, start + 60 s)` on the epoch grid; open/close are the prices of the
  first/last event in event order `(block_time, block_slot, id)`; high/low ignore NaN prices;
  `vwap = sum_pq / sum_q` (null when `sum_q` is 0); `incomplete` flags the bars whose bucket's
  last instant is at or after the instant after the latest event of the lake.
- PnL: one ledger per (wallet, token) of the trades (`direction` buy or sell) and, for the
  wallets that have no trade at all, of their swaps (a `token_quote` swap sells its input, a
  `quote_token` swap buys its output, a `token_token` swap does both, the sell first; the fee
  `usd_amount_in - usd_amount_out` when positive is booked on the sell side, else on the buy
  side). Quantity = |amount| (0 when not finite; zero quantities change only the fees); USD
  value = `usd_amount` when finite and > 0, else price x amount. Events in event order; FIFO
  lots with dexlake's relative matching tolerance 1e-9; a sell beyond the holding has zero
  cost basis for the unmatched part (`oversold_quantity`).

The sums of a bar are added in Spark's order, not in event order: they equal dexlake's up to
float rounding (relative 1e-12 or so). Ledgers run in event order, one per group, so their
numbers are dexlake's bit for bit except where rows share a whole event key.
"""

import argparse
import math
import os
import sys
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from committed_files import LakeError, committed_files, dataset_files, local_reader  # noqa: E402

BAR_SECONDS = 60
MICROS = 1_000_000
MATCH_TOLERANCE = 1e-9  # dexlake's pnl::MATCH_TOLERANCE

BAR_COLUMNS = [
    "token_address", "timestamp", "open", "high", "low", "close", "volume", "base_volume",
    "buy_volume", "sell_volume", "sum_pq", "sum_q", "incomplete", "count", "vwap",
]

LEDGER_SCHEMA = (
    "wallet_address string, token_address string, buy_count long, sell_count long, "
    "bought_quantity double, sold_quantity double, open_quantity double, buy_cost double, "
    "sell_proceeds double, cost_basis double, sold_cost double, realized_pnl double, "
    "fees double, realized_pnl_net double, avg_holding_seconds double, "
    "positions_opened long, positions_closed long, wins long, losses long, "
    "oversold_quantity double"
)

PNL_COLUMNS = [
    "wallet_address", "token_address", "method", "buy_count", "sell_count", "bought_quantity",
    "sold_quantity", "open_quantity", "buy_cost", "sell_proceeds", "cost_basis", "mark_price",
    "realized_pnl", "unrealized_pnl", "total_pnl", "fees", "realized_pnl_net", "roi",
    "realized_roi", "avg_holding_seconds", "positions_opened", "positions_closed", "wins",
    "losses", "oversold_quantity", "ignored_quantity",
]


def log(message):
    print(f"dexlake_spark: {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Reading the committed files


def is_url(lake):
    return "://" in lake


def hadoop_reader(spark, root):
    """A reader of the lake's files through Spark's Hadoop file system (s3a://, hdfs://, ...)."""
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    base = jvm.org.apache.hadoop.fs.Path(root)
    fs = base.getFileSystem(conf)

    def read(relative):
        path = jvm.org.apache.hadoop.fs.Path(base, relative)
        if not fs.exists(path):
            return None
        stream = fs.open(path)
        try:
            return jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()

    return read


def read_dataset(spark, lake, files, dataset):
    """The committed files of `dataset` as one frame with the hive columns, or None if none."""
    paths = dataset_files(files, dataset)
    if not paths:
        return None
    root = lake.rstrip("/")
    full = [f"{root}/{p}" for p in paths]
    return spark.read.option("basePath", root).parquet(*full)


# ---------------------------------------------------------------------------------------------
# Bars


def swap_sides(swaps):
    """The token side of every swap: token, time (µs), slot, id, price, base, usd, buy."""
    from pyspark.sql import functions as F

    def side(types, suffix, buy):
        return swaps.filter(F.col("swap_type").isin(*types)).select(
            F.col(f"token_address_{suffix}").alias("token_address"),
            F.unix_micros("block_time").alias("t"),
            F.col("block_slot").alias("slot"),
            F.col("id"),
            F.col(f"token_price_{suffix}").alias("price"),
            F.col(f"token_amount_{suffix}").alias("base"),
            F.col(f"usd_amount_{suffix}").alias("usd"),
            F.lit(buy).alias("buy"),
        )

    return side(["quote_token", "token_token"], "out", True).unionByName(
        side(["token_quote", "token_token"], "in", False)
    )


def ohlcv_bars(swaps, width_seconds=BAR_SECONDS):
    """Time bars of every token's swaps (see the module documentation)."""
    from pyspark.sql import functions as F

    width = width_seconds * MICROS
    events = swap_sides(swaps)
    (latest,) = events.agg(F.max("t")).first()
    if latest is None:
        return None
    data_end = latest + 1
    order = F.struct("t", "slot", "id")
    # Rust's f64::max/min skip NaN; Spark orders NaN above every number.
    number = F.when(F.isnan("price"), None).otherwise(F.col("price"))
    nan = F.lit(float("nan"))
    bars = (
        events.withColumn("start", F.col("t") - F.pmod(F.col("t"), F.lit(width)))
        .groupBy("token_address", "start")
        .agg(
            F.min_by("price", order).alias("open"),
            F.coalesce(F.max(number), nan).alias("high"),
            F.coalesce(F.min(number), nan).alias("low"),
            F.max_by("price", order).alias("close"),
            F.sum("usd").alias("volume"),
            F.sum("base").alias("base_volume"),
            F.sum(F.when(F.col("buy"), F.col("usd")).otherwise(0.0)).alias("buy_volume"),
            F.sum(F.when(F.col("buy"), 0.0).otherwise(F.col("usd"))).alias("sell_volume"),
            F.sum(F.col("price") * F.col("base")).alias("sum_pq"),
            F.sum("base").alias("sum_q"),
            F.count(F.lit(1)).alias("count"),
        )
    )
    return bars.select(
        "token_address",
        F.timestamp_micros("start").alias("timestamp"),
        "open", "high", "low", "close", "volume", "base_volume", "buy_volume", "sell_volume",
        "sum_pq", "sum_q",
        (F.col("start") + F.lit(width - 1) >= F.lit(data_end)).alias("incomplete"),
        "count",
        F.when(F.col("sum_q") != 0.0, F.col("sum_pq") / F.col("sum_q")).alias("vwap"),
    ).orderBy("token_address", "timestamp")


# ---------------------------------------------------------------------------------------------
# PnL


def ledger_events(trades, swaps):
    """Ledger events: wallet, token, buy, amount, usd, price, fee, t, slot, id, src, leg.

    `src` (0 trades, 1 swaps) and `leg` (0 the sell, 1 the buy of a swap) only order events
    that share a whole event key, as dexlake's row order does.
    """
    from pyspark.sql import functions as F

    parts = []
    if trades is not None:
        parts.append(
            trades.filter(F.col("direction").isin("buy", "sell")).select(
                "wallet_address",
                "token_address",
                (F.col("direction") == "buy").alias("buy"),
                F.col("token_amount").alias("amount"),
                F.col("usd_amount").alias("usd"),
                F.col("token_price").alias("price"),
                F.lit(0.0).alias("fee"),
                F.unix_micros("block_time").alias("t"),
                F.col("block_slot").alias("slot"),
                "id",
                F.lit(0).alias("src"),
                F.lit(0).alias("leg"),
            )
        )
    if swaps is not None:
        if trades is not None:
            # Swaps count only for wallets without any trade.
            traders = trades.select("wallet_address").distinct()
            swaps = swaps.join(traders, "wallet_address", "left_anti")
        d = F.col("usd_amount_in") - F.col("usd_amount_out")
        fee = F.when(~F.isnan(d) & (d > 0.0) & (d < float("inf")), d).otherwise(0.0)
        swaps = swaps.withColumn("fee", fee)

        def leg(types, suffix, buy, fee_col, leg_no):
            return swaps.filter(F.col("swap_type").isin(*types)).select(
                "wallet_address",
                F.col(f"token_address_{suffix}").alias("token_address"),
                F.lit(buy).alias("buy"),
                F.col(f"token_amount_{suffix}").alias("amount"),
                F.col(f"usd_amount_{suffix}").alias("usd"),
                F.col(f"token_price_{suffix}").alias("price"),
                fee_col.alias("fee"),
                F.unix_micros("block_time").alias("t"),
                F.col("block_slot").alias("slot"),
                "id",
                F.lit(1).alias("src"),
                F.lit(leg_no).alias("leg"),
            )

        only_buy = F.when(F.col("swap_type") == "quote_token", F.col("fee")).otherwise(0.0)
        parts.append(leg(["token_quote", "token_token"], "in", False, F.col("fee"), 0))
        parts.append(leg(["quote_token", "token_token"], "out", True, only_buy, 1))
    if not parts:
        return None
    events = parts[0]
    for p in parts[1:]:
        events = events.unionByName(p)
    return events


def usd_value(usd, price, amount):
    if math.isfinite(usd) and usd > 0.0:
        return usd
    if math.isfinite(price):
        return price * amount
    return 0.0


def fifo_ledger(wallet, token, rows):
    """One FIFO ledger (zero-cost oversells, dust 0) over rows in event order, operation by
    operation as dexlake's `Ledger` (src/analytics/pnl.rs). Rows: (buy, amount, usd, price,
    fee, t, id)."""
    lots = deque()  # [quantity, cost, time]
    open_qty = open_cost = 0.0
    buys = sells = 0
    bought = buy_cost = sold = proceeds_sum = sold_cost = realized = fees = 0.0
    hold_qt = hold_q = oversold = 0.0
    positions = []  # [realized, closed]
    for buy, amount, usd, price, fee, t in rows:
        fees += fee
        q = abs(amount) if math.isfinite(amount) else 0.0
        if q <= 0.0:
            continue
        value = usd_value(usd, price, amount)
        was_open = open_qty > 0.0
        if buy:
            buys += 1
            buy_cost += value
            bought += q
            lots.append([q, value, t])
            open_qty += q
            open_cost += value
        else:
            sells += 1
            remaining, matched_q, matched_cost = q, 0.0, 0.0
            while remaining > q * MATCH_TOLERANCE and lots:
                lot = lots.popleft()
                whole = remaining >= lot[0] * (1.0 - MATCH_TOLERANCE)
                take = lot[0] if whole else remaining
                cost = lot[1] if whole else lot[1] * take / lot[0]
                if not whole:
                    lot[1] -= lot[1] * take / lot[0]
                    lot[0] -= take
                    lots.appendleft(lot)
                matched_q += take
                matched_cost += cost
                hold_qt += take * (t - lot[2]) / MICROS
                hold_q += take
                remaining -= take
            if not lots:
                open_qty = open_cost = 0.0
            else:
                open_qty -= matched_q
                open_cost -= matched_cost
            unmatched = remaining if remaining > q * MATCH_TOLERANCE else 0.0
            oversold += unmatched
            pnl = value - matched_cost
            proceeds_sum += value
            sold += q
            sold_cost += matched_cost
            realized += pnl
            if positions and not positions[-1][1]:
                positions[-1][0] += pnl
        is_open = open_qty > 0.0
        if not was_open and is_open:
            positions.append([0.0, False])
        elif was_open and not is_open and positions:
            positions[-1][1] = True
    closed = [p for p in positions if p[1]]
    return (
        wallet, token, buys, sells, bought, sold, open_qty, buy_cost, proceeds_sum, open_cost,
        sold_cost, realized, fees, realized - fees,
        hold_qt / hold_q if hold_q > 0.0 else None,
        len(positions), len(closed),
        sum(1 for p in closed if p[0] > 0.0), sum(1 for p in closed if p[0] < 0.0),
        oversold,
    )


def ledger_of_group(frame):
    """applyInPandas: one (wallet, token) group of events -> its ledger row."""
    import pandas as pd

    frame = frame.sort_values(["t", "slot", "id", "src", "leg"], kind="stable")
    rows = zip(
        frame["buy"].tolist(), frame["amount"].tolist(), frame["usd"].tolist(),
        frame["price"].tolist(), frame["fee"].tolist(), frame["t"].tolist(),
    )
    row = fifo_ledger(frame["wallet_address"].iat[0], frame["token_address"].iat[0], rows)
    columns = [c.split()[0] for c in LEDGER_SCHEMA.split(", ")]
    return pd.DataFrame([row], columns=columns)


def fifo_pnl(trades, swaps):
    """The ledgers of every (wallet, token), with dexlake pnl's columns."""
    from pyspark.sql import functions as F

    events = ledger_events(trades, swaps)
    if events is None:
        return None
    ledgers = events.groupBy("wallet_address", "token_address").applyInPandas(
        ledger_of_group, schema=LEDGER_SCHEMA
    )
    # The mark: each token's latest finite price over every event (all wallets).
    marks = (
        events.filter(~F.isnan("price") & (F.abs("price") < float("inf")))
        .groupBy("token_address")
        .agg(F.max_by("price", F.struct("t", "slot", "id", -F.col("src"), -F.col("leg"))).alias("mark_price"))
    )
    out = ledgers.join(marks, "token_address", "left")
    unrealized = (
        F.when(F.col("open_quantity") == 0.0, -F.col("cost_basis"))
        .otherwise(F.col("open_quantity") * F.col("mark_price") - F.col("cost_basis"))
    )
    total = F.col("realized_pnl") + F.col("unrealized_pnl")

    def pct(a, b):
        return F.when(b != 0.0, F.lit(100.0) * a / b)

    out = (
        out.withColumn("method", F.lit("fifo"))
        .withColumn("ignored_quantity", F.lit(0.0))  # only the `ignore` policy leaves some out
        .withColumn("unrealized_pnl", unrealized)
        .withColumn("total_pnl", total)
        .withColumn("roi", pct(F.col("total_pnl"), F.col("buy_cost")))
        .withColumn("realized_roi", pct(F.col("realized_pnl"), F.col("sold_cost")))
    )
    return out.select(*PNL_COLUMNS).orderBy("wallet_address", "token_address")


# ---------------------------------------------------------------------------------------------
# The job


def session(master, shuffle_partitions):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(master)
        .appName("dexlake-spark")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(shuffle_partitions))
        .config("spark.driver.memory", "1g")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )


def run(spark, lake, out):
    """Computes both outputs; returns {name: rows written}."""
    read = hadoop_reader(spark, lake) if is_url(lake) else local_reader(lake)
    files = committed_files(lake, read=read)
    swaps = read_dataset(spark, lake, files, "swaps")
    trades = read_dataset(spark, lake, files, "trades")
    log(f"{len(dataset_files(files, 'swaps'))} swaps files and "
        f"{len(dataset_files(files, 'trades'))} trades files committed")
    written = {}
    outputs = {
        "bars": (lambda: ohlcv_bars(swaps)) if swaps is not None else (lambda: None),
        "pnl": lambda: fifo_pnl(trades, swaps),
    }
    for name, build in outputs.items():
        frame = build()
        target = f"{out.rstrip('/')}/{name}.parquet"
        if frame is None:
            log(f"{name}: no events in the lake, nothing written")
            continue
        frame.write.mode("overwrite").parquet(target)
        written[name] = spark.read.parquet(target).count()
        log(f"{name}: {written[name]} rows written to {target}")
    return written


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", required=True,
                        help="the lake's root: a folder, or a Hadoop URL such as s3a://bucket/prefix")
    parser.add_argument("--out", required=True, help="folder of bars.parquet and pnl.parquet")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--shuffle-partitions", type=int, default=4,
                        help="spark.sql.shuffle.partitions (default 4, for a small machine)")
    args = parser.parse_args()
    lake = args.lake if is_url(args.lake) else str(Path(args.lake).resolve())
    out = args.out if is_url(args.out) else str(Path(args.out).resolve())
    if not is_url(lake):
        if not Path(lake).is_dir():
            sys.exit(f"dexlake_spark: the lake {lake} is not a folder")
        try:
            committed_files(lake)  # fail before starting Spark when the log is unreadable
        except LakeError as err:
            sys.exit(f"dexlake_spark: {err}")
    try:
        import pyspark  # noqa: F401
    except ImportError:
        sys.exit("dexlake_spark: pyspark is not installed (`make venv` installs it)")
    spark = session(args.master, args.shuffle_partitions)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        run(spark, lake, out)
    except LakeError as err:
        sys.exit(f"dexlake_spark: {err}")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
