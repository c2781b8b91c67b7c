"""DuckDB, polars and pyarrow read the lake as it is: row counts, column types and values."""

import datetime as dt

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

DATASETS = [
    "swaps",
    "trades",
    "candles",
    "price_history",
    "prices",
    "price_stats",
    "token_profiles",
    "portfolios",
]

TIME_COLUMN = {
    "swaps": "block_time",
    "trades": "block_time",
    "candles": "timestamp",
    "price_history": "timestamp",
    "prices": "fetched_at",
    "price_stats": "fetched_at",
    "token_profiles": "fetched_at",
    "portfolios": "fetched_at",
}


def ts(text):
    """An RFC 3339 timestamp of the records as an aware datetime."""
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def micros(text):
    """Microseconds since the epoch of an RFC 3339 timestamp, computed exactly."""
    return (ts(text) - EPOCH) // dt.timedelta(microseconds=1)


def glob(root, dataset):
    return f"{root}/{dataset}/**/*.parquet"


def duck(root, dataset, select="*", where=""):
    con = duckdb.connect()
    sql = (
        f"SELECT {select} FROM read_parquet('{glob(root, dataset)}', hive_partitioning = true) "
        + where
    )
    return con, sql


def test_fixture_counts_match_the_records(fixture_lake):
    _, counts, records = fixture_lake
    assert counts["swaps"] == len(records["swaps"])
    assert counts["trades"] == len(records["trades"])
    assert counts["candles"] == len(records["candles"])
    assert counts["portfolios"] == len(records["portfolios"])
    assert counts["prices"] == len(records["evm_prices"]) + len(records["alt_prices"])
    assert all(counts[d] > 0 for d in DATASETS)


@pytest.mark.parametrize("dataset", DATASETS)
def test_duckdb_reads_every_dataset(fixture_lake, dataset):
    root, counts, _ = fixture_lake
    con, sql = duck(root, dataset)
    assert con.execute(f"SELECT count(*) FROM ({sql})").fetchone()[0] == counts[dataset]
    types = {name: typ for name, typ, *_ in con.execute(f"DESCRIBE {sql}").fetchall()}
    assert types[TIME_COLUMN[dataset]] == "TIMESTAMP WITH TIME ZONE"
    assert types["chain"] == "VARCHAR"
    assert types["date"] == "DATE"
    if dataset in ("candles", "price_history"):
        assert types["interval"] == "BIGINT"
    # The hive columns appear once: they are not also stored in the files.
    assert list(types).count("chain") == 1 and list(types).count("date") == 1
    # Every row sits in the date partition of its time column.
    bad = con.execute(
        f"SELECT count(*) FROM ({sql}) WHERE CAST({TIME_COLUMN[dataset]} AT TIME ZONE 'UTC' AS DATE) <> date"
    ).fetchone()[0]
    assert bad == 0


@pytest.mark.parametrize("dataset", DATASETS)
def test_polars_reads_every_dataset(fixture_lake, dataset):
    root, counts, _ = fixture_lake
    frame = pl.scan_parquet(glob(root, dataset), hive_partitioning=True).collect()
    assert frame.height == counts[dataset]
    schema = frame.schema
    assert schema[TIME_COLUMN[dataset]] == pl.Datetime("us", "UTC")
    assert schema["chain"] == pl.String
    assert schema["date"] == pl.Date
    if dataset in ("candles", "price_history"):
        assert schema["interval"] == pl.Int64


@pytest.mark.parametrize("dataset", DATASETS)
def test_pyarrow_reads_every_dataset(fixture_lake, dataset):
    root, counts, _ = fixture_lake
    table = ds.dataset(root / dataset, format="parquet", partitioning="hive").to_table()
    assert table.num_rows == counts[dataset]
    time_type = table.schema.field(TIME_COLUMN[dataset]).type
    assert time_type == pa.timestamp("us", tz="UTC")
    assert pa.types.is_string(table.schema.field("chain").type)
    if dataset in ("candles", "price_history"):
        assert pa.types.is_integer(table.schema.field("interval").type)


def test_swap_values_in_all_three_readers(fixture_lake):
    root, _, records = fixture_lake
    want = {s["id"]: s for s in records["swaps"]}
    con, sql = duck(
        root, "swaps", "id, usd_amount_in, epoch_us(block_time), block_slot, swap_type, chain"
    )
    rows = con.execute(sql).fetchall()
    assert {r[0] for r in rows} == set(want)
    for sid, usd, block_time, slot, swap_type, chain in rows:
        w = want[sid]
        assert usd == w["usd_amount_in"]
        assert block_time == micros(w["block_time"])
        assert slot == w["block_slot"] and isinstance(slot, int)
        assert swap_type == w["swap_type"]
        assert chain == "altchain"
    assert "future_kind" in {r[4] for r in rows}

    frame = pl.scan_parquet(glob(root, "swaps"), hive_partitioning=True).collect()
    by_id = {r["id"]: r for r in frame.iter_rows(named=True)}
    for sid, w in want.items():
        assert by_id[sid]["token_amount_out"] == w["token_amount_out"]
        assert by_id[sid]["block_time"] == ts(w["block_time"])
        assert by_id[sid]["date"] == ts(w["block_time"]).date()

    table = ds.dataset(root / "swaps", format="parquet", partitioning="hive").to_table()
    got = dict(zip(table.column("id").to_pylist(), table.column("tx_hash").to_pylist()))
    assert got == {sid: w["tx_hash"] for sid, w in want.items()}


def test_files_are_sorted_by_time(fixture_lake):
    root, _, _ = fixture_lake
    for path in (root / "swaps").rglob("*.parquet"):
        times = pl.read_parquet(path)["block_time"]
        assert times.is_sorted()


def test_trade_and_candle_values(fixture_lake):
    root, _, records = fixture_lake
    con, sql = duck(root, "trades", "id, direction, position_state, usd_amount, native_amount")
    got = {r[0]: r[1:] for r in con.execute(sql).fetchall()}
    for t in records["trades"]:
        assert got[t["id"]] == (
            t["direction"],
            t["position_state"],
            t["usd_amount"],
            t["native_amount"],
        )

    candles = pl.scan_parquet(glob(root, "candles"), hive_partitioning=True).collect()
    by_time = {r["timestamp"]: r for r in candles.iter_rows(named=True)}
    for c in records["candles"]:
        row = by_time[ts(c["timestamp"])]
        assert (row["open"], row["close"], row["count"]) == (c["open"], c["close"], c["count"])
        assert row["interval"] == 60
        assert row["pool"] is None
    assert candles["count"].dtype == pl.Int64


def test_structs_are_reachable_by_dotted_path(fixture_lake):
    root, _, records = fixture_lake
    alt = {p["token_address"]: p for p in records["alt_profiles"]}

    con, sql = duck(
        root,
        "token_profiles",
        "token_address, market.liquidity, metrics['7d'].volume, "
        "metrics['7d'].wallet_roi_distribution.gt_500, metadata.symbol, market.holders",
        "WHERE chain = 'altchain'",
    )
    rows = con.execute(sql).fetchall()
    assert len(rows) == len(alt)
    for token, liquidity, volume, gt_500, symbol, holders in rows:
        p = alt[token]
        market = p.get("market") or {}
        assert liquidity == market.get("liquidity")
        assert holders == market.get("holders")
        assert holders is None or isinstance(holders, int)
        window = p["metrics"].get("7d")
        assert volume == (window or {}).get("volume")
        dist = (window or {}).get("wallet_roi_distribution") or {}
        assert gt_500 == dist.get("gt_500")
        assert symbol == (p.get("metadata") or {}).get("symbol")

    frame = (
        pl.scan_parquet(glob(root, "token_profiles"), hive_partitioning=True)
        .filter(pl.col("chain") == "altchain")
        .select(
            "token_address",
            pl.col("metrics").struct.field("1h").struct.field("avg_wallet_roi").alias("roi"),
            pl.col("market").struct.field("liquidity").alias("liq"),
        )
        .collect()
    )
    for row in frame.iter_rows(named=True):
        p = alt[row["token_address"]]
        assert row["roi"] == (p["metrics"].get("1h") or {}).get("avg_wallet_roi")
        assert row["liq"] == (p.get("market") or {}).get("liquidity")

    table = ds.dataset(root / "token_profiles", format="parquet", partitioning="hive").to_table()
    flat = table.flatten()
    assert "market.liquidity" in flat.column_names
    assert "metadata.symbol" in flat.column_names


def test_snapshots_and_evm_chains(fixture_lake):
    root, _, records = fixture_lake
    con, sql = duck(root, "prices", "chain, chain_id, token_address, usd_price, block_number, block_slot")
    rows = con.execute(sql).fetchall()
    evm = {(p["chain_id"], p["token_address"]): p for p in records["evm_prices"]}
    alt = {p["token_address"]: p for p in records["alt_prices"]}
    for chain, chain_id, token, price, number, slot in rows:
        if chain == "altchain":
            assert chain_id is None and number is None
            assert (price, slot) == (alt[token]["usd_price"], alt[token]["block_slot"])
        else:
            assert chain == f"evm-{chain_id}"
            assert (price, number) == (
                evm[(chain_id, token)]["usd_price"],
                evm[(chain_id, token)]["block_number"],
            )
            assert slot is None
    fetched = con.execute(f"SELECT DISTINCT epoch_us(fetched_at) FROM read_parquet('{glob(root, 'prices')}', hive_partitioning = true)").fetchall()
    assert fetched == [(micros(records["fetched_at"]),)]

    stats = pl.scan_parquet(glob(root, "price_stats"), hive_partitioning=True).collect()
    by_token = {(r["chain"], r["token_address"]): r for r in stats.iter_rows(named=True)}
    for s in records["alt_price_stats"]:
        row = by_token[("altchain", s["token_address"])]
        assert row["usd_price_change_30d"] == s["usd_price_change_30d"]
        assert row["usd_volume_5m"] == s["usd_volume_5m"]

    con, sql = duck(root, "portfolios", "wallet, value, len(tokens), tokens[1].token")
    got = {r[0]: r[1:] for r in con.execute(sql).fetchall()}
    for wallet, p in records["portfolios"]:
        first = p["tokens"][0]["token"] if p["tokens"] else None
        assert got[wallet] == (p["value"], len(p["tokens"]), first)

    hist = ds.dataset(root / "price_history", format="parquet", partitioning="hive").to_table()
    assert set(hist.column("chain").to_pylist()) == {"evm-1"}
    assert set(hist.column("chain_id").to_pylist()) == {1}
