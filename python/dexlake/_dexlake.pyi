"""The native module of dexlake: every answer is computed by the Rust engine; these classes
and functions only convert arguments and answers. The public API (:mod:`dexlake`) wraps them:
it turns each :class:`FrameStream` into a polars frame, instants into Unix microseconds and
an answer's warnings into Python warnings.
"""

from typing import Any, Callable, TypedDict, final

from typing_extensions import CapsuleType

# The version of the native module (the package's).
__version__: str

@final
class FrameStream:
    """One computed frame, to be read once through ``__arrow_c_stream__`` (the Arrow PyCapsule
    interface), so ``polars.DataFrame(stream)`` imports its arrays without copying. It is made
    by the engine only (it has no constructor)."""

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> CapsuleType:
        """The frame as an Arrow C stream capsule (``requested_schema`` is not supported and
        ignored, as the interface allows); a second read raises ``ValueError``, as does a
        frame without columns."""
    def __len__(self) -> int:
        """Rows of the frame."""

# A frame and its answer's warnings as (kind, text): kind "coverage" or "note".
_Answer = tuple[FrameStream, list[tuple[str, str]]]

class _VerifyAnswer(TypedDict):
    """What ``NativeLake.verify`` found."""

    ok: bool
    version: int
    files_checked: int
    rows: dict[str, int]
    problems: list[str]
    unreferenced: list[str]

@final
class NativeLake:
    """An open lake (``dexlake.Lake`` wraps it); instants are Unix microseconds, and every
    answer is computed with the GIL released."""

    def __new__(cls, root: str, create: bool = False, as_of: str | None = None) -> NativeLake:
        """Opens the lake at ``root`` (a folder or ``s3://bucket/prefix``): an existing one,
        or with ``create`` a new one when missing; with ``as_of`` (a version number or an RFC
        3339 time), pinned to that version."""
    @property
    def root(self) -> str:
        """The root the lake was opened at."""
    def views(self, engine: str) -> str:
        """The script of ``dexlake views`` for ``engine`` (``duckdb`` or ``spark``)."""
    @property
    def version(self) -> int:
        """The newest committed version the handle sees."""
    @staticmethod
    def datasets() -> list[str]:
        """The dataset names."""
    def scan_plan(
        self, dataset: str
    ) -> tuple[list[str], list[tuple[str, str]], list[str], FrameStream | None]:
        """What a scan of ``dataset`` reads: the committed files' locations (each checked
        against its manifest entry), the hive columns with their polars type names, the
        columns in order, and an empty frame of those columns when nothing is committed (else
        ``None``)."""
    def bars(
        self,
        token: str | None,
        tokens: list[str] | None,
        pool: str | None,
        all_tokens: bool,
        source: str,
        start: int | None,
        end: int | None,
        interval: int | None,
        ticks: int | None,
        base_volume: float | None,
        usd_volume: float | None,
        offset: int,
        closed: str,
        label: str,
        fill: str,
        tz: str | None,
        strict: bool,
        chain_id: int | None = None,
        series_interval: int | None = None,
    ) -> _Answer:
        """Time bars (``interval``) or tick, volume and dollar bars, as ``dexlake ohlcv``
        makes them, of exactly one of ``token``, ``tokens``, ``pool`` or ``all_tokens``;
        ``source`` ``"candles"`` or ``"price_history"`` (of ``chain_id``) resamples a stored
        series."""
    def price_stats(
        self,
        tokens: list[str],
        now: int | None,
        source: str,
        strict: bool,
        chain_id: int | None = None,
        series_interval: int | None = None,
    ) -> _Answer:
        """Price changes and volumes over 5m ... 30d at ``now``, as ``dexlake price-stats``
        gives them; ``source`` ``"price_history"`` (of ``chain_id``) reads a stored series."""
    def pnl(
        self,
        wallet: str | None,
        token: str | None,
        method: str,
        mark: str,
        oversell: str,
        dust: float,
        table: str,
        strict: bool,
    ) -> _Answer:
        """Wallet PnL as ``dexlake pnl`` gives it: one wallet, or every wallet when ``wallet``
        is ``None``; ``table`` is ``ledgers`` (one row per wallet and token), ``positions`` or
        ``lots``."""
    def leaderboard(
        self, top: int, method: str, mark: str, oversell: str, dust: float, strict: bool
    ) -> _Answer:
        """Wallets ranked by total PnL, the first ``top``, as ``dexlake pnl --top`` ranks
        them."""
    def performance(
        self,
        wallet: str,
        method: str,
        mark: str,
        oversell: str,
        dust: float,
        period: str,
        periods_per_year: float,
        risk_free: float,
        capital: float | None,
        curve: bool,
        strict: bool,
    ) -> _Answer:
        """One wallet's trading metrics (or, with ``curve``, its equity curve), as ``dexlake
        pnl --performance`` gives them."""
    def token_metrics(
        self, token: str, windows: list[str] | None, now: int | None, strict: bool
    ) -> _Answer:
        """The window metrics of one token (``windows``: ``None`` for the service's six), as
        ``dexlake token-metrics`` gives them."""
    def search(
        self, request: str, snapshot: int | None, strict: bool, chain_id: int | None
    ) -> tuple[str, list[tuple[str, str]]]:
        """A search-profiles request (JSON) answered from the lake's profile snapshot
        ``snapshot`` (``None``: the newest), as the service's JSON body ``{count, cursor,
        data}``, with the answer's warnings; with ``chain_id``, over that EVM chain's
        profiles."""
    def sql(self, query: str) -> _Answer:
        """The rows a SQL query selects from the lake's datasets, each a table of its
        committed files, as ``dexlake sql`` gives them."""
    def status(self) -> str:
        """What the lake covers (``dexlake status --format json``), as JSON."""
    def verify(self) -> _VerifyAnswer:
        """Checks the lake against its manifest (``dexlake verify``)."""
    def compact(self) -> tuple[int, int, int, dict[str, int]]:
        """Merges each partition's small files (``dexlake compact``): the partitions, files
        removed, files added and rows rewritten per dataset."""

@final
class NativeSimulator:
    """A running simulator of the service on 127.0.0.1 (``dexlake.Simulator`` wraps it)."""

    def __new__(
        cls,
        seed: int,
        scale: str,
        fail_rate: float,
        throttle_rate: float,
        rate_limit: float | None,
        live: bool,
        speed: float,
        manual: bool,
    ) -> NativeSimulator:
        """Generates the market of ``seed`` at ``scale`` and serves it on a free port;
        ``fail_rate`` and ``throttle_rate`` answer that share of requests 500 and 429,
        ``rate_limit`` allows that many requests per second per key; ``live`` keeps it trading
        on a clock of ``speed`` (``manual``: moved by ``advance`` only)."""
    @property
    def base_url(self) -> str:
        """The address of the service, such as ``http://127.0.0.1:41234``."""
    def catalog_json(self) -> str:
        """The market's tokens, pools and wallets, as JSON (a live market's at its clock)."""
    def now_micros(self) -> int | None:
        """The simulated instant, Unix microseconds; ``None`` once closed."""
    def advance(self, seconds: int) -> None:
        """Moves a live simulator's clock ``seconds`` forward."""
    @property
    def api_key(self) -> str:
        """The key the simulator accepts for every operation (``demo-key``)."""
    @property
    def running(self) -> bool:
        """Whether it still serves."""
    def close(self) -> None:
        """Stops serving (requests in flight finish). Closing twice does nothing."""

def sync(
    lake: NativeLake,
    jobs: str | None,
    plan: str | None,
    base_url: str,
    api_key: str | None,
    progress: Callable[[dict[str, Any]], object] | None,
    rps: float | None,
    concurrency: int | None,
    compact: bool,
) -> str:
    """Runs sync jobs into ``lake``: ``jobs`` (a JSON list of job objects) or the jobs of the
    TOML plan file ``plan``; calls ``progress(dict)`` about every 100 ms and once at the end,
    and returns the per-job report as JSON. A failed job raises its error, and Ctrl-C
    ``KeyboardInterrupt``, once the run has committed what it fetched; either carries the
    report (JSON) as its ``report`` attribute. Without ``compact``, the partitions the run
    wrote are not compacted at its end."""

def bars(
    events: object,
    source: str,
    interval: int | None,
    ticks: int | None,
    base_volume: float | None,
    usd_volume: float | None,
    offset: int,
    closed: str,
    label: str,
    fill: str,
    tz: str | None,
    data_end: int | None,
    unfetched: list[tuple[str, int, int]],
    tokens: list[str] | None,
    select_tokens: list[str] | None = None,
    pool: str | None = None,
    start: int | None = None,
    end: int | None = None,
) -> FrameStream:
    """Bars of every selected token of ``events`` (rows of the ``source`` dataset with
    ``__arrow_c_stream__``; every token, ``select_tokens`` or ``pool``'s, in ``[start, end)``
    µs), as ``dexlake ohlcv`` gives them of a lake holding these rows; ``data_end`` (µs) and
    the ``unfetched`` ranges (token, from µs, to µs) are the whole lake's; with ``tokens``,
    only their bars."""

def latest_event(
    events: object,
    source: str,
    select_tokens: list[str] | None = None,
    pool: str | None = None,
    start: int | None = None,
    end: int | None = None,
) -> int | None:
    """The latest time (µs) of the selected events of ``events`` as bars read them, or ``None``."""

def bars_options(
    interval: int | None,
    ticks: int | None,
    base_volume: float | None,
    usd_volume: float | None,
    offset: int,
    closed: str,
    label: str,
    fill: str,
    tz: str | None,
    split_seconds: int | None,
) -> bool:
    """Checks bars' options (and their split by time); whether they are time bars."""

def bar_rows(
    events: object,
    source: str,
    interval: int | None,
    ticks: int | None,
    base_volume: float | None,
    usd_volume: float | None,
    offset: int,
    closed: str,
    label: str,
    fill: str,
    tz: str | None,
    split_seconds: int | None,
    select_tokens: list[str] | None,
    pool: str | None,
    start: int | None,
    end: int | None,
) -> FrameStream:
    """``keep`` (the row can hold selected events) and ``part`` (µs: the row's part of the
    bars' grid with ``split_seconds``, else 0), a row each of ``events``."""

def pnl(
    trades: object,
    swaps: object | None,
    method: str,
    mark: str,
    oversell: str,
    dust: float,
    table: str,
    latest: dict[str, float] | None,
) -> FrameStream:
    """One PnL table of every wallet of ``trades`` (and of the ``swaps`` of wallets without
    trades), as ``dexlake pnl --all-wallets`` gives it; ``latest`` gives every token's latest
    price over the whole lake."""

def latest_prices(trades: object, swaps: object | None) -> FrameStream:
    """The latest price of each token of the PnL's events, with the event-order key of the
    event that set it (``token_address``, ``block_time``, ``block_slot``, ``id``, ``price``)."""

def token_metrics(trades: object, token: str, windows: list[str] | None, now: int | None) -> FrameStream:
    """The window metrics of ``token`` from ``trades``; ``now`` (µs) defaults to their latest trade."""

def bars_plan(
    lake: NativeLake,
    source: str,
    tokens: list[str] | None,
    start: int | None,
    end: int | None,
    strict: bool,
    pool: str | None = None,
) -> tuple[list[tuple[str, int, int]], list[tuple[str, str]], int]:
    """What bars computed in groups take from ``lake``: the ranges never fetched (token, from
    µs, to µs), the warnings as (kind, text) pairs, and the lake version."""
