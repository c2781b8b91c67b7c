"""dexlake's answers computed by Spark over a lake's committed files, with dexlake's kernels.

Spark reads exactly the files a lake version commits (its commit log, never a glob of the
folders), groups the rows (by token for bars and token metrics, by a hash of the wallet for the
PnL), and hands each group to :mod:`dexlake.kernels` with ``applyInArrow`` (pyspark 4): the
bar, PnL and metrics rules are dexlake's own code, run inside the executors, so a Spark answer equals
the CLI's row for row and bit for bit::

    from pyspark.sql import SparkSession
    import dexlake.spark

    spark = SparkSession.builder.getOrCreate()
    bars = dexlake.spark.bars(spark, "lake", interval=60)      # dexlake ohlcv --all-tokens
    pnl = dexlake.spark.pnl(spark, "lake", method="hifo")       # dexlake pnl --all-wallets

What a group cannot know is decided once on the driver or from every group: the ranges the
lake never fetched (the lake's coverage, read on the driver), the end of the data (the latest
event of every group), every token's latest price for the PnL's mark (the greatest event of
every group), the metrics' ``now`` (the lake's latest trade).

Executors need only the ``dexlake`` package (see python/README.md, "Spark").
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import Lake, _micros, _text
from . import kernels as _kernels

__all__ = ["bars", "pnl", "token_metrics", "events"]

#: A lake: a ``dexlake.Lake`` (pinned with ``as_of`` or not), or its folder or URL.
LakeLike = Union[Lake, str, Any]

_KEY = "_dexlake_key"
_PART = "_dexlake_part"


def _instant(micros: Optional[int]) -> Optional[_dt.datetime]:
    """Unix microseconds as the exact UTC instant the kernels take."""
    if micros is None:
        return None
    return _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(microseconds=int(micros))


def _lake(lake: LakeLike, as_of: Any) -> Lake:
    if isinstance(lake, Lake):
        if as_of is not None:
            raise ValueError("as_of: give it to dexlake.Lake(root, as_of=...), not with a Lake")
        return lake
    return Lake(lake, as_of=as_of)


def _spark_path(path: str, s3_scheme: str) -> str:
    """A committed file's location as Spark's Hadoop file systems name it."""
    if path.startswith("s3://") and s3_scheme != "s3":
        return f"{s3_scheme}://" + path[len("s3://"):]
    return path


def events(spark: Any, lake: LakeLike, dataset: str, *, as_of: Any = None, s3_scheme: str = "s3a") -> Any:
    """A Spark DataFrame of exactly the files ``dataset`` commits at the lake's version (a
    pinned ``dexlake.Lake``, or ``as_of``), or ``None`` when it commits none. ``s3://`` files
    are read as ``s3_scheme://`` (``s3a`` needs the hadoop-aws jar; ``"s3"`` keeps them, as
    EMR and Databricks read them)."""
    handle = _lake(lake, as_of)
    files = handle.files(_text(dataset, "dataset"))
    if not files:
        return None
    return spark.read.parquet(*[_spark_path(f, s3_scheme) for f in files])


def _empty(spark: Any, handle: Lake, dataset: str) -> Any:
    """An empty Spark DataFrame of ``dataset``'s columns (a lake without its files)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = handle.scan(dataset).limit(0).collect().to_arrow().schema
    return spark.createDataFrame([], schema=from_arrow_schema(_plain_schema(schema)))


def _plain_type(t: Any) -> Any:
    """An Arrow type Spark takes: string views and large strings as strings, unsigned integers
    as signed 64-bit ones, nested types type by type."""
    import pyarrow as pa

    if pa.types.is_string_view(t) or pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_unsigned_integer(t):
        return pa.int64()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _plain_type(f.type), f.nullable) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return pa.list_(_plain_type(t.value_type))
    return t


def _plain_schema(schema: Any) -> Any:
    import pyarrow as pa

    return pa.schema([pa.field(f.name, _plain_type(f.type), True) for f in schema])


def _answer_schema(kernel: Callable[..., Any], *empty: Any) -> Tuple[Any, Any]:
    """The Arrow schema of ``kernel``'s answers (run on empty groups on the driver) as Spark
    takes it, and the Spark schema."""
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = _plain_schema(kernel(*empty).schema)
    return schema, from_arrow_schema(schema)


def bars(
    spark: Any,
    lake: LakeLike,
    interval: Optional[int] = None,
    *,
    source: str = "swaps",
    tokens: Union[str, Sequence[str], None] = None,
    pool: Optional[str] = None,
    start: Any = None,
    end: Any = None,
    ticks: Optional[int] = None,
    base_volume: Optional[float] = None,
    usd_volume: Optional[float] = None,
    tz: Optional[str] = None,
    fill: str = "skip",
    offset: int = 0,
    closed: str = "left",
    label: str = "left",
    split_seconds: Optional[int] = None,
    strict: bool = False,
    as_of: Any = None,
    s3_scheme: str = "s3a",
) -> Any:
    """The bars of every selected token of the lake's ``source`` events as a Spark DataFrame,
    row for row those of ``dexlake ohlcv`` with the same options (as
    :meth:`dexlake.Lake.bars` takes them; one minute when no rule is given), in no particular
    order (sort by ``token_address``, ``timestamp``): of every token (``--all-tokens``), of
    a list of ``tokens`` (``--tokens``; one address is a list of one), or of the token of a
    ``pool``'s swaps (``--pool``), in ``[start, end)`` (``--from``, ``--to``). The rows are
    selected before they move (dexlake's selection, run per partition), and the selection is
    checked as ``dexlake ohlcv`` checks it.

    Rows are grouped by token (a swap goes to the group of each of its two tokens; each group
    keeps its own token's bars). ``split_seconds`` also splits a token's time bars by time, in
    runs of ``split_seconds`` of whole buckets of the bars' grid, so one very active token
    needs not fit one executor: it must be a multiple of ``interval``, and is refused for
    tick, volume and dollar bars (a bar's events depend on every event before it), with
    ``fill`` (a filled bucket depends on the bar before it, in another part), with
    ``closed="right"`` and with a time zone (their buckets do not start on the epoch grid's
    instants)."""
    shape = dict(
        ticks=ticks, base_volume=base_volume, usd_volume=usd_volume, tz=tz, fill=fill, offset=offset,
        closed=closed, label=label,
    )
    # The options and the split are checked (and refused) on the driver, before any job.
    time_bars = _kernels.bars_options(interval, split_seconds=split_seconds, **shape)
    handle = _lake(lake, as_of)
    source = _text(source, "source")  # type: ignore[assignment]
    if isinstance(tokens, str):
        tokens = [tokens]
    selection = dict(select_tokens=tokens, pool=pool, start=start, end=end)
    ranges, _version = _kernels.bars_plan(handle, source, strict=strict, tokens=tokens, pool=pool, start=start, end=end)
    frame = events(spark, handle, source, s3_scheme=s3_scheme)
    if frame is None:
        frame = _empty(spark, handle, source)
    empty = frame.limit(0).toArrow()
    # The selection is checked on the driver too, as the groups will read it.
    _kernels.bar_rows(empty, interval, source, split_seconds=split_seconds, **shape, **selection)
    unfetched: Dict[str, List[Tuple[str, int, int]]] = {}
    for token, since, until in ranges:
        unfetched.setdefault(token, []).append((token, since, until))

    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    # Each partition's rows that can hold selected events, with their part (dexlake's grid).
    def selected(batches: Any) -> Any:
        import pyarrow as pa

        for batch in batches:
            rows = _kernels.bar_rows(batch, interval, source, split_seconds=split_seconds, **shape, **selection)
            kept = batch.filter(rows.column("keep").combine_chunks())
            parts = rows.column("part").filter(rows.column("keep")).combine_chunks()
            yield pa.RecordBatch.from_arrays(
                list(kept.columns) + [parts], schema=kept.schema.append(pa.field(_PART, pa.int64()))
            )

    parted = frame.mapInArrow(selected, StructType(frame.schema.fields + [StructField(_PART, LongType())]))
    data_end = None
    if time_bars:
        # The end of the data is the instant after the latest selected event of every group.
        latest = _latest_event(parted.drop(_PART), source, selection)
        data_end = _instant(None if latest is None else latest + 1)

    if source == "swaps":
        keyed = parted.withColumn(_KEY, F.col("token_address_in")).unionByName(
            parted.filter(F.col("token_address_out") != F.col("token_address_in")).withColumn(
                _KEY, F.col("token_address_out")
            )
        )
    else:
        keyed = parted.withColumn(_KEY, F.col("token_address"))

    def kernel(table: Any, token: Optional[str] = None) -> Any:
        return _kernels.bars(
            table, interval, source, data_end=data_end, unfetched=unfetched.get(token or "", []),
            tokens=None if token is None else [token], arrow=True, **shape, **selection,
        )

    arrow_schema, spark_schema = _answer_schema(kernel, empty)

    def group(key: Tuple[Any, ...], table: Any) -> Any:
        token = key[0].as_py() if hasattr(key[0], "as_py") else key[0]
        return kernel(table.drop_columns([_KEY, _PART]), token).cast(arrow_schema)

    return keyed.groupBy(_KEY, _PART).applyInArrow(group, spark_schema)


def _latest_event(frame: Any, source: str, selection: Dict[str, Any]) -> Optional[int]:
    """The latest selected event time (µs) of the rows of ``frame``, as bars read them: each
    partition's by the kernel, then the greatest."""
    import pyarrow as pa

    def latest(batches: Any) -> Any:
        best = None
        for batch in batches:
            t = _kernels.latest_event(pa.Table.from_batches([batch]), source, **selection)
            if t is not None and (best is None or t > best):
                best = t
        yield pa.RecordBatch.from_pydict({"latest": [best]}, schema=pa.schema([("latest", pa.int64())]))

    row = frame.mapInArrow(latest, "latest long").agg({"latest": "max"}).collect()
    return None if not row else row[0][0]


def pnl(
    spark: Any,
    lake: LakeLike,
    method: str = "fifo",
    mark: Union[str, float] = "latest",
    *,
    oversell: str = "zero-cost",
    dust: float = 0.0,
    table: str = "ledgers",
    wallet_groups: int = 1024,
    as_of: Any = None,
    s3_scheme: str = "s3a",
) -> Any:
    """One PnL table of every wallet of the lake as a Spark DataFrame, row for row that of
    ``dexlake pnl --all-wallets`` with the same options (as :meth:`dexlake.Lake.pnl` takes
    them), in no particular order (sort by ``wallet_address``, ``token_address``).

    The wallets are dealt into ``wallet_groups`` groups by a hash of their address; each
    group's trades and swaps (``cogroup``) go to the kernel at once, every wallet's ledgers
    computed whole (a group per wallet would cost a Python call per wallet: on 10M trades of
    150,000 wallets that alone took over 20 minutes in ``local[1]``). Raise it when a group
    does not fit an executor. With ``mark="latest"`` every token's latest price is found
    first, the greatest event of every group's :func:`dexlake.kernels.latest_prices`."""
    handle = _lake(lake, as_of)
    trades = events(spark, handle, "trades", s3_scheme=s3_scheme)
    if trades is None:
        trades = _empty(spark, handle, "trades")
    swaps = events(spark, handle, "swaps", s3_scheme=s3_scheme)
    if swaps is None:
        swaps = _empty(spark, handle, "swaps")
    if isinstance(wallet_groups, bool) or not isinstance(wallet_groups, int) or wallet_groups < 1:
        raise _invalid("wallet_groups", f"{wallet_groups!r}: give a whole number of groups, at least 1")
    trades, swaps = _wallet_keyed(trades, wallet_groups), _wallet_keyed(swaps, wallet_groups)
    latest = None
    if isinstance(mark, str) and mark.strip().lower() == "latest":
        latest = _latest_prices(trades, swaps)
    options = dict(method=method, mark=mark, oversell=oversell, dust=dust, table=table)

    def kernel(t: Any, s: Any) -> Any:
        return _kernels.pnl(t, s, latest=latest, arrow=True, **options)

    arrow_schema, spark_schema = _answer_schema(
        kernel, _unkeyed(trades.limit(0).toArrow()), _unkeyed(swaps.limit(0).toArrow())
    )

    def group(t: Any, s: Any) -> Any:
        return kernel(_unkeyed(t), _unkeyed(s)).cast(arrow_schema)

    return trades.groupBy(_KEY).cogroup(swaps.groupBy(_KEY)).applyInArrow(group, spark_schema)


def _wallet_keyed(frame: Any, groups: int) -> Any:
    """``frame`` with its wallet's group number in the key column."""
    from pyspark.sql import functions as F

    return frame.withColumn(_KEY, F.pmod(F.xxhash64("wallet_address"), F.lit(groups)))


def _unkeyed(table: Any) -> Any:
    """An Arrow table of a keyed frame without its key column."""
    return table.drop_columns([_KEY]) if _KEY in table.column_names else table


def _latest_prices(trades: Any, swaps: Any) -> Dict[str, float]:
    """Every token's latest price over the lake (frames keyed by :func:`_wallet_keyed`): each
    group's latest events, then per token the price of the greatest (block_time, block_slot,
    id)."""
    from pyspark.sql import functions as F

    schema = "token_address string, block_time long, block_slot long, id long, price double"

    def group(t: Any, s: Any) -> Any:
        return _kernels.latest_prices(_unkeyed(t), _unkeyed(s), arrow=True).cast(_latest_arrow_schema())

    keyed = trades.groupBy(_KEY).cogroup(swaps.groupBy(_KEY)).applyInArrow(group, schema)
    rows = (
        keyed.groupBy("token_address")
        .agg(F.max_by("price", F.struct("block_time", "block_slot", "id")).alias("price"))
        .collect()
    )
    return {r["token_address"]: r["price"] for r in rows}


def _latest_arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [("token_address", pa.string()), ("block_time", pa.int64()), ("block_slot", pa.int64()),
         ("id", pa.int64()), ("price", pa.float64())]
    )


def token_metrics(
    spark: Any,
    lake: LakeLike,
    windows: Union[str, Sequence[str], None] = None,
    *,
    now: Any = None,
    as_of: Any = None,
    s3_scheme: str = "s3a",
) -> Any:
    """The window metrics of every token of the lake's trades as a Spark DataFrame, one row
    per (token, window), as ``dexlake token-metrics`` gives them token by token; ``now``
    defaults to the lake's latest trade (of any token). Rows are grouped by token."""
    from pyspark.sql import functions as F

    handle = _lake(lake, as_of)
    trades = events(spark, handle, "trades", s3_scheme=s3_scheme)
    if trades is None:
        trades = _empty(spark, handle, "trades")
    at = _micros(now, "now")
    if at is None:
        at = trades.agg(F.max(F.unix_micros(F.col("block_time")))).collect()[0][0]
    at = _instant(at)
    if isinstance(windows, str):
        windows = [w for w in windows.split(",") if w.strip()] or None

    def kernel(table: Any, token: str) -> Any:
        return _kernels.token_metrics(table, token, windows, now=at, arrow=True)

    empty = trades.limit(0).toArrow()
    arrow_schema, spark_schema = _answer_schema(kernel, empty, "schema")

    def group(key: Tuple[Any, ...], table: Any) -> Any:
        token = key[0].as_py() if hasattr(key[0], "as_py") else key[0]
        return kernel(table, token).cast(arrow_schema)

    return trades.groupBy("token_address").applyInArrow(group, spark_schema)
