"""dexlake's answers over rows held in memory: the kernels a distributed engine calls per group.

Each function takes rows of the lake's schema (``swaps`` or ``trades``, as the lake's Parquet
files hold them) as any object with ``__arrow_c_stream__``: a ``pyarrow.Table`` or
``RecordBatch``, a polars ``DataFrame``... The rows are imported over the Arrow C stream
interface without copying their numbers, and the answer is computed by dexlake's engine (the
code of the lake's query past its reader: the same token sides, event order, bar kernels,
ledgers and metrics) with the GIL released. Answers are polars frames, or with
``arrow=True`` ``pyarrow.Table``\\ s::

    import pyarrow.parquet as pq
    import dexlake.kernels as k

    swaps = pq.read_table("some-swaps.parquet")
    bars = k.bars(swaps, interval=60)             # every token's 1-minute bars

A frame holding all the lake's rows answers exactly what the lake answers (``dexlake ohlcv
--all-tokens``, ``dexlake pnl --all-wallets``). A group holding some of them needs what only
the whole lake knows, passed in: the end of the data (``data_end``) and the ranges never
fetched (``unfetched``, from :func:`bars_plan`) for time bars, every token's latest price for
the PnL's mark (``latest``, from :func:`latest_prices` of every group), the metrics' ``now``.
:mod:`dexlake.spark` does exactly that.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import polars as pl

from . import Instant, Lake, _dexlake, _integer, _mark, _micros, _number, _text, _texts, _warn

__all__ = ["bars", "bars_options", "latest_event", "bar_rows", "pnl", "latest_prices", "token_metrics", "bars_plan"]

#: Ranges never fetched, as (token, from, to) in Unix microseconds, half-open.
Unfetched = Sequence[Tuple[str, int, int]]


def _rows(value: Any, name: str) -> Any:
    """Rows for the engine: anything with ``__arrow_c_stream__``; a pyarrow ``RecordBatch``
    without it (older pyarrow) becomes a one-batch table."""
    if hasattr(value, "__arrow_c_stream__"):
        return value
    if hasattr(value, "__arrow_c_array__") and hasattr(value, "schema"):
        import pyarrow as pa

        return pa.Table.from_batches([value])
    raise TypeError(
        f"{name}: expected rows with __arrow_c_stream__ (a pyarrow Table or RecordBatch, a "
        f"polars DataFrame), got {type(value).__name__}"
    )


def _out(stream: Any, arrow: bool) -> Any:
    if arrow:
        import pyarrow as pa

        return pa.table(stream)
    return pl.DataFrame(stream)


def bars(
    events: Any,
    interval: Optional[int] = None,
    source: str = "swaps",
    *,
    ticks: Optional[int] = None,
    base_volume: Optional[float] = None,
    usd_volume: Optional[float] = None,
    tz: Optional[str] = None,
    fill: str = "skip",
    offset: int = 0,
    closed: str = "left",
    label: str = "left",
    data_end: Optional[Instant] = None,
    unfetched: Optional[Unfetched] = None,
    tokens: Optional[Sequence[str]] = None,
    arrow: bool = False,
    select_tokens: Optional[Sequence[str]] = None,
    pool: Optional[str] = None,
    start: Optional[Instant] = None,
    end: Optional[Instant] = None,
) -> Any:
    """The bars of every token of ``events`` (rows of ``source``, ``"swaps"`` or ``"trades"``),
    with ``token_address`` first, as ``dexlake ohlcv --all-tokens`` gives them of a lake
    holding these rows: time bars ``interval`` seconds wide (one minute when no rule is
    given), or a bar every ``ticks`` events, or each time ``base_volume`` or ``usd_volume``
    traded; the time options as :meth:`dexlake.Lake.bars` takes them. ``select_tokens`` (a
    list), ``pool`` and ``start``/``end`` select the events as ``dexlake ohlcv --tokens``,
    ``--pool``, ``--from`` and ``--to`` do. ``data_end`` (default: the instant after the
    latest selected event, at most ``end``) flags the bars reaching it ``incomplete``;
    ``unfetched`` names the ranges the lake never fetched (no bar meets one). With
    ``tokens``, only their bars are kept (the token side of a swap is still the one the
    selection reads)."""
    stream = _dexlake.bars(
        _rows(events, "events"),
        _text(source, "source"),
        *_shape(interval, ticks, base_volume, usd_volume, offset, closed, label, fill, tz),
        _micros(data_end, "data_end"),
        [(str(t), int(a), int(b)) for t, a, b in (unfetched or [])],
        None if tokens is None else _texts(tokens, "tokens"),
        *_selected(select_tokens, pool, start, end),
    )
    return _out(stream, arrow)


def _selected(tokens: Optional[Sequence[str]], pool: Optional[str], start: Any, end: Any) -> Tuple[Any, ...]:
    """A selection's arguments for the native kernels: tokens, pool, start and end (µs)."""
    return (
        None if tokens is None else _texts(tokens, "select_tokens"),
        _text(pool, "pool", optional=True),
        _micros(start, "start"),
        _micros(end, "end"),
    )


def latest_event(
    events: Any,
    source: str = "swaps",
    *,
    select_tokens: Optional[Sequence[str]] = None,
    pool: Optional[str] = None,
    start: Optional[Instant] = None,
    end: Optional[Instant] = None,
) -> Optional[int]:
    """The latest time (Unix microseconds) of the selected events of ``events`` as bars read
    them (the token sides of swaps; the selection as :func:`bars` takes it), or ``None``; the
    end of the data of bars computed in groups is the instant after the latest of every
    group's."""
    return _dexlake.latest_event(
        _rows(events, "events"), _text(source, "source"), *_selected(select_tokens, pool, start, end)
    )


def bars_options(
    interval: Optional[int] = None,
    *,
    ticks: Optional[int] = None,
    base_volume: Optional[float] = None,
    usd_volume: Optional[float] = None,
    tz: Optional[str] = None,
    fill: str = "skip",
    offset: int = 0,
    closed: str = "left",
    label: str = "left",
    split_seconds: Optional[int] = None,
) -> bool:
    """Checks bars' options as :func:`bars` checks them, and with ``split_seconds`` their split
    by time as :func:`bar_rows` does, before any row is read (refusals raise
    :class:`dexlake.InvalidArgumentError`); ``True`` for time bars (the end of the data, ``data_end``,
    applies to them), ``False`` for tick, volume and dollar bars."""
    return _dexlake.bars_options(*_shape(interval, ticks, base_volume, usd_volume, offset, closed, label, fill, tz),
                                 _integer(split_seconds, "split_seconds", optional=True))


def _shape(interval: Any, ticks: Any, base_volume: Any, usd_volume: Any, offset: Any, closed: Any, label: Any,
           fill: Any, tz: Any) -> Tuple[Any, ...]:
    """Bars' options for the native kernels."""
    return (
        _integer(interval, "interval", optional=True),
        _integer(ticks, "ticks", optional=True, minimum=0),
        _number(base_volume, "base_volume", optional=True),
        _number(usd_volume, "usd_volume", optional=True),
        _integer(offset, "offset"),
        _text(closed, "closed"),
        _text(label, "label"),
        _text(fill, "fill"),
        _text(tz, "tz", optional=True),
    )


def bar_rows(
    events: Any,
    interval: Optional[int] = None,
    source: str = "swaps",
    *,
    ticks: Optional[int] = None,
    base_volume: Optional[float] = None,
    usd_volume: Optional[float] = None,
    tz: Optional[str] = None,
    fill: str = "skip",
    offset: int = 0,
    closed: str = "left",
    label: str = "left",
    split_seconds: Optional[int] = None,
    select_tokens: Optional[Sequence[str]] = None,
    pool: Optional[str] = None,
    start: Optional[Instant] = None,
    end: Optional[Instant] = None,
) -> Any:
    """Where each row of ``events`` goes on its way to the groups of :func:`bars`, as a
    ``pyarrow.Table`` of two columns, a row each: ``keep`` (the row can hold selected events;
    the selection as :func:`bars` takes it) and ``part`` (with ``split_seconds``, the first
    instant, Unix microseconds, of the part of the time bars' grid the row falls in: runs of
    ``split_seconds`` of whole buckets, so each part's bars are the whole's; else 0).

    A split is refused (:class:`dexlake.InvalidArgumentError` naming ``split_seconds``) for
    tick, volume and dollar bars, with a ``fill``, buckets closed on the right, a time zone,
    and a width that is not a positive multiple of the interval."""
    stream = _dexlake.bar_rows(
        _rows(events, "events"),
        _text(source, "source"),
        *_shape(interval, ticks, base_volume, usd_volume, offset, closed, label, fill, tz),
        _integer(split_seconds, "split_seconds", optional=True),
        *_selected(select_tokens, pool, start, end),
    )
    return _out(stream, True)


def pnl(
    trades: Any,
    swaps: Any = None,
    method: str = "fifo",
    mark: Union[str, float] = "latest",
    *,
    oversell: str = "zero-cost",
    dust: float = 0.0,
    table: str = "ledgers",
    latest: Optional[Mapping[str, float]] = None,
    arrow: bool = False,
) -> Any:
    """One PnL table (``"ledgers"``, ``"positions"`` or ``"lots"``) of every wallet of
    ``trades``, and of the ``swaps`` of wallets without trades, as ``dexlake pnl
    --all-wallets`` gives it of a lake holding these rows (method, mark, oversell and dust as
    :meth:`dexlake.Lake.pnl` takes them). Rows holding some wallets whole give those wallets'
    rows of the lake's table when ``latest`` maps every token to its latest price over the
    whole lake (the mark ``"latest"`` reads it)."""
    stream = _dexlake.pnl(
        _rows(trades, "trades"),
        None if swaps is None else _rows(swaps, "swaps"),
        _text(method, "method"),
        _mark(mark),
        _text(oversell, "oversell"),
        _number(dust, "dust"),
        _text(table, "table"),
        None if latest is None else {str(t): float(p) for t, p in latest.items()},
    )
    return _out(stream, arrow)


def latest_prices(trades: Any, swaps: Any = None, *, arrow: bool = False) -> Any:
    """The latest price of each token of the PnL's events (``trades``, and ``swaps`` of wallets
    without trades) with the event that set it: ``token_address``, ``block_time``,
    ``block_slot``, ``id`` (the event-order key) and ``price``. Over groups of whole wallets,
    a token's latest price is the one of its greatest key."""
    stream = _dexlake.latest_prices(_rows(trades, "trades"), None if swaps is None else _rows(swaps, "swaps"))
    return _out(stream, arrow)


def token_metrics(
    trades: Any,
    token: str,
    windows: Union[str, Sequence[str], None] = None,
    *,
    now: Optional[Instant] = None,
    arrow: bool = False,
) -> Any:
    """The window metrics of ``token`` from ``trades`` (other tokens' rows are left out), as
    ``dexlake token-metrics`` gives them of a lake holding these trades; ``now`` defaults to
    the latest trade of ``trades`` (the lake's default is its latest trade of any token)."""
    if isinstance(windows, str):
        windows = [w for w in windows.split(",") if w.strip()] or None
    elif windows is not None:
        windows = _texts(windows, "windows")
    stream = _dexlake.token_metrics(_rows(trades, "trades"), _text(token, "token"), windows, _micros(now, "now"))
    return _out(stream, arrow)


def bars_plan(
    lake: Lake,
    source: str = "swaps",
    *,
    strict: bool = False,
    tokens: Optional[Sequence[str]] = None,
    pool: Optional[str] = None,
    start: Optional[Instant] = None,
    end: Optional[Instant] = None,
) -> Tuple[List[Tuple[str, int, int]], int]:
    """What bars of the selected tokens (every token, ``tokens``, or the token of ``pool``'s
    swaps, in ``[start, end)``) of ``lake``'s ``source`` events computed in groups take from
    the lake besides its rows: the ranges its syncs never fetched, as (token, from, to) in
    Unix microseconds (for :func:`bars`' ``unfetched``), and the lake version the plan read.
    The selection is checked as ``dexlake ohlcv`` checks it. Coverage warnings are warned
    (``strict=True`` raises :class:`dexlake.CoverageError`)."""
    if not isinstance(lake, Lake):
        raise TypeError(f"lake: expected a dexlake.Lake, got {type(lake).__name__}")
    selected_tokens, pool, start, end = _selected(tokens, pool, start, end)
    ranges, notes, version = _dexlake.bars_plan(
        lake._native, _text(source, "source"), selected_tokens, start, end, bool(strict), pool
    )
    _warn(notes, stacklevel=2)
    return [tuple(r) for r in ranges], version  # type: ignore[misc]
