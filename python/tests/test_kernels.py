"""dexlake.kernels over Arrow rows equal the lake's answers on the fixture lake: the rows of the
committed files, handed over as a pyarrow Table, a RecordBatch or a polars frame, give the
bars, PnL tables and token metrics the lake gives, bit for bit."""

import pyarrow as pa
import pyarrow.parquet as pq
import polars as pl
import pytest

import dexlake
import dexlake.kernels as kernels


@pytest.fixture(scope="module")
def lake(fixture_lake):
    return dexlake.Lake(fixture_lake[0])


def rows(lake, dataset):
    """The committed rows of `dataset` as one pyarrow table (without the hive columns)."""
    return pa.concat_tables([pq.ParquetFile(f).read() for f in lake.files(dataset)])


def test_bars_of_every_kind_equal_the_lakes(lake):
    unfetched, version = kernels.bars_plan(lake)
    assert version == lake.version
    for source in ["swaps", "trades"]:
        table = rows(lake, source)
        for options in [dict(interval=60), dict(interval=3600, offset=7), dict(interval=None, ticks=3)]:
            expected = lake.bars(all_tokens=True, source=source, **options)
            got = kernels.bars(table, source=source, unfetched=unfetched, **options)
            assert expected.height > 0
            assert got.equals(expected), f"{source} {options}"
        # A RecordBatch, a polars frame and Arrow out give the same.
        batch = table.combine_chunks().to_batches()[0]
        assert kernels.bars(batch, source=source, unfetched=unfetched).equals(got := kernels.bars(table, source=source, unfetched=unfetched))
        assert kernels.bars(pl.from_arrow(table), source=source, unfetched=unfetched).equals(got)
        assert pl.from_arrow(kernels.bars(table, source=source, unfetched=unfetched, arrow=True)).equals(got)


def test_pnl_tables_of_every_method_equal_the_lakes(lake):
    trades, swaps = rows(lake, "trades"), rows(lake, "swaps")
    for method in ["fifo", "lifo", "hifo", "avg"]:
        for table in ["ledgers", "positions", "lots"]:
            expected = lake.pnl(method=method, table=table)
            got = kernels.pnl(trades, swaps, method=method, table=table)
            assert expected.height > 0
            assert got.equals(expected), f"{method} {table}"


def test_pnl_by_wallet_with_the_whole_lakes_latest_prices_equals_the_lakes(lake):
    trades, swaps = pl.from_arrow(rows(lake, "trades")), pl.from_arrow(rows(lake, "swaps"))
    wallets = sorted(set(trades["wallet_address"]) | set(swaps["wallet_address"]))
    groups = [
        (trades.filter(pl.col("wallet_address") == w), swaps.filter(pl.col("wallet_address") == w))
        for w in wallets
    ]
    keys = pl.concat([kernels.latest_prices(t, s) for t, s in groups])
    latest = {
        r["token_address"]: r["price"]
        for r in keys.sort(["block_time", "block_slot", "id"]).group_by("token_address").last().to_dicts()
    }
    expected = lake.pnl()
    got = pl.concat([kernels.pnl(t, s, latest=latest) for t, s in groups])
    assert got.equals(expected)


def test_token_metrics_equal_the_lakes(lake):
    trades = rows(lake, "trades")
    token = trades.column("token_address")[0].as_py()
    expected = lake.token_metrics(token, ["1h", "1d"])
    assert kernels.token_metrics(trades, token, ["1h", "1d"]).equals(expected)


def test_rows_of_another_kind_are_refused(lake):
    with pytest.raises(TypeError, match="events"):
        kernels.bars([1, 2, 3])
    with pytest.raises(dexlake.InvalidArgumentError, match="source"):
        kernels.bars(rows(lake, "swaps"), source="candles")
    with pytest.raises(dexlake.DexlakeError):
        kernels.bars(rows(lake, "trades"), source="swaps")
