"""dexlake from Python: the lake, its analytics, sync and the simulator, with polars frames.

Every answer is computed by dexlake's Rust engine (the same code as the ``dexlake`` command),
with the GIL released, and handed to polars through the Arrow C stream interface without
copying::

    import dexlake

    with dexlake.Simulator(seed=7) as sim:
        token = sim.catalog()["altchain"]["tokens"][0]["address"]
        lake = dexlake.Lake("lake", create=True)
        dexlake.sync(lake, jobs=[{"dataset": "swaps", "token": token}], base_url=sim.base_url)
    bars = lake.bars(token, interval=3600)          # a polars.DataFrame
    board = lake.leaderboard(top=10)

Instants (``start``, ``end``, ``now``, ``snapshot``) are ``datetime`` objects (naive ones are
UTC), ``date``s (midnight UTC), RFC 3339 strings or Unix seconds. Failures raise
:class:`DexlakeError` subclasses (see :mod:`dexlake.errors`); answers reading ranges the lake's
syncs never fetched warn with :class:`CoverageWarning`, or with ``strict=True`` raise
:class:`CoverageError`.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import polars as pl

from . import _dexlake
from .errors import (
    CoverageError,
    CoverageWarning,
    DamagedLakeError,
    DexlakeError,
    DexlakeInterrupted,
    DexlakeWarning,
    InvalidArgumentError,
    LakeBusyError,
    LakeError,
    NoDataError,
    ServiceError,
)

__all__ = [
    "Lake",
    "Simulator",
    "sync",
    "DexlakeError",
    "ServiceError",
    "LakeError",
    "DamagedLakeError",
    "LakeBusyError",
    "DexlakeInterrupted",
    "InvalidArgumentError",
    "CoverageError",
    "NoDataError",
    "DexlakeWarning",
    "CoverageWarning",
]

__version__: str = _dexlake.__version__

#: An instant: a datetime (naive is UTC), a date (midnight UTC), RFC 3339 text or Unix seconds.
Instant = Union[_dt.datetime, _dt.date, str, int, float]

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _micros(value: Optional[Instant], name: str) -> Optional[int]:
    """``value`` as Unix microseconds (``None`` stays ``None``); out of the engine's range is
    refused naming ``name``."""
    micros = _micros_unchecked(value, name)
    if micros is not None and not -_I64 <= micros < _I64:
        raise InvalidArgumentError(f"invalid {name}: {value!r} is outside the instants supported")
    return micros


def _micros_unchecked(value: Optional[Instant], name: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected a datetime, date, RFC 3339 string or Unix seconds, got bool")
    if isinstance(value, int):
        return value * 1_000_000
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidArgumentError(f"invalid {name}: {value} is not a finite number of seconds")
        return round(value * 1_000_000)
    if isinstance(value, str):
        text = value.strip()
        try:
            if text.lstrip("-").isdigit():
                return int(text) * 1_000_000
            if text.endswith(("Z", "z")):
                text = text[:-1] + "+00:00"
            value = _dt.datetime.fromisoformat(text)
        except ValueError:
            raise InvalidArgumentError(
                f"invalid {name}: {value!r} is not RFC 3339 or Unix seconds"
            ) from None
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        delta = value - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, _dt.date):
        return _micros_unchecked(_dt.datetime(value.year, value.month, value.day), name)
    raise TypeError(
        f"{name}: expected a datetime, date, RFC 3339 string or Unix seconds, "
        f"got {type(value).__name__}"
    )


def _text(value: Any, name: str, *, optional: bool = False) -> Optional[str]:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise TypeError(f"{name}: expected str, got {type(value).__name__}")
    return value


def _texts(value: Any, name: str) -> List[str]:
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
        raise TypeError(f"{name}: expected a list of str, got {type(value).__name__}")
    out = list(value)
    for v in out:
        if not isinstance(v, str):
            raise TypeError(f"{name}: expected a list of str, got an item of type {type(v).__name__}")
    return out


#: The integers the engine takes: 64-bit (``minimum=0``: unsigned).
_I64 = 2**63


def _integer(value: Any, name: str, *, optional: bool = False, minimum: Optional[int] = None) -> Optional[int]:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name}: expected int, got {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise InvalidArgumentError(f"invalid {name}: {value} is below {minimum}")
    if not -_I64 <= value < (2 * _I64 if minimum is not None and minimum >= 0 else _I64):
        raise InvalidArgumentError(f"invalid {name}: {value} is out of the 64-bit range")
    return value


def _number(value: Any, name: str, *, optional: bool = False) -> Optional[float]:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name}: expected a number, got {type(value).__name__}")
    return float(value)


def _mark(value: Any) -> str:
    """A PnL mark as the engine takes it: ``"latest"``, or a USD price as text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(float(value))
    return _text(value, "mark")  # type: ignore[return-value]


def _warn(notes: List[Tuple[str, str]], stacklevel: int) -> None:
    """An answer's warnings: ``coverage`` ones as :class:`CoverageWarning`, the others as
    :class:`DexlakeWarning`."""
    for kind, text in notes:
        warnings.warn(text, CoverageWarning if kind == "coverage" else DexlakeWarning, stacklevel=stacklevel + 1)


def _frame(answer: Tuple[Any, List[Tuple[str, str]]]) -> pl.DataFrame:
    """The polars frame of a native answer; its warnings are warned."""
    stream, notes = answer
    _warn(notes, stacklevel=3)
    return pl.DataFrame(stream)


def _as_of(value: Union[int, str, _dt.datetime, _dt.date, None]) -> Optional[str]:
    """``as_of`` as the text the engine parses (a version number or an RFC 3339 time)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError("as_of: expected a version number, a datetime or a string, got bool")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (_dt.datetime, _dt.date)):
        # The package's one reading of an instant (a naive datetime is UTC).
        instant = _EPOCH + _dt.timedelta(microseconds=_micros(value, "as_of"))
        return instant.isoformat()
    if isinstance(value, str):
        return value
    raise TypeError(
        f"as_of: expected a version number, a datetime or a string, got {type(value).__name__}"
    )


class Lake:
    """A dexlake lake: a folder, or ``s3://bucket/prefix`` (credentials and endpoint from the
    environment's AWS variables, as the CLI reads them).

    ``Lake(root)`` opens an existing lake and raises :class:`LakeError` when ``root`` is not
    one; ``Lake(root, create=True)`` creates it when missing (what :func:`sync` does).

    ``Lake(root, as_of=V)`` reads the lake as of an older version: ``V`` is a version number
    (as ``dexlake log`` shows it) or a time (a ``datetime``, or an RFC 3339 string: the last
    version committed at or before it). Every answer of that handle reads exactly the files and
    the sync state committed then, as ``--as-of`` does on the command line; a version a vacuum
    left behind raises :class:`InvalidArgumentError` naming the oldest readable one.
    """

    def __init__(
        self,
        root: Union[str, "os.PathLike[str]"],
        *,
        create: bool = False,
        as_of: Union[int, str, _dt.datetime, _dt.date, None] = None,
    ) -> None:
        if not isinstance(root, (str, os.PathLike)):
            raise TypeError(f"root: expected a path or an s3:// URL, got {type(root).__name__}")
        self._native = _dexlake.NativeLake(os.fspath(root), bool(create), _as_of(as_of))

    @property
    def root(self) -> str:
        """The folder or URL the lake was opened at."""
        return self._native.root

    @property
    def version(self) -> int:
        """The newest version committed to the lake that this handle sees (the commit of its
        log, as ``dexlake log`` numbers it); read anew at each access, so it moves when a sync
        commits. A CLI answer names the version it read (``note: lake version N``, and
        ``dexlake.version`` in a Parquet output's metadata)."""
        return self._native.version

    def __repr__(self) -> str:
        return f"dexlake.Lake({self.root!r})"

    def files(self, dataset: str) -> List[str]:
        """The files ``dataset`` commits at this handle's version (local paths, or ``s3://``
        URLs), each checked against its manifest entry: what :meth:`scan` reads. A glob of the
        dataset's folder also reads files no version commits now (files compactions replaced,
        kept for older versions until ``dexlake vacuum``; leftovers of interrupted writes)."""
        return list(self._native.scan_plan(_text(dataset, "dataset"))[0])

    def views(self, engine: str = "duckdb") -> str:
        """The script ``dexlake views --engine ENGINE`` prints: one view per dataset over
        exactly the committed files of this handle's version. ``duckdb.connect().execute(
        lake.views())`` defines ``swaps``, ``trades``, ... (a dataset without files gets a
        comment instead of a view); ``engine="spark"`` gives a PySpark script."""
        return self._native.views(_text(engine, "engine"))

    def scan(self, dataset: str) -> pl.LazyFrame:
        """A ``polars.LazyFrame`` over the committed files of ``dataset`` (never a glob: files
        of a commit in progress or left by an interrupted one are not read), with the hive
        columns ``chain``, ``interval`` (candles and price history) and ``date``.

        ``dataset`` is one of ``swaps``, ``trades``, ``candles``, ``price_history``,
        ``prices``, ``price_stats``, ``token_profiles``, ``portfolios`` or ``bars`` (the bars
        ``dexlake follow`` stored). A file changed since its
        commit is refused with :class:`LakeError`.
        """
        paths, hive, columns, empty = self._native.scan_plan(_text(dataset, "dataset"))
        if not paths:
            return pl.DataFrame(empty).lazy()
        frame = pl.scan_parquet(
            paths,
            hive_partitioning=True,
            hive_schema={name: getattr(pl, dtype) for name, dtype in hive},
            try_parse_hive_dates=True,
            glob=False,
        )
        return frame.select(columns)

    def bars(
        self,
        tokens: Union[str, Sequence[str], None] = None,
        interval: Optional[int] = None,
        source: str = "swaps",
        start: Optional[Instant] = None,
        end: Optional[Instant] = None,
        *,
        pool: Optional[str] = None,
        all_tokens: bool = False,
        ticks: Optional[int] = None,
        base_volume: Optional[float] = None,
        usd_volume: Optional[float] = None,
        tz: Optional[str] = None,
        fill: str = "skip",
        offset: int = 0,
        closed: str = "left",
        label: str = "left",
        strict: bool = False,
        chain_id: Optional[int] = None,
        series_interval: Optional[int] = None,
    ) -> pl.DataFrame:
        """OHLCV bars, as ``dexlake ohlcv`` computes them.

        Select one token (``tokens="T"``, the frame of ``--token``), a list (``tokens=[...]``,
        one long frame with ``token_address``, as ``--tokens``), a ``pool`` (swaps only) or
        ``all_tokens=True``; events from ``source`` (``"swaps"`` or ``"trades"``) in
        ``[start, end)``. ``source="candles"`` (altchain) or ``source="price_history"`` (the
        EVM chain ``chain_id``) resamples a stored series instead (time bars only; ``interval``
        a multiple of ``series_interval``, by default the finest stored one that divides it).

        Time bars are ``interval`` seconds wide (one minute when no rule is given), on a grid
        shifted by ``offset`` seconds, with ``closed`` and ``label`` sides
        (``"left"``/``"right"``), ``fill`` for empty buckets (``"skip"``, ``"null"``,
        ``"ffill"``) and ``tz``, an IANA zone for calendar-day bars. Instead, ``ticks=N`` makes
        a bar every N events, ``base_volume``/``usd_volume`` a bar whenever that much volume
        traded (tick, volume and dollar bars take no ``interval`` and none of the grid
        options, as ``dexlake ohlcv`` refuses them).

        Raises :class:`NoDataError` when nothing matched; warns (:class:`DexlakeWarning`)
        naming the listed tokens without events.
        """
        token: Optional[str] = None
        token_list: Optional[List[str]] = None
        if isinstance(tokens, str):
            token = tokens
        elif tokens is not None:
            token_list = _texts(tokens, "tokens")
        return _frame(
            self._native.bars(
                token,
                token_list,
                _text(pool, "pool", optional=True),
                bool(all_tokens),
                _text(source, "source"),
                _micros(start, "start"),
                _micros(end, "end"),
                _integer(interval, "interval", optional=True),
                _integer(ticks, "ticks", optional=True, minimum=0),
                _number(base_volume, "base_volume", optional=True),
                _number(usd_volume, "usd_volume", optional=True),
                _integer(offset, "offset"),
                _text(closed, "closed"),
                _text(label, "label"),
                _text(fill, "fill"),
                _text(tz, "tz", optional=True),
                bool(strict),
                _integer(chain_id, "chain_id", optional=True),
                _integer(series_interval, "series_interval", optional=True),
            )
        )

    def price_stats(
        self,
        tokens: Union[str, Sequence[str]],
        now: Optional[Instant] = None,
        *,
        source: str = "swaps",
        strict: bool = False,
        chain_id: Optional[int] = None,
        series_interval: Optional[int] = None,
    ) -> pl.DataFrame:
        """Price changes and volumes over 5m, 1h, 6h, 12h, 24h, 7d and 30d at ``now`` (default: the
        lake's latest event), one row per token, as ``dexlake price-stats`` gives them.

        ``source="price_history"`` computes them from the stored price history of the EVM chain
        ``chain_id`` (at ``series_interval``, by default the finest stored; ``now`` defaults to
        the end of its latest point's interval and must lie on its grid; periods the interval
        does not divide are null)."""
        token_list = [tokens] if isinstance(tokens, str) else _texts(tokens, "tokens")
        return _frame(
            self._native.price_stats(
                token_list,
                _micros(now, "now"),
                _text(source, "source"),
                bool(strict),
                _integer(chain_id, "chain_id", optional=True),
                _integer(series_interval, "series_interval", optional=True),
            )
        )

    def pnl(
        self,
        wallet: Optional[str] = None,
        method: str = "fifo",
        mark: Union[str, float] = "latest",
        *,
        token: Optional[str] = None,
        oversell: str = "zero-cost",
        dust: float = 0.0,
        table: str = "ledgers",
        strict: bool = False,
    ) -> pl.DataFrame:
        """Wallet PnL per (wallet, token), as ``dexlake pnl`` computes it: one ``wallet``, or
        every wallet of the lake when it is ``None`` (``--all-wallets``).

        ``method`` is the cost basis (``fifo``, ``lifo``, ``hifo``, ``avg``); ``mark`` prices
        the open quantity (``"latest"``: the token's latest trade price in the lake, or a USD
        price); ``oversell`` says what selling more than is held does (``error``,
        ``zero-cost``, ``ignore``); a position is open while above ``dust``. ``table`` picks
        ``"ledgers"`` (one row per wallet and token), ``"positions"`` or ``"lots"``.
        """
        return _frame(
            self._native.pnl(
                _text(wallet, "wallet", optional=True),
                _text(token, "token", optional=True),
                _text(method, "method"),
                _mark(mark),
                _text(oversell, "oversell"),
                _number(dust, "dust"),
                _text(table, "table"),
                bool(strict),
            )
        )

    def leaderboard(
        self,
        top: int = 20,
        *,
        method: str = "fifo",
        mark: Union[str, float] = "latest",
        oversell: str = "zero-cost",
        dust: float = 0.0,
        strict: bool = False,
    ) -> pl.DataFrame:
        """The ``top`` wallets by total PnL, as ``dexlake pnl --top`` ranks them (the PnL
        options as :meth:`pnl`)."""
        top = _integer(top, "top", minimum=0)
        return _frame(
            self._native.leaderboard(
                top, _text(method, "method"), _mark(mark), _text(oversell, "oversell"), _number(dust, "dust"), bool(strict)
            )
        )

    def performance(
        self,
        wallet: str,
        *,
        period: str = "1d",
        periods_per_year: float = 365.0,
        risk_free: float = 0.0,
        capital: Optional[float] = None,
        curve: bool = False,
        method: str = "fifo",
        mark: Union[str, float] = "latest",
        oversell: str = "zero-cost",
        dust: float = 0.0,
        strict: bool = False,
    ) -> pl.DataFrame:
        """One wallet's trading metrics (Sharpe, Sortino, drawdown, win rate, profit factor)
        of its equity curve marked every ``period``; with ``curve=True`` the curve itself.
        As ``dexlake pnl --performance [--curve]``."""
        return _frame(
            self._native.performance(
                _text(wallet, "wallet"),
                _text(method, "method"),
                _mark(mark),
                _text(oversell, "oversell"),
                _number(dust, "dust"),
                _text(period, "period"),
                _number(periods_per_year, "periods_per_year"),
                _number(risk_free, "risk_free"),
                _number(capital, "capital", optional=True),
                bool(curve),
                bool(strict),
            )
        )

    def token_metrics(
        self,
        token: str,
        windows: Union[str, Sequence[str], None] = None,
        *,
        now: Optional[Instant] = None,
        strict: bool = False,
    ) -> pl.DataFrame:
        """The 46 window metrics of ``token`` (buys, sells, volumes, traders, price changes
        ...) over each of ``windows`` (``"1h"``, ``"1d"``, ``"30d"``...; default the service's
        six) ending at ``now`` (default: the lake's latest trade), as ``dexlake
        token-metrics`` gives them."""
        if isinstance(windows, str):
            windows = [w for w in windows.split(",") if w.strip()] or None
        elif windows is not None:
            windows = _texts(windows, "windows")
        return _frame(self._native.token_metrics(_text(token, "token"), windows, _micros(now, "now"), bool(strict)))

    def search(
        self,
        request: Mapping[str, Any],
        *,
        snapshot: Optional[Instant] = None,
        strict: bool = False,
        chain_id: Optional[int] = None,
    ) -> Dict[str, Any]:
        """A search-profiles request (the service's body, as a dict) answered from the lake's
        profile snapshot, as the service answers it: ``{"count", "cursor", "data"}``.

        ``snapshot`` picks the snapshot fetched at that instant (default: the newest).
        ``chain_id`` searches that EVM chain's profiles instead of the altchain's (dexlake's
        extension, over the fields an EVM profile has; see ``dexlake search --chain-id``).
        """
        if not isinstance(request, Mapping):
            raise TypeError(f"request: expected a dict, got {type(request).__name__}")
        body, notes = self._native.search(
            json.dumps(dict(request)),
            _micros(snapshot, "snapshot"),
            bool(strict),
            _integer(chain_id, "chain_id", optional=True),
        )
        _warn(notes, stacklevel=2)
        return json.loads(body)

    def sql(self, query: str) -> pl.DataFrame:
        """The rows a SQL ``query`` (polars' SQL: one ``SELECT``, ``WITH`` or set operation)
        selects from the lake, as ``dexlake sql`` gives them: every dataset (``swaps``,
        ``trades``, ..., the follow's ``bars``) is a table of exactly its committed files,
        with the hive columns ``chain``, ``interval`` and ``date``; struct fields by path
        (``market.price``, ``metrics."1d".volume``). A statement that writes, several
        statements, an unknown table or column raise ``InvalidArgumentError``."""
        return _frame(self._native.sql(_text(query, "query")))

    def status(self) -> Dict[str, Any]:
        """What the lake covers, per dataset and per synced target (``dexlake status``)."""
        return json.loads(self._native.status())

    def verify(self) -> Dict[str, Any]:
        """Checks the lake against its manifest (``dexlake verify``): ``ok``, the manifest
        ``version``, ``files_checked``, ``rows`` per dataset, ``problems`` and, on an object
        store, ``unreferenced`` files of commits in progress or lost."""
        return dict(self._native.verify())

    def compact(self) -> Dict[str, Any]:
        """Merges each partition's small files in one atomic commit (``dexlake compact``):
        ``partitions``, ``files_removed``, ``files_added`` and ``rows`` rewritten per dataset."""
        partitions, removed, added, rows = self._native.compact()
        return {"partitions": partitions, "files_removed": removed, "files_added": added, "rows": dict(rows)}


def _json_default(value: Any) -> Any:
    if isinstance(value, (_dt.datetime, _dt.date)):
        micros = _micros(value, "jobs")
        t = _EPOCH + _dt.timedelta(microseconds=micros or 0)
        return t.isoformat().replace("+00:00", "Z")
    raise TypeError(f"jobs: {type(value).__name__} is not a job value (use str, numbers, lists, dicts, datetimes)")


class _Progress:
    """Draws the sync's progress on a terminal (one line on stderr) or in Jupyter (one
    updated output line)."""

    def __init__(self) -> None:
        self._handle: Any = None
        self._tty = False
        shell = sys.modules.get("IPython")
        ipython = getattr(shell, "get_ipython", lambda: None)() if shell else None
        if ipython is not None and type(ipython).__name__ == "ZMQInteractiveShell":
            from IPython.display import display  # type: ignore[import-not-found]

            self._handle = display("sync: starting", display_id=True)
        else:
            self._tty = bool(getattr(sys.stderr, "isatty", lambda: False)())

    @staticmethod
    def line(p: Mapping[str, Any]) -> str:
        return (
            f"sync: {p['jobs_done']}/{p['jobs_total']} jobs, {p['rows_fetched']:,} rows fetched, "
            f"{p['rows_added']:,} added, {p['requests']:,} requests"
        )

    def __call__(self, p: Mapping[str, Any]) -> None:
        text = self.line(p) + (" (done)" if p.get("finished") else "")
        if self._handle is not None:
            self._handle.update(text)
        elif self._tty:
            sys.stderr.write("\r" + text + ("\n" if p.get("finished") else ""))
            sys.stderr.flush()


def sync(
    lake: Union[Lake, str, "os.PathLike[str]"],
    jobs: Union[Sequence[Mapping[str, Any]], Mapping[str, Any], None] = None,
    plan: Union[str, "os.PathLike[str]", None] = None,
    base_url: Optional[str] = None,
    api_key: Optional[str] = None,
    progress: Union[bool, None, Callable[[Dict[str, Any]], None]] = True,
    *,
    rps: Optional[float] = None,
    concurrency: Optional[int] = None,
    compact: bool = True,
    service: Optional["Simulator"] = None,
) -> List[Dict[str, Any]]:
    """Fetches sync jobs into ``lake`` (a :class:`Lake`, or a path, created when missing), as
    ``dexlake sync`` does: incremental, resumable, committed in groups and compacted.

    ``jobs`` is a list of dicts with the keys of a plan file's ``[[job]]`` tables, for
    example ``{"dataset": "swaps", "token": T}`` or ``{"dataset": "alt-profiles", "request":
    {...}}``; or ``plan`` names a TOML plan file. ``base_url`` and ``api_key`` default to
    ``DEXLAKE_BASE_URL`` and ``DEXLAKE_API_KEY``; ``service``, a :class:`Simulator`, gives both
    (an ``api_key`` given too wins). ``progress`` draws a line on a terminal or in
    Jupyter (``False``: nothing; a callable gets a dict about every 100 ms). ``rps`` and
    ``concurrency`` limit the requests per second and in flight (a plan's own win when not
    given); ``compact=False`` leaves the partitions written uncompacted (``--no-compact``).

    Returns the per-job report: one dict per job with ``index``, ``job``, ``dataset``,
    ``outcome`` (``done``, ``interrupted``, ``not started``, ``failed``), ``rows_added``,
    ``rows_fetched``, ``requests``, ``error`` and ``status``. When a job fails, the others
    still run and commit, then the first failure is raised (:class:`ServiceError` with the
    HTTP ``status`` when the service refused it); Ctrl-C stops the run, commits what was
    fetched, and raises ``KeyboardInterrupt``. Either exception carries the per-job report as
    its ``report`` attribute.
    """
    if service is not None:
        if not isinstance(service, Simulator):
            raise TypeError(f"service: expected a dexlake.Simulator, got {type(service).__name__}")
        if base_url is not None:
            raise InvalidArgumentError("invalid base_url: give base_url or service, not both")
        base_url = service.base_url
        api_key = api_key if api_key is not None else service.api_key
    base_url = base_url if base_url is not None else os.environ.get("DEXLAKE_BASE_URL")
    if not base_url:
        raise InvalidArgumentError(
            "invalid base_url: no service address; pass base_url or set DEXLAKE_BASE_URL "
            "(dexlake.Simulator() serves a local one)"
        )
    _text(base_url, "base_url")
    api_key = api_key if api_key is not None else os.environ.get("DEXLAKE_API_KEY")
    _text(api_key, "api_key", optional=True)
    jobs_json: Optional[str] = None
    plan_path: Optional[str] = None
    if (jobs is None) == (plan is None):
        raise InvalidArgumentError("invalid jobs: give jobs or plan (one of them)")
    if jobs is not None:
        if isinstance(jobs, Mapping):
            jobs = [jobs]
        if isinstance(jobs, (str, bytes)) or not isinstance(jobs, Sequence):
            raise TypeError(f"jobs: expected a list of dicts, got {type(jobs).__name__}")
        for job in jobs:
            if not isinstance(job, Mapping):
                raise TypeError(f"jobs: expected a list of dicts, got an item of type {type(job).__name__}")
        jobs_json = json.dumps([dict(j) for j in jobs], default=_json_default)
    else:
        if not isinstance(plan, (str, os.PathLike)):
            raise TypeError(f"plan: expected a path, got {type(plan).__name__}")
        plan_path = os.fspath(plan)
        if not os.path.isfile(plan_path):
            raise FileNotFoundError(f"plan: no plan file at {plan_path}")
    if progress is True:
        callback: Optional[Callable[[Dict[str, Any]], None]] = _Progress()
    elif progress is False or progress is None:
        callback = None
    elif callable(progress):
        callback = progress
    else:
        raise TypeError(f"progress: expected a bool or a callable, got {type(progress).__name__}")
    rps_value = _number(rps, "rps", optional=True)
    concurrency_value = _integer(concurrency, "concurrency", optional=True, minimum=0)
    # Every argument is checked before a lake is created.
    if not isinstance(lake, Lake):
        lake = Lake(lake, create=True)
    try:
        body = _dexlake.sync(
            lake._native,
            jobs_json,
            plan_path,
            base_url,
            api_key,
            callback,
            rps_value,
            concurrency_value,
            bool(compact),
        )
    except (KeyboardInterrupt, DexlakeError) as stopped:
        report = getattr(stopped, "report", None)
        if isinstance(report, str):
            stopped.report = json.loads(report)  # type: ignore[union-attr]
        raise
    return json.loads(body)


class Simulator:
    """The service simulated on 127.0.0.1 (a free port): a deterministic market of ``seed``
    at ``scale`` (``tiny``, ``small``, ``medium``, ``large``; ``xlarge``, 100 million swaps
    whose generation takes about 5 GB of memory, is for benchmarks at the limit), for tests and
    notebooks.

    A context manager; :meth:`close` stops it. ``fail_rate`` and ``throttle_rate`` answer that
    share of requests 500 and 429; ``rate_limit`` allows that many requests per second per
    key. With ``live=True`` the market keeps trading after its fixed now (2025-06-01), on a
    clock running ``speed`` simulated seconds per real second, or with ``manual=True`` moving
    only by :meth:`advance` (``dexlake sim --live``; tiny, small and medium scales).
    """

    def __init__(
        self,
        seed: int = 7,
        scale: str = "tiny",
        *,
        fail_rate: float = 0.0,
        throttle_rate: float = 0.0,
        rate_limit: Optional[float] = None,
        live: bool = False,
        speed: float = 1.0,
        manual: bool = False,
    ) -> None:
        seed = _integer(seed, "seed", minimum=0)  # type: ignore[assignment]
        if manual and not live:
            raise InvalidArgumentError("invalid manual: a manual clock is a live simulator's (live=True)")
        self._native = _dexlake.NativeSimulator(
            seed,
            _text(scale, "scale"),
            _number(fail_rate, "fail_rate"),
            _number(throttle_rate, "throttle_rate"),
            _number(rate_limit, "rate_limit", optional=True),
            bool(live),
            _number(speed, "speed"),
            bool(manual),
        )
        self._live = bool(live)
        self._catalog: Optional[Dict[str, Any]] = None

    @property
    def base_url(self) -> str:
        """The service's address, such as ``http://127.0.0.1:41234``."""
        return self._native.base_url

    @property
    def api_key(self) -> str:
        """The key it accepts for every operation (``demo-key``): pass it as ``api_key``, or
        the simulator itself as ``dexlake.sync(..., service=sim)``."""
        return self._native.api_key

    @property
    def running(self) -> bool:
        """Whether it still serves."""
        return self._native.running

    def catalog(self) -> Dict[str, Any]:
        """The market: per chain family its tokens, pools and wallets (``["altchain"]
        ["tokens"][i]["address"]`` ...), and its ``now``; a live market's as of its clock."""
        if self._live:
            return json.loads(self._native.catalog_json())
        if self._catalog is None:
            self._catalog = json.loads(self._native.catalog_json())
        return self._catalog

    def now(self) -> Optional[_dt.datetime]:
        """The simulated instant the service answers at (UTC): the fixed now unless live;
        ``None`` once closed."""
        micros = self._native.now_micros()
        return None if micros is None else _EPOCH + _dt.timedelta(microseconds=micros)

    def advance(self, seconds: int) -> None:
        """Moves a live simulator's clock ``seconds`` forward (a manual clock moves only so);
        refused for a simulator that is not live."""
        self._native.advance(_integer(seconds, "seconds", minimum=0))

    def close(self) -> None:
        """Stops serving; requests in flight finish. Closing twice does nothing."""
        self._native.close()

    def __enter__(self) -> "Simulator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.running else "closed"
        return f"dexlake.Simulator({self.base_url!r}, {state})"
