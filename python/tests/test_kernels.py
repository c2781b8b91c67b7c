"""dexlake.kernels over Arrow rows equal the lake's answers on the fixture lake: the rows of the
committed files, handed over as a pyarrow Table, a RecordBatch or a polars frame, give the
bars, PnL tables and token metrics the lake gives, bit for bit."""

import datetime

import pyarrow as pa
import pyarrow.compute  # noqa: F401
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


def test_selected_bars_equal_the_lakes_and_the_rows_kept_give_them(lake):
    """Tokens, a pool and a range select the events as lake.bars (dexlake ohlcv) does; the rows
    bar_rows keeps give the same bars, and its parts of the grid split them without change."""
    table = rows(lake, "swaps")
    frame = pl.from_arrow(table)
    token = sorted(frame["token_address_in"].unique())[0]
    pool = frame.group_by("pool_address").len().sort(["len", "pool_address"], descending=[True, False])[0, 0]
    times = sorted(int(t.timestamp()) for t in frame["block_time"])
    start, end = times[len(times) // 4], times[3 * len(times) // 4] + 1
    for selection, lake_selection in [
        (dict(select_tokens=[token], start=start, end=end), dict(tokens=[token], start=start, end=end)),
        (dict(pool=pool), dict(pool=pool)),
    ]:
        expected = lake.bars(**lake_selection, interval=60)
        plan, _ = kernels.bars_plan(lake, tokens=selection.get("select_tokens"), pool=selection.get("pool"),
                                    start=selection.get("start"), end=selection.get("end"))
        got = kernels.bars(table, 60, unfetched=plan, **selection)
        assert expected.height > 0 and got.equals(expected), selection
        keys = kernels.bar_rows(table, 60, split_seconds=120, **selection)
        assert keys.column_names == ["keep", "part"] and keys.num_rows == table.num_rows
        keep = keys.column("keep")
        assert 0 < pa.compute.sum(keep).as_py() < table.num_rows, f"{selection}: the rows kept prove nothing"
        kept = table.filter(keep)
        latest = kernels.latest_event(table, **selection)
        assert kernels.latest_event(kept, **selection) == latest
        data_end = datetime.datetime.fromtimestamp(0, datetime.timezone.utc) + datetime.timedelta(microseconds=latest + 1)
        parts = keys.column("part").filter(keep).to_pylist()
        assert all(p % 120_000_000 == 0 for p in parts) and len(set(parts)) > 1
        by_part = pl.concat([
            kernels.bars(kept.filter(pa.array([q == p for q in parts])), 60, unfetched=plan, data_end=data_end,
                         **selection)
            for p in sorted(set(parts))
        ])
        assert by_part.sort(["token_address", "timestamp"]).equals(got), f"{selection} by part"
    with pytest.raises(dexlake.InvalidArgumentError, match="trades carry no pool address"):
        kernels.bars(rows(lake, "trades"), 60, "trades", pool=pool)
    with pytest.raises(dexlake.InvalidArgumentError, match="invalid pool: not with tokens"):
        kernels.bars(table, select_tokens=[token], pool=pool)


SPLIT_REFUSALS = [
    (dict(interval=60, split_seconds=90), "give a positive multiple of interval"),
    (dict(split_seconds=-60), "give a positive multiple of interval"),
    (dict(ticks=5, split_seconds=600), "tick, volume and dollar bars depend on every event before them"),
    (dict(base_volume=2.0, split_seconds=600), "tick, volume and dollar bars depend on every event before them"),
    (dict(fill="null", split_seconds=600), "a filled bucket depends on the bar before it"),
    (dict(closed="right", split_seconds=600), "buckets closed on the right do not start on the grid's instants"),
    (dict(interval=86400, tz="UTC", split_seconds=86400), "calendar days of a time zone do not start on the epoch grid"),
]


@pytest.mark.parametrize("options,reason", SPLIT_REFUSALS)
def test_a_split_the_bars_do_not_allow_is_refused(lake, options, reason):
    for call in (lambda: kernels.bars_options(**options), lambda: kernels.bar_rows(rows(lake, "swaps"), **options)):
        with pytest.raises(dexlake.InvalidArgumentError) as refused:
            call()
        assert str(refused.value) == f"invalid split_seconds: {reason}"


def test_no_rule_is_one_minute_bars_and_an_interval_beside_ticks_is_refused(lake):
    table = rows(lake, "swaps")
    assert kernels.bars(table).equals(kernels.bars(table, 60))
    assert kernels.bars_options() is True and kernels.bars_options(ticks=3) is False
    for call in (lambda: kernels.bars(table, 60, ticks=3), lambda: lake.bars(all_tokens=True, interval=60, ticks=3),
                 lambda: kernels.bars_options(60, usd_volume=10.0)):
        with pytest.raises(dexlake.InvalidArgumentError, match=r"invalid interval: not with (ticks|usd_volume)"):
            call()
    assert lake.bars(all_tokens=True, ticks=3).equals(kernels.bars(table, ticks=3))
