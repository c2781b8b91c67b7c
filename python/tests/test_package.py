"""The `dexlake` Python package against the `dexlake` CLI on the same lakes.

One lake is synced from the simulator through `dexlake.sync` (swaps, trades and candles of
three tokens, profiles); every answer of `dexlake.Lake` must equal the CLI's answer on that
lake (frames compared with `DataFrame.equals` after the CLI wrote them as Parquet, JSON
compared as JSON). Then errors, Ctrl-C during a sync, a lake on moto's S3, the GIL, and the
polars version range.
"""

import datetime as dt
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import polars as pl
import pytest

import dexlake

API_KEY = "demo-key"
TIMEOUT = 120  # seconds for one CLI command


def cli(*args, lake=None, env=None, check=True):
    """Runs the dexlake binary; returns the completed process."""
    binary = os.environ.get("DEXLAKE_BIN")
    if not binary:
        pytest.fail("DEXLAKE_BIN must name the dexlake binary (run the tests with `make py-test`)")
    cmd = [binary] + (["--lake", str(lake)] if lake is not None else []) + [str(a) for a in args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    if check and out.returncode != 0:
        pytest.fail(f"`{' '.join(cmd)}` exited {out.returncode}:\n{out.stderr}")
    return out


def cli_frame(tmp_path, lake, *args):
    """The CLI's answer written as Parquet and read back with polars."""
    out = tmp_path / f"cli-{time.monotonic_ns()}.parquet"
    cli(*args, "--format", "parquet", "--out", out, lake=lake)
    return pl.read_parquet(out)


def assert_same(mine, theirs):
    assert mine.columns == theirs.columns, (mine.columns, theirs.columns)
    assert mine.schema == theirs.schema, (mine.schema, theirs.schema)
    assert mine.height > 0
    assert mine.equals(theirs), (mine, theirs)


@pytest.fixture(scope="module")
def market(tmp_path_factory):
    """A lake synced through the package from a running simulator, and the market's names."""
    root = tmp_path_factory.mktemp("package") / "lake"
    with dexlake.Simulator(seed=7, scale="tiny") as sim:
        catalog = sim.catalog()
        tokens = [t["address"] for t in catalog["altchain"]["tokens"][:3]]
        now = catalog["now"]
        jobs = []
        for token in tokens:
            jobs.append({"dataset": "swaps", "token": token})
            jobs.append({"dataset": "trades", "token": token})
        jobs.append(
            {"dataset": "candles", "token": tokens[0], "interval": 3600,
             "from": dt.datetime.fromisoformat(now.replace("Z", "+00:00")) - dt.timedelta(days=5)}
        )
        jobs.append({"dataset": "alt-profiles", "request": {"options": {"include_market": True, "include_metadata": True}}})
        report = dexlake.sync(root, jobs=jobs, base_url=sim.base_url, api_key=API_KEY, progress=False)
    assert [j["outcome"] for j in report] == ["done"] * len(jobs), report
    lake = dexlake.Lake(root)
    trades = lake.scan("trades").collect()
    wallet = trades.group_by("wallet_address").len().sort(["len", "wallet_address"], descending=[True, False])["wallet_address"][0]
    return {"root": root, "lake": lake, "tokens": tokens, "wallet": wallet, "report": report}


# --- every answer equals the CLI's ---------------------------------------------------------


def test_sync_reports_each_job_and_the_lake_holds_its_rows(market):
    lake, report = market["lake"], market["report"]
    added = {}
    for job in report:
        assert set(job) >= {"index", "job", "dataset", "outcome", "rows_added", "rows_fetched", "requests", "error", "status"}
        added[job["dataset"]] = added.get(job["dataset"], 0) + job["rows_added"]
    rows = lake.verify()["rows"]
    assert rows["swaps"] == added["swaps"] > 0
    assert rows["trades"] == added["trades"] > 0
    assert rows["token_profiles"] == added["token_profiles"] > 0


@pytest.mark.parametrize(
    "kwargs, flags",
    [
        ({"interval": 3600}, ["--interval", "3600"]),
        ({"interval": 300, "fill": "ffill", "offset": 60}, ["--interval", "300", "--fill", "ffill", "--offset", "60"]),
        ({"interval": 900, "fill": "null", "closed": "right", "label": "right"}, ["--interval", "900", "--fill", "null", "--closed", "right", "--label", "right"]),
        ({"interval": 86400, "tz": "America/New_York"}, ["--interval", "86400", "--tz", "America/New_York"]),
        ({"interval": 3600, "source": "trades"}, ["--interval", "3600", "--source", "trades"]),
        ({"ticks": 25}, ["--ticks", "25"]),
        ({"base_volume": 1e9}, ["--base-volume", "1e9"]),
        ({"usd_volume": 500.0}, ["--usd-volume", "500"]),
    ],
)
def test_bars_of_one_token_equal_the_cli(market, tmp_path, kwargs, flags):
    token = market["tokens"][0]
    mine = market["lake"].bars(token, **kwargs)
    assert_same(mine, cli_frame(tmp_path, market["root"], "ohlcv", "--token", token, *flags))


def test_bars_of_a_list_a_range_and_every_token_equal_the_cli(market, tmp_path):
    lake, root, tokens = market["lake"], market["root"], market["tokens"]
    mine = lake.bars(tokens[:2], interval=600, start="2025-05-01T00:00:00Z", end=dt.datetime(2025, 5, 20))
    theirs = cli_frame(tmp_path, root, "ohlcv", "--tokens", ",".join(tokens[:2]), "--interval", "600",
                       "--from", "2025-05-01T00:00:00Z", "--to", "2025-05-20T00:00:00Z")
    assert_same(mine, theirs)
    assert set(mine["token_address"]) == set(tokens[:2])
    # Unix seconds mean the same instants.
    start = int(dt.datetime(2025, 5, 1, tzinfo=dt.timezone.utc).timestamp())
    end = int(dt.datetime(2025, 5, 20, tzinfo=dt.timezone.utc).timestamp())
    assert lake.bars(tokens[:2], interval=600, start=start, end=end).equals(mine)
    every = lake.bars(all_tokens=True, interval=3600)
    assert_same(every, cli_frame(tmp_path, root, "ohlcv", "--all-tokens", "--interval", "3600"))
    assert set(every["token_address"]) >= set(tokens)


@pytest.mark.filterwarnings("ignore::dexlake.CoverageWarning")
def test_bars_of_the_stored_candles_equal_the_cli(market, tmp_path):
    lake, root, token = market["lake"], market["root"], market["tokens"][0]
    mine = lake.bars(token, interval=86400, source="candles", fill="ffill")
    flags = ["--token", token, "--interval", "86400", "--source", "candles", "--fill", "ffill"]
    assert_same(mine, cli_frame(tmp_path, root, "ohlcv", *flags))
    assert mine["vwap"].null_count() == mine.height
    # The CSV holds the same bars.
    csv = cli("ohlcv", *flags, "--format", "csv", lake=root).stdout.splitlines()
    assert len(csv) == mine.height + 1
    assert csv[0].split(",") == mine.columns
    # The series interval asked for, and the refusals.
    assert lake.bars(token, interval=86400, source="candles", fill="ffill", series_interval=3600).equals(mine)
    with pytest.raises(dexlake.InvalidArgumentError, match="5400 s"):
        lake.bars(token, interval=5400, source="candles", series_interval=3600)
    with pytest.raises(dexlake.InvalidArgumentError, match="chain_id"):
        lake.bars(token, interval=3600, source="price_history")
    with pytest.raises(dexlake.InvalidArgumentError, match="chain_id"):
        lake.bars(token, interval=3600, chain_id=1)
    with pytest.raises(dexlake.NoDataError, match="price_history of chain 1"):
        lake.bars(token, interval=3600, source="price_history", chain_id=1)


def test_price_stats_equal_the_cli(market, tmp_path):
    tokens = market["tokens"]
    mine = market["lake"].price_stats(tokens)
    assert_same(mine, cli_frame(tmp_path, market["root"], "price-stats", "--tokens", ",".join(tokens)))
    at = "2025-05-20T12:00:00Z"
    mine = market["lake"].price_stats(tokens, now=at, source="trades")
    assert_same(mine, cli_frame(tmp_path, market["root"], "price-stats", "--tokens", ",".join(tokens), "--now", at, "--source", "trades"))


def test_price_stats_of_the_stored_price_history_equal_the_cli(tmp_path):
    root = tmp_path / "lake"
    with dexlake.Simulator(seed=7, scale="tiny") as sim:
        catalog = sim.catalog()
        tokens = [t["address"] for t in catalog["evm"]["1"]["tokens"][:2]]
        now = dt.datetime.fromisoformat(catalog["now"].replace("Z", "+00:00"))
        job = {"dataset": "price-history", "chain_id": 1, "tokens": tokens, "interval": 3600,
               "from": now - dt.timedelta(days=3), "to": now}
        report = dexlake.sync(root, jobs=[job], base_url=sim.base_url, api_key=API_KEY, progress=False)
    assert [j["outcome"] for j in report] == ["done"], report
    lake = dexlake.Lake(root)
    flags = ["price-stats", "--tokens", ",".join(tokens), "--source", "price-history", "--chain-id", "1"]
    mine = lake.price_stats(tokens, source="price_history", chain_id=1)
    assert_same(mine, cli_frame(tmp_path, root, *flags))
    # An hourly series: no 5m figures; its default now is the end of its latest point.
    assert mine["usd_volume_5m"].null_count() == mine.height
    assert mine["block_time"].max() == now
    at = now - dt.timedelta(days=1)
    earlier = lake.price_stats(tokens, now=at, source="price_history", chain_id=1, series_interval=3600)
    assert_same(earlier, cli_frame(tmp_path, root, *flags, "--now", str(int(at.timestamp())), "--series-interval", "3600"))
    with pytest.raises(dexlake.InvalidArgumentError, match="chain_id"):
        lake.price_stats(tokens, source="price_history")
    with pytest.raises(dexlake.InvalidArgumentError, match="not on the grid"):
        lake.price_stats(tokens, now=at + dt.timedelta(minutes=5), source="price_history", chain_id=1)
    with pytest.raises(dexlake.InvalidArgumentError, match="source"):
        lake.price_stats(tokens, source="candles")


@pytest.mark.parametrize(
    "kwargs, flags",
    [
        ({}, []),
        ({"method": "hifo"}, ["--method", "hifo"]),
        ({"method": "avg", "mark": 0.000001}, ["--method", "avg", "--mark", "0.000001"]),
        ({"table": "positions", "method": "lifo"}, ["--positions", "--method", "lifo"]),
        ({"table": "lots"}, ["--lots"]),
    ],
)
def test_pnl_of_a_wallet_equals_the_cli(market, tmp_path, kwargs, flags):
    wallet = market["wallet"]
    mine = market["lake"].pnl(wallet, **kwargs)
    assert_same(mine, cli_frame(tmp_path, market["root"], "pnl", "--wallet", wallet, *flags))


def test_pnl_of_every_wallet_the_leaderboard_and_performance_equal_the_cli(market, tmp_path):
    lake, root, wallet = market["lake"], market["root"], market["wallet"]
    with pytest.warns(dexlake.CoverageWarning):
        every = lake.pnl()
    assert_same(every, cli_frame(tmp_path, root, "pnl", "--all-wallets"))
    with pytest.warns(dexlake.CoverageWarning):
        positions = lake.pnl(table="positions", token=market["tokens"][1])
    assert_same(positions, cli_frame(tmp_path, root, "pnl", "--all-wallets", "--positions", "--token", market["tokens"][1]))
    with pytest.warns(dexlake.CoverageWarning):
        board = lake.leaderboard(top=7, method="fifo")
    assert_same(board, cli_frame(tmp_path, root, "pnl", "--top", "7"))
    assert board["rank"].to_list() == list(range(1, 8))
    metrics = lake.performance(wallet, period="1h", periods_per_year=8760)
    assert_same(metrics, cli_frame(tmp_path, root, "pnl", "--wallet", wallet, "--performance", "--period", "1h", "--periods-per-year", "8760"))
    curve = lake.performance(wallet, curve=True)
    assert_same(curve, cli_frame(tmp_path, root, "pnl", "--wallet", wallet, "--performance", "--curve"))


def test_token_metrics_equal_the_cli(market, tmp_path):
    token = market["tokens"][0]
    mine = market["lake"].token_metrics(token, ["1h", "1d", "30d"])
    assert_same(mine, cli_frame(tmp_path, market["root"], "token-metrics", "--token", token, "--window", "1h,1d,30d"))
    assert market["lake"].token_metrics(token).equals(
        cli_frame(tmp_path, market["root"], "token-metrics", "--token", token)
    )


def test_search_answers_the_services_body_as_the_cli(market, tmp_path):
    request = {
        "filter": {"market.liquidity": {"$gt": 0}},
        "sort": {"field": "market.liquidity", "direction": "desc"},
        "options": {"include_market": True},
        "limit": 5,
    }
    mine = market["lake"].search(request)
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    theirs = json.loads(cli("search", "--request", path, lake=market["root"]).stdout)
    assert mine == theirs
    assert set(mine) == {"count", "cursor", "data"} and mine["count"] > 0 and len(mine["data"]) == 5


def test_search_of_an_evm_chain_is_the_clis_and_the_snapshots(tmp_path):
    """dexlake's extension: an EVM chain's profiles ranked locally, as the CLI ranks them and
    as polars ranks the stored snapshot; a field an EVM profile lacks is refused by name."""
    root = tmp_path / "lake"
    with dexlake.Simulator(seed=7, scale="tiny") as sim:
        tokens = [t["address"] for t in sim.catalog()["evm"]["1"]["tokens"]]
        jobs = [{"dataset": "evm-profiles", "chain_id": 1, "tokens": tokens}]
        report = dexlake.sync(root, jobs=jobs, base_url=sim.base_url, api_key=API_KEY, progress=False)
    assert [j["outcome"] for j in report] == ["done"], report
    lake = dexlake.Lake(root)
    request = {
        "filter": {"metrics.1d.trade_count": {"$gte": 1}},
        "sort": {"field": "metrics.1h.volume", "direction": "desc"},
        "options": {"include_metrics": ["1h"]},
        "limit": 2,
    }
    mine = lake.search(request, chain_id=1)
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    theirs = json.loads(cli("search", "--chain-id", 1, "--request", path, lake=root).stdout)
    assert mine == theirs
    # The stored snapshot filtered and sorted with polars: 1h volume descending, nulls last,
    # ties by address descending.
    metrics = pl.col("metrics")
    stored = (
        lake.scan("token_profiles")
        .filter(pl.col("chain") == "evm-1")
        .select(
            "token_address",
            metrics.struct.field("1d").struct.field("trade_count").alias("trades"),
            metrics.struct.field("1h").struct.field("volume").alias("volume"),
        )
        .filter(pl.col("trades") >= 1)
        .sort(["volume", "token_address"], descending=[True, True], nulls_last=True)
        .collect()
    )
    assert stored.height > 2 and mine["cursor"] is not None, "the answer is a first page"
    assert mine["count"] == stored.height
    assert [d["token_address"] for d in mine["data"]] == stored["token_address"].head(2).to_list()
    assert [d["metrics"]["1h"].get("volume") for d in mine["data"]] == stored["volume"].head(2).to_list()
    with pytest.raises(dexlake.DexlakeError, match="market.liquidity"):
        lake.search({"filter": {"market.liquidity": {"$gte": 1}}}, chain_id=1)


def test_status_verify_and_compact_are_the_clis(market, tmp_path):
    lake, root = market["lake"], market["root"]
    assert lake.status() == json.loads(cli("status", "--format", "json", lake=root).stdout)
    report = lake.verify()
    assert report["ok"] and report["problems"] == [] and report["files_checked"] > 0
    assert f"{report['files_checked']} files" in cli("verify", lake=root).stdout
    # A lake of many small commits: compaction keeps every row and leaves fewer files.
    small = tmp_path / "small"
    with dexlake.Simulator(seed=3) as sim:
        for token in [t["address"] for t in sim.catalog()["altchain"]["tokens"][:3]]:
            dexlake.sync(small, jobs=[{"dataset": "swaps", "token": token}],
                         base_url=sim.base_url, api_key=API_KEY, progress=False, compact=False)
    small_lake = dexlake.Lake(small)
    before = small_lake.scan("swaps").sort("id").collect()
    done = small_lake.compact()
    assert done["files_removed"] > done["files_added"] > 0 and done["rows"]["swaps"] > 0
    assert small_lake.scan("swaps").sort("id").collect().equals(before)
    assert small_lake.compact()["files_removed"] == 0


def test_scan_reads_the_committed_files_only_with_the_hive_columns(market, tmp_path):
    lake, root = market["lake"], market["root"]
    swaps = lake.scan("swaps")
    assert isinstance(swaps, pl.LazyFrame)
    frame = swaps.collect()
    assert frame.columns[-2:] == ["chain", "date"]
    assert frame.schema["date"] == pl.Date and frame.schema["chain"] == pl.String
    assert frame.height == lake.verify()["rows"]["swaps"]
    candles = lake.scan("candles").collect()
    assert candles.columns[-3:] == ["chain", "interval", "date"] and candles.schema["interval"] == pl.Int64
    # A file no commit references (left by an interrupted writer) is never read; a glob would.
    part = next((root / "swaps").rglob("*.parquet"))
    stray = part.with_name("part-stray.parquet")
    stray.write_bytes(part.read_bytes())
    try:
        assert lake.scan("swaps").collect().height == frame.height
        assert pl.scan_parquet(str(root / "swaps" / "**" / "*.parquet")).collect().height > frame.height
    finally:
        stray.unlink()
    # A dataset without files is an empty frame with its columns and types.
    empty = lake.scan("portfolios").collect()
    assert empty.height == 0 and empty.columns[-2:] == ["chain", "date"]


# --- errors ------------------------------------------------------------------------------


def test_errors_are_dexlake_errors_naming_the_argument(market, tmp_path):
    lake, token = market["lake"], market["tokens"][0]
    with pytest.raises(dexlake.LakeError, match="not a dexlake lake"):
        dexlake.Lake(tmp_path / "nothing-here")
    with pytest.raises(dexlake.NoDataError, match="no swaps for token nope"):
        lake.bars("nope")
    with pytest.raises(ValueError, match="interval") as bad:
        lake.bars(token, interval=0)
    assert isinstance(bad.value, dexlake.InvalidArgumentError) and isinstance(bad.value, dexlake.DexlakeError)
    for kwargs, name in [({"fill": "sideways"}, "fill"), ({"closed": "up"}, "closed"), ({"source": "quotes"}, "source"),
                         ({"tz": "Mars/Olympus"}, ""), ({"start": "yesterday"}, "start"), ({"ticks": 0}, "ticks"),
                         ({"ticks": 5, "fill": "ffill"}, "fill")]:
        with pytest.raises(dexlake.InvalidArgumentError, match=name):
            lake.bars(token, **kwargs)
    with pytest.raises(ValueError, match="method"):
        lake.pnl(market["wallet"], method="lilo")
    with pytest.raises(ValueError, match="table"):
        lake.pnl(market["wallet"], table="everything")
    with pytest.raises(ValueError, match="dataset"):
        lake.scan("quotes")
    with pytest.raises(TypeError, match="interval"):
        lake.bars(token, interval="60")
    with pytest.raises(TypeError, match="tokens"):
        lake.price_stats(42)
    with pytest.raises(TypeError, match="request"):
        lake.search("filters")
    for kwargs, name in [({"ticks": -1}, "ticks"), ({"start": 10**13}, "start"), ({"offset": 2**70}, "offset")]:
        with pytest.raises(dexlake.InvalidArgumentError, match=name):
            lake.bars(token, **kwargs)
    with pytest.raises(ValueError, match="base_url"):
        dexlake.sync(tmp_path / "l", jobs=[{"dataset": "swaps", "token": token}], base_url="")
    with pytest.raises(ValueError, match="concurrency"):
        dexlake.sync(tmp_path / "l", jobs=[{"dataset": "swaps", "token": token}], base_url="http://127.0.0.1:9", concurrency=-1)
    # Refused arguments create no lake.
    assert not (tmp_path / "l").exists()
    with pytest.raises(ValueError, match="jobs"):
        dexlake.sync(tmp_path / "l", jobs=[{"dataset": "swaps", "tokn": token}], base_url="http://127.0.0.1:9")


def test_a_refused_request_raises_a_service_error_with_its_status(tmp_path):
    with dexlake.Simulator(seed=7) as sim:
        token = sim.catalog()["altchain"]["tokens"][0]["address"]
        with pytest.raises(dexlake.ServiceError) as refused:
            dexlake.sync(tmp_path / "lake", jobs=[{"dataset": "swaps", "token": token}],
                         base_url=sim.base_url, api_key="no-such-key", progress=False)
    assert refused.value.status == 401, refused.value
    assert "401" in str(refused.value)
    assert refused.value.report[0]["outcome"] == "failed" and refused.value.report[0]["status"] == 401


def test_strict_refuses_what_the_syncs_never_fetched(tmp_path):
    with dexlake.Simulator(seed=7) as sim:
        token = sim.catalog()["altchain"]["tokens"][0]["address"]
        dexlake.sync(tmp_path / "lake", jobs=[{"dataset": "trades", "token": token}],
                     base_url=sim.base_url, api_key=API_KEY, progress=False)
    lake = dexlake.Lake(tmp_path / "lake")
    wallet = lake.scan("trades").select("wallet_address").collect()["wallet_address"][0]
    # The wallet's trades were synced by token only: a partial view.
    with pytest.warns(dexlake.CoverageWarning, match="wallet"):
        lake.pnl(wallet)
    with pytest.raises(dexlake.CoverageError, match="strict"):
        lake.pnl(wallet, strict=True)


# --- Ctrl-C, the GIL, S3, metadata -------------------------------------------------------

INTERRUPTED_SYNC = textwrap.dedent(
    """
    import json, sys
    import dexlake
    lake = sys.argv[1]
    with dexlake.Simulator(seed=7, scale="small", rate_limit=40) as sim:
        tokens = [t["address"] for t in sim.catalog()["altchain"]["tokens"]]
        jobs = [{"dataset": d, "token": t} for t in tokens for d in ("swaps", "trades")]
        print("syncing", len(jobs), flush=True)
        try:
            dexlake.sync(lake, jobs=jobs, base_url=sim.base_url, api_key="demo-key", progress=False)
            print(json.dumps({"finished": True}))
        except KeyboardInterrupt as stopped:
            print(json.dumps({"interrupted": True, "report": stopped.report}))
    """
)


def test_ctrl_c_commits_what_was_fetched_and_raises_keyboard_interrupt(tmp_path):
    lake = tmp_path / "lake"
    proc = subprocess.Popen([sys.executable, "-c", INTERRUPTED_SYNC, str(lake)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("syncing")
        time.sleep(3)
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, err = proc.communicate(timeout=60)
        stopped_in = time.monotonic() - sent
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result.get("interrupted"), (out, err)
    assert stopped_in < 30, stopped_in
    outcomes = {j["outcome"] for j in result["report"]}
    assert outcomes <= {"done", "interrupted", "not started"} and "not started" in outcomes
    added = sum(j["rows_added"] for j in result["report"])
    assert added > 0
    opened = dexlake.Lake(lake)
    assert opened.verify()["ok"]
    rows = opened.verify()["rows"]
    assert rows.get("swaps", 0) + rows.get("trades", 0) == added


def test_the_gil_is_released_while_rust_works(tmp_path):
    ticks = 0
    stop = threading.Event()

    def count():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    # 5 requests a second (a burst of 5): the sync's 15 pages take about two seconds.
    with dexlake.Simulator(seed=7, rate_limit=5) as sim:
        token = sim.catalog()["altchain"]["tokens"][0]["address"]
        counter = threading.Thread(target=count)
        counter.start()
        started = time.monotonic()
        try:
            dexlake.sync(tmp_path / "lake", jobs=[{"dataset": "swaps", "token": token}],
                         base_url=sim.base_url, api_key=API_KEY, progress=False)
        finally:
            stop.set()
            counter.join()
        took = time.monotonic() - started
    # The other thread ran all along (a tick is a millisecond's sleep).
    assert took > 1 and ticks > took * 50, (took, ticks)


def test_progress_is_reported_to_a_callable(tmp_path):
    seen = []
    with dexlake.Simulator(seed=7, rate_limit=30) as sim:
        token = sim.catalog()["altchain"]["tokens"][0]["address"]
        dexlake.sync(tmp_path / "lake", jobs=[{"dataset": "swaps", "token": token}],
                     base_url=sim.base_url, api_key=API_KEY, progress=seen.append)
    assert seen and seen[-1]["finished"] and seen[-1]["jobs_done"] == seen[-1]["jobs_total"] == 1
    assert seen[-1]["rows_added"] > 0 and seen[-1]["rows_fetched"] >= seen[-1]["rows_added"]
    assert any(not p["finished"] for p in seen)


def test_a_lake_on_s3_answers_as_the_cli_on_it(tmp_path, monkeypatch):
    pytest.importorskip("moto.server", reason="moto is not installed; run `make venv`")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import s3_server

    server, endpoint, _client = s3_server.start(["pylake"])
    env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    try:
        url = "s3://pylake/research"
        with dexlake.Simulator(seed=7) as sim:
            token = sim.catalog()["altchain"]["tokens"][0]["address"]
            dexlake.sync(url, jobs=[{"dataset": "swaps", "token": token}, {"dataset": "trades", "token": token}],
                         base_url=sim.base_url, api_key=API_KEY, progress=False)
        lake = dexlake.Lake(url)
        assert lake.root == url and lake.verify()["ok"]
        bars = lake.bars(token, interval=3600)
        assert_same(bars, cli_frame(tmp_path, url, "ohlcv", "--token", token, "--interval", "3600"))
        with pytest.warns(dexlake.CoverageWarning):
            board = lake.leaderboard(top=5)
        assert_same(board, cli_frame(tmp_path, url, "pnl", "--top", "5"))
        swaps = lake.scan("swaps").collect()
        assert swaps.height == lake.verify()["rows"]["swaps"] and swaps.columns[-2:] == ["chain", "date"]
    finally:
        server.stop()


def test_the_installed_polars_is_in_the_range_the_package_declares():
    requirement = next(r for r in importlib.metadata.requires("dexlake") if r.startswith("polars"))
    low, high = requirement.removeprefix("polars").split(",")
    assert low.startswith(">=") and high.startswith("<"), requirement

    def version(text):
        return tuple(int(p) for p in text.split(".")[:2])

    installed = version(pl.__version__)
    assert version(low[2:]) <= installed < version(high[1:] + ".0"), (pl.__version__, requirement)


def test_a_frame_crosses_once_and_keeps_its_rows(market):
    native = market["lake"]._native
    stream, _notes = native.bars(market["tokens"][0], None, None, False, "swaps", None, None, 60,
                                 None, None, None, 0, "left", "left", "skip", None, False)
    rows = len(stream)
    frame = pl.DataFrame(stream)
    assert frame.height == rows > 0
    with pytest.raises(ValueError, match="already read"):
        pl.DataFrame(stream)


def test_sync_runs_a_plan_file_and_reads_the_service_from_the_environment(tmp_path, monkeypatch):
    with dexlake.Simulator(seed=7) as sim:
        token = sim.catalog()["altchain"]["tokens"][0]["address"]
        plan = tmp_path / "plan.toml"
        plan.write_text(
            f'[[job]]\ndataset = "swaps"\ntoken = "{token}"\n\n'
            f'[[job]]\ndataset = "trades"\ntoken = "{token}"\n'
        )
        monkeypatch.setenv("DEXLAKE_BASE_URL", sim.base_url)
        monkeypatch.setenv("DEXLAKE_API_KEY", API_KEY)
        report = dexlake.sync(tmp_path / "lake", plan=plan, progress=False)
    assert [j["dataset"] for j in report] == ["swaps", "trades"], report
    assert all(j["outcome"] == "done" for j in report), report
    rows = dexlake.Lake(tmp_path / "lake").verify()["rows"]
    assert rows["swaps"] == report[0]["rows_added"] > 0
    assert rows["trades"] == report[1]["rows_added"] > 0
    with pytest.raises(FileNotFoundError, match="missing.toml"):
        dexlake.sync(tmp_path / "other", plan=tmp_path / "missing.toml", progress=False)


def test_sync_takes_the_service_and_its_key_from_a_simulator(tmp_path, monkeypatch):
    # A new user: no variable of the environment names a service or a key.
    monkeypatch.delenv("DEXLAKE_BASE_URL", raising=False)
    monkeypatch.delenv("DEXLAKE_API_KEY", raising=False)
    with dexlake.Simulator(seed=7) as sim:
        assert sim.api_key == API_KEY
        token = sim.catalog()["altchain"]["tokens"][0]["address"]
        jobs = [{"dataset": "swaps", "token": token}]
        report = dexlake.sync(tmp_path / "lake", jobs=jobs, service=sim, progress=False)
        assert report[0]["outcome"] == "done" and report[0]["rows_added"] > 0, report
        # A key given too wins: the simulator refuses a wrong one.
        with pytest.raises(dexlake.ServiceError) as refused:
            dexlake.sync(tmp_path / "lake", jobs=jobs, service=sim, api_key="wrong", progress=False)
        assert refused.value.status == 401
        with pytest.raises(dexlake.InvalidArgumentError, match="base_url or service"):
            dexlake.sync(tmp_path / "lake", jobs=jobs, service=sim, base_url=sim.base_url)
        with pytest.raises(TypeError, match="service"):
            dexlake.sync(tmp_path / "lake", jobs=jobs, service=sim.base_url)


def test_a_live_simulator_keeps_trading_and_a_second_sync_adds_its_new_swaps(tmp_path):
    with dexlake.Simulator(seed=7, scale="small", live=True, manual=True) as sim:
        start = sim.now()
        assert start == dt.datetime(2025, 6, 1, tzinfo=dt.timezone.utc)
        token = sim.catalog()["altchain"]["tokens"][0]["address"]
        jobs = [{"dataset": "swaps", "token": token}]
        first = dexlake.sync(tmp_path / "lake", jobs=jobs, base_url=sim.base_url, api_key=API_KEY, progress=False)
        sim.advance(2 * 86_400)
        assert sim.now() == start + dt.timedelta(days=2)
        assert sim.catalog()["now"].startswith("2025-06-03")
        second = dexlake.sync(tmp_path / "lake", jobs=jobs, base_url=sim.base_url, api_key=API_KEY, progress=False)
    assert first[0]["rows_added"] > 0 and second[0]["rows_added"] > 0
    swaps = dexlake.Lake(tmp_path / "lake").scan("swaps").collect()
    assert swaps.height == first[0]["rows_added"] + second[0]["rows_added"]
    new = swaps.filter(pl.col("block_time") >= start)
    assert new.height == second[0]["rows_added"]
    with dexlake.Simulator(seed=7) as fixed:
        with pytest.raises(dexlake.InvalidArgumentError):
            fixed.advance(60)
    with pytest.raises(dexlake.InvalidArgumentError, match="manual"):
        dexlake.Simulator(manual=True)
