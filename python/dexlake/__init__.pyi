"""dexlake from Python: the lake, its analytics, sync and the simulator, with polars frames.

Every answer is computed by dexlake's Rust engine with the GIL released and handed to polars
without copying. Instants are ``datetime`` objects (naive ones are UTC), ``date``s (midnight
UTC), RFC 3339 strings or Unix seconds. Failures raise :class:`DexlakeError` subclasses;
answers reading ranges the lake's syncs never fetched warn with :class:`CoverageWarning`, or
with ``strict=True`` raise :class:`CoverageError`.
"""

import datetime as _dt
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import polars as pl

from .errors import CoverageError as CoverageError
from .errors import CoverageWarning as CoverageWarning
from .errors import DamagedLakeError as DamagedLakeError
from .errors import DexlakeError as DexlakeError
from .errors import DexlakeInterrupted as DexlakeInterrupted
from .errors import DexlakeWarning as DexlakeWarning
from .errors import InvalidArgumentError as InvalidArgumentError
from .errors import LakeBusyError as LakeBusyError
from .errors import LakeError as LakeError
from .errors import NoDataError as NoDataError
from .errors import ServiceError as ServiceError

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

# The version of the package (the native module's).
__version__: str

# An instant: a datetime (naive is UTC), a date (midnight UTC), RFC 3339 text or Unix seconds.
Instant = Union[_dt.datetime, _dt.date, str, int, float]

class Lake:
    """A dexlake lake: a folder, or ``s3://bucket/prefix`` (credentials and endpoint from the
    environment's AWS variables). ``Lake(root)`` opens an existing lake and raises
    :class:`LakeError` when ``root`` is not one; ``Lake(root, create=True)`` creates it when
    missing.
    """

    def __init__(
        self,
        root: Union[str, os.PathLike[str]],
        *,
        create: bool = False,
        as_of: Union[int, str, _dt.datetime, _dt.date, None] = None,
    ) -> None:
        """Opens the lake at ``root`` (a path or an ``s3://`` URL); with ``create=True``
        creates it when missing, else raises :class:`LakeError` when it is not a lake. With
        ``as_of`` (a version number, a datetime or an RFC 3339 time: the last version committed
        at or before it), every answer reads the lake as of that version; a version a vacuum
        left behind raises :class:`InvalidArgumentError` naming the oldest readable one."""
    @property
    def root(self) -> str:
        """The folder or URL the lake was opened at."""
    @property
    def version(self) -> int:
        """The newest version committed to the lake that this handle sees (the commit of its
        log, as ``dexlake log`` numbers it); read anew at each access, so it moves when a sync
        commits."""
    def __repr__(self) -> str:
        """``dexlake.Lake(root)``."""
    def files(self, dataset: str) -> List[str]:
        """The files ``dataset`` commits at this handle's version: what :meth:`scan` reads."""
    def views(self, engine: str = "duckdb") -> str:
        """The script of ``dexlake views``: one view per dataset over the committed files."""
    def scan(self, dataset: str) -> pl.LazyFrame:
        """A ``polars.LazyFrame`` over the committed files of ``dataset`` (``swaps``,
        ``trades``, ``candles``, ``price_history``, ``prices``, ``price_stats``,
        ``token_profiles``, ``portfolios`` or ``bars``), never files of an unfinished commit, with the
        hive columns ``chain``, ``interval`` and ``date``; a file changed since its commit
        raises :class:`LakeError`."""
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
        """OHLCV bars as ``dexlake ohlcv`` computes them, of one token, a list of tokens (one
        long frame with ``token_address``), a ``pool`` (swaps only) or ``all_tokens=True``,
        from ``source`` (``"swaps"`` or ``"trades"``) events in ``[start, end)``, or resampled
        from a stored series (``"candles"``, or ``"price_history"`` of ``chain_id``; time
        bars only, ``interval`` a multiple of ``series_interval``): time bars
        ``interval`` seconds wide (one minute when no rule is given; grid ``offset``, ``closed`` and ``label`` sides, ``fill``
        of empty buckets, ``tz`` for calendar days), or instead a bar every ``ticks`` events
        or every ``base_volume``/``usd_volume`` traded. Raises :class:`NoDataError` when
        nothing matched; warns with :class:`DexlakeWarning` naming listed tokens without
        events."""
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
        lake's latest event), one row per token, as ``dexlake price-stats`` gives them;
        ``source="price_history"`` computes them from the stored price history of the EVM chain
        ``chain_id`` (at ``series_interval``, by default the finest stored)."""
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
        """Wallet PnL per (wallet, token) as ``dexlake pnl`` computes it, of one ``wallet`` or
        every wallet when it is ``None``: ``method`` is the cost basis (``fifo``, ``lifo``,
        ``hifo``, ``avg``), ``mark`` prices the open quantity (``"latest"`` or a USD price),
        ``oversell`` says what selling more than is held does (``error``, ``zero-cost``,
        ``ignore``), a position is open while above ``dust``, and ``table`` picks
        ``"ledgers"``, ``"positions"`` or ``"lots"``."""
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
        of its equity curve marked every ``period``, or with ``curve=True`` the curve itself,
        as ``dexlake pnl --performance [--curve]``."""
    def token_metrics(
        self,
        token: str,
        windows: Union[str, Sequence[str], None] = None,
        *,
        now: Optional[Instant] = None,
        strict: bool = False,
    ) -> pl.DataFrame:
        """The window metrics of ``token`` (buys, sells, volumes, traders, price changes ...)
        over each of ``windows`` (``"1h"``, ``"1d"``, ...; default the service's six) ending at
        ``now`` (default: the lake's latest trade), as ``dexlake token-metrics`` gives
        them."""
    def search(
        self,
        request: Mapping[str, Any],
        *,
        snapshot: Optional[Instant] = None,
        strict: bool = False,
        chain_id: Optional[int] = None,
    ) -> Dict[str, Any]:
        """A search-profiles request (the service's body, as a dict) answered from the lake's
        profile snapshot fetched at ``snapshot`` (default: the newest), as the service answers
        it: ``{"count", "cursor", "data"}``; ``chain_id`` searches that EVM chain's profiles
        (dexlake's extension)."""
    def sql(self, query: str) -> pl.DataFrame:
        """The rows a SQL ``query`` (polars' SQL: one ``SELECT``, ``WITH`` or set operation)
        selects from the lake, as ``dexlake sql`` gives them: every dataset (``swaps``,
        ``trades``, ..., the follow's ``bars``) is a table of exactly its committed files,
        with the hive columns ``chain``, ``interval`` and ``date``; struct fields by path
        (``market.price``, ``metrics."1d".volume``). A statement that writes, several
        statements, an unknown table or column raise ``InvalidArgumentError``."""
    def status(self) -> Dict[str, Any]:
        """What the lake covers, per dataset and per synced target (``dexlake status``)."""
    def verify(self) -> Dict[str, Any]:
        """Checks the lake against its manifest (``dexlake verify``): ``ok``, ``version``,
        ``files_checked``, ``rows`` per dataset, ``problems`` and ``unreferenced`` files."""
    def compact(self) -> Dict[str, Any]:
        """Merges each partition's small files in one atomic commit (``dexlake compact``):
        ``partitions``, ``files_removed``, ``files_added`` and ``rows`` per dataset."""

def sync(
    lake: Union[Lake, str, os.PathLike[str]],
    jobs: Union[Sequence[Mapping[str, Any]], Mapping[str, Any], None] = None,
    plan: Union[str, os.PathLike[str], None] = None,
    base_url: Optional[str] = None,
    api_key: Optional[str] = None,
    progress: Union[bool, None, Callable[[Dict[str, Any]], None]] = True,
    *,
    rps: Optional[float] = None,
    concurrency: Optional[int] = None,
    compact: bool = True,
    service: Optional[Simulator] = None,
) -> List[Dict[str, Any]]:
    """Fetches sync jobs into ``lake`` (a :class:`Lake`, or a path, created when missing) as
    ``dexlake sync`` does: ``jobs`` (dicts with the keys of a plan's ``[[job]]`` tables) or a
    TOML ``plan`` file, from ``base_url`` with ``api_key`` (default ``DEXLAKE_BASE_URL`` and
    ``DEXLAKE_API_KEY``; ``service``, a :class:`Simulator`, gives both), drawing ``progress`` (or calling it with a dict about every 100 ms),
    with at most ``rps`` requests per second and ``concurrency`` in flight (default: the
    plan's), compacting the partitions written unless ``compact=False``. Returns one report
    dict per job; when a job fails the others still run and commit, then
    the first failure is raised, and Ctrl-C raises ``KeyboardInterrupt``, either carrying the
    report as its ``report`` attribute."""

class Simulator:
    """The service simulated on 127.0.0.1 (a free port): a deterministic market of ``seed`` at
    ``scale`` (``tiny``, ``small``, ``medium``, ``large``), for tests and notebooks; a context
    manager, stopped by :meth:`close`."""

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
        """Starts serving the market of ``seed`` at ``scale``; ``fail_rate`` and
        ``throttle_rate`` answer that share of requests 500 and 429, ``rate_limit`` allows
        that many requests per second per key; ``live`` keeps the market trading on a clock
        of ``speed`` simulated seconds a second (``manual``: moved by :meth:`advance`)."""
    @property
    def base_url(self) -> str:
        """The service's address, such as ``http://127.0.0.1:41234``."""
    @property
    def api_key(self) -> str:
        """The key it accepts for every operation (``demo-key``)."""
    @property
    def running(self) -> bool:
        """Whether it still serves."""
    def catalog(self) -> Dict[str, Any]:
        """The market: per chain family its tokens, pools and wallets
        (``["altchain"]["tokens"][i]["address"]`` ...)."""
    def now(self) -> Optional[_dt.datetime]:
        """The simulated instant the service answers at (UTC); ``None`` once closed."""
    def advance(self, seconds: int) -> None:
        """Moves a live simulator's clock ``seconds`` forward."""
    def close(self) -> None:
        """Stops serving; requests in flight finish. Closing twice does nothing."""
    def __enter__(self) -> Simulator:
        """The simulator itself."""
    def __exit__(self, *exc: object) -> None:
        """Closes the simulator."""
    def __repr__(self) -> str:
        """``dexlake.Simulator(base_url, running|closed)``."""
