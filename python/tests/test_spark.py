"""dexlake.spark on Spark local[2] gives the bars, PnL and token metrics of `dexlake ohlcv`
(every token, or a selection), `dexlake pnl --all-wallets` and `dexlake token-metrics` on the same
lake, row for row and bit for bit, reading only the committed files.

Two lakes: one synced from the simulator (two tokens' swaps and trades, several commits, some
of which replace files; plus a stray uncommitted Parquet file that a glob would read), and the
deterministic fixture lake (every swap type, oversells, swap fees, wallets with swaps only).
One Spark session serves the module.

Needs Java (17) and pyspark; without them the test is skipped and says how to enable it.
"""

import json
import math
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

ENABLE = "install openjdk-17-jre-headless (e.g. `sudo apt-get install -y openjdk-17-jre-headless`) and run `make venv`"

if shutil.which("java") is None:
    pytest.skip(f"the Spark test needs Java, which is not on PATH: {ENABLE}", allow_module_level=True)
try:
    import pyspark  # noqa: F401
except ImportError:
    pytest.skip(f"the Spark test needs pyspark, which is not installed: {ENABLE}", allow_module_level=True)

import pyarrow.parquet as pq  # noqa: E402

import dexlake  # noqa: E402
import dexlake.spark  # noqa: E402

PYTHON_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PYTHON_DIR))
sys.path.insert(0, str(PYTHON_DIR / "spark"))
import build_lake  # noqa: E402
from committed_files import committed_files, dataset_files  # noqa: E402

JOB_TIMEOUT = 300  # seconds for one run of a Spark script
BAR_KEY = ["token_address", "timestamp"]
PNL_KEY = ["wallet_address", "token_address"]
# (name, the CLI's flags, dexlake.spark.bars' arguments): two kinds, two intervals, both sources.
BAR_CASES = [
    ("1m", ["--interval", "60"], dict(interval=60)),
    ("5m trades", ["--interval", "300", "--source", "trades"], dict(interval=300, source="trades")),
    ("ticks", ["--ticks", "5"], dict(interval=None, ticks=5)),
]
METHODS = ["fifo", "lifo", "hifo", "avg"]


def binary():
    path = os.environ.get("DEXLAKE_BIN")
    if not path:
        pytest.fail("DEXLAKE_BIN must name the dexlake binary (run the tests with `make py-test`)")
    return path


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    # The executors' Python is this one, which has the dexlake package.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("dexlake-test")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def sim_lake(tmp_path_factory):
    """Two of the simulator's most active tokens, swaps and trades, and one stray file."""
    exe = binary()
    root = tmp_path_factory.mktemp("spark-sim") / "lake"
    root.mkdir()
    market = build_lake.catalog(exe)
    tokens = sorted(market["altchain"]["tokens"], key=lambda t: -t["swap_count"])[:2]
    proc, url = build_lake.start_simulator(exe)
    try:
        env = dict(os.environ, DEXLAKE_BASE_URL=url, DEXLAKE_API_KEY=build_lake.API_KEY)
        env.pop("DEXLAKE_LAKE", None)
        for token in tokens:
            build_lake.sync(exe, root, env, "swaps", "--token", token["address"])
            build_lake.sync(exe, root, env, "trades", "--token", token["address"])
    finally:
        build_lake.stop_simulator(proc)
    # A leftover that no commit names (as a crashed writer leaves): a copy of a committed
    # swaps file. A glob of swaps/ would count its rows twice; the log does not list it.
    committed = dataset_files(committed_files(root), "swaps")
    source = root / committed[0]
    (source.parent / "part-stray-uncommitted.parquet").write_bytes(source.read_bytes())
    return root


@pytest.fixture(scope="module")
def lakes(sim_lake, fixture_lake):
    return {"sim": sim_lake, "fixture": Path(fixture_lake[0])}


def cli_table(out, *args):
    """The Parquet answer of a dexlake command, as a pyarrow table."""
    subprocess.run([binary(), *args, "--format", "parquet", "--out", str(out)],
                   check=True, capture_output=True, text=True, timeout=120)
    return pq.read_table(out)


def bits(value):
    """A value compared bit for bit: a float by its IEEE bits (every NaN alike)."""
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else struct.pack("<d", value)
    if isinstance(value, dict):
        return {k: bits(v) for k, v in value.items()}
    return value


def assert_same_rows(expected, got, key, what):
    """The same columns, and the same rows sorted by `key`, bit for bit."""
    assert expected.num_rows > 0, f"{what}: dexlake gave no rows, so the comparison would prove nothing"
    assert got.column_names == expected.column_names, f"{what}: columns {got.column_names}"
    order = lambda rows: sorted(rows, key=lambda r: tuple(r[k] for k in key))  # noqa: E731
    exp, out = order(expected.to_pylist()), order(got.to_pylist())
    assert len(out) == len(exp), f"{what}: {len(out)} rows from Spark, {len(exp)} from dexlake"
    diffs = [
        (tuple(e[k] for k in key), c, e[c], o[c])
        for e, o in zip(exp, out)
        for c in expected.column_names
        if bits(e[c]) != bits(o[c])
    ]
    assert not diffs, f"{what}: {len(diffs)} values differ, e.g. (key, column, dexlake, Spark): {diffs[:5]}"


@pytest.mark.parametrize("name", ["sim", "fixture"])
def test_the_bars_equal_dexlake_ohlcv_bit_for_bit(spark, lakes, name, tmp_path):
    lake = lakes[name]
    for case, flags, kwargs in BAR_CASES:
        expected = cli_table(tmp_path / f"{case}.parquet", "ohlcv", "--lake", str(lake), "--all-tokens", *flags)
        got = dexlake.spark.bars(spark, str(lake), **kwargs).toArrow()
        assert_same_rows(expected, got, BAR_KEY, f"{case} bars of the {name} lake")
        if name == "sim" and case == "1m":
            # Bars of many events, so open/close order and the sums are put to the test.
            assert max(expected.column("count").to_pylist()) > 10, "no bar of the simulated lake holds many events"


@pytest.mark.parametrize("name", ["sim", "fixture"])
def test_the_pnl_equals_dexlake_pnl_bit_for_bit_for_every_method(spark, lakes, name, tmp_path):
    lake = lakes[name]
    for method in METHODS:
        expected = cli_table(tmp_path / f"{method}.parquet", "pnl", "--lake", str(lake), "--all-wallets",
                             "--method", method)
        got = dexlake.spark.pnl(spark, str(lake), method=method).toArrow()
        assert_same_rows(expected, got, PNL_KEY, f"{method} ledgers of the {name} lake")
        rows = expected.to_pylist()
        assert any(r["realized_pnl"] != 0.0 for r in rows), "no ledger realized anything: a weak test"
        if name == "fixture":
            # The cases this lake is here for.
            assert any(r["oversold_quantity"] > 0.0 for r in rows), "no oversell in the fixture lake"
            assert any(r["fees"] > 0.0 for r in rows), "no swap fee in the fixture lake"


def test_a_token_split_by_time_gives_the_bars_of_the_whole(spark, sim_lake):
    whole = dexlake.spark.bars(spark, str(sim_lake), interval=60).toArrow()
    split = dexlake.spark.bars(spark, str(sim_lake), interval=60, split_seconds=600).toArrow()
    assert_same_rows(whole, split, BAR_KEY, "bars split every 10 minutes")
    # The split cuts tokens' bars into several groups.
    times = [t.timestamp() for t in whole.column("timestamp").to_pylist()]
    assert max(times) - min(times) > 3 * 600, "the lake spans too short a time to split"
    # Parts follow the bars' own grid (its offset): 5-minute bars shifted by 7 s, split every
    # 15 minutes, equal the unsplit ones.
    shifted = dict(interval=300, offset=7)
    assert_same_rows(
        dexlake.spark.bars(spark, str(sim_lake), **shifted).toArrow(),
        dexlake.spark.bars(spark, str(sim_lake), split_seconds=900, **shifted).toArrow(),
        BAR_KEY, "shifted bars split every 15 minutes",
    )


# (arguments, the reason dexlake gives): each refused on the driver, before any Spark job.
SPLIT_REFUSALS = [
    (dict(interval=60, split_seconds=90), "give a positive multiple of interval"),
    (dict(split_seconds=0), "give a positive multiple of interval"),
    (dict(ticks=5, split_seconds=600), "tick, volume and dollar bars depend on every event before them"),
    (dict(usd_volume=1000.0, split_seconds=600), "tick, volume and dollar bars depend on every event before them"),
    (dict(interval=60, fill="ffill", split_seconds=600), "a filled bucket depends on the bar before it"),
    (dict(interval=60, closed="right", split_seconds=600),
     "buckets closed on the right do not start on the grid's instants"),
    (dict(interval=86400, tz="Europe/Paris", split_seconds=7 * 86400),
     "calendar days of a time zone do not start on the epoch grid"),
]


@pytest.mark.parametrize("kwargs,reason", SPLIT_REFUSALS)
def test_a_split_the_rule_does_not_allow_is_refused_with_dexlakes_reason(spark, sim_lake, kwargs, reason):
    with pytest.raises(dexlake.InvalidArgumentError) as refused:
        dexlake.spark.bars(spark, str(sim_lake), **kwargs)
    assert str(refused.value) == f"invalid split_seconds: {reason}"


def test_an_interval_beside_tick_bars_is_refused_as_dexlake_ohlcv_refuses_it(spark, sim_lake):
    """An explicit interval with ticks is refused (the CLI refuses the two flags together);
    without it, ticks are tick bars."""
    lake = dexlake.Lake(sim_lake)
    token = sorted(lake.scan("trades").select("token_address").unique().collect().to_series())[0]
    cli = subprocess.run([binary(), "ohlcv", "--lake", str(sim_lake), "--token", token, "--interval", "60",
                          "--ticks", "5"], capture_output=True, text=True, timeout=120)
    assert cli.returncode != 0 and "--interval" in cli.stderr and "--ticks" in cli.stderr, cli.stderr
    for call in (
        lambda: lake.bars(token, interval=60, ticks=5),
        lambda: dexlake.kernels.bars(lake.scan("swaps").collect(), 60, ticks=5),
        lambda: dexlake.spark.bars(spark, lake, interval=60, ticks=5),
    ):
        with pytest.raises(dexlake.InvalidArgumentError, match="invalid interval: not with ticks"):
            call()
    assert lake.bars(token, ticks=5).height > 0


def test_selected_bars_equal_dexlake_ohlcv_with_the_same_selection(spark, sim_lake, tmp_path):
    """Tokens, a pool and a time range, selected before the rows move, give the CLI's bars."""
    lake = dexlake.Lake(sim_lake)
    swaps = lake.scan("swaps").collect()
    token = sorted(lake.scan("trades").select("token_address").unique().collect().to_series())[0]
    pool = swaps.group_by("pool_address").len().sort(["len", "pool_address"], descending=[True, False])[0, 0]
    t = sorted(int(x.timestamp()) for x in swaps["block_time"].to_list())
    start, end = t[len(t) // 4] + 1, t[3 * len(t) // 4] - 1  # not on a minute's edge
    # (case, the CLI's selection, its rule, dexlake.spark.bars' arguments)
    cases = [
        ("tokens and a range", ["--tokens", token, "--from", str(start), "--to", str(end)], ["--interval", "60"],
         dict(tokens=[token], start=start, end=end, interval=60)),
        ("a pool and a range", ["--pool", pool, "--from", str(start), "--to", str(end)], ["--interval", "300"],
         dict(pool=pool, start=start, end=end, interval=300, split_seconds=900)),
        ("trades of a token from a start", ["--tokens", token, "--from", str(start)],
         ["--source", "trades", "--ticks", "3"], dict(tokens=token, source="trades", start=start, ticks=3)),
    ]
    for case, selection, rule, kwargs in cases:
        expected = cli_table(tmp_path / "bars.parquet", "ohlcv", "--lake", str(sim_lake), *selection, *rule)
        got = dexlake.spark.bars(spark, str(sim_lake), **kwargs).toArrow()
        assert_same_rows(expected, got, BAR_KEY, f"bars of {case}")
        every = cli_table(tmp_path / "every.parquet", "ohlcv", "--lake", str(sim_lake), "--all-tokens", *rule)
        assert every.num_rows > got.num_rows, f"{case}: the selection selected everything"
    # The selection is checked as the CLI checks it.
    cli = subprocess.run([binary(), "ohlcv", "--lake", str(sim_lake), "--pool", pool, "--source", "trades",
                          "--interval", "60"], capture_output=True, text=True, timeout=120)
    assert cli.returncode != 0
    with pytest.raises(dexlake.InvalidArgumentError) as refused:
        dexlake.spark.bars(spark, str(sim_lake), pool=pool, source="trades")
    assert str(refused.value).split(": ", 1)[1] in cli.stderr, (str(refused.value), cli.stderr)
    with pytest.raises(dexlake.InvalidArgumentError, match="time range"):
        dexlake.spark.bars(spark, str(sim_lake), start=end, end=start)


@pytest.mark.parametrize("name", ["sim", "fixture"])
def test_the_token_metrics_equal_dexlake_token_metrics_bit_for_bit(spark, lakes, name, tmp_path):
    lake = lakes[name]
    tokens = sorted(dexlake.Lake(lake).scan("trades").select("token_address").unique().collect().to_series())
    assert tokens, f"the {name} lake has no trades"
    import pyarrow as pa

    expected = pa.concat_tables([
        cli_table(tmp_path / f"{i}.parquet", "token-metrics", "--lake", str(lake), "--token", token)
        for i, token in enumerate(tokens)
    ])
    got = dexlake.spark.token_metrics(spark, str(lake)).toArrow()
    key = [c for c in ("token_address", "window") if c in expected.column_names]
    assert key == ["token_address", "window"], expected.column_names
    assert_same_rows(expected, got, key, f"token metrics of the {name} lake")


def test_the_command_line_job_writes_the_bars_and_ledgers(lakes, tmp_path):
    """python/spark/dexlake_spark.py, a thin job over dexlake.spark, writes what the CLI gives."""
    lake = lakes["fixture"]
    out = tmp_path / "spark"
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    proc = subprocess.run(
        [sys.executable, str(PYTHON_DIR / "spark" / "dexlake_spark.py"), "--lake", str(lake), "--out", str(out),
         "--method", "hifo"],
        capture_output=True, text=True, timeout=JOB_TIMEOUT, env=env,
    )
    assert proc.returncode == 0, f"the Spark job failed (status {proc.returncode}):\n{proc.stderr[-4000:]}"
    bars = cli_table(tmp_path / "bars.parquet", "ohlcv", "--lake", str(lake), "--all-tokens", "--interval", "60")
    pnl = cli_table(tmp_path / "pnl.parquet", "pnl", "--lake", str(lake), "--all-wallets", "--method", "hifo")
    assert_same_rows(bars, pq.read_table(out / "bars.parquet"), BAR_KEY, "the job's bars")
    assert_same_rows(pnl, pq.read_table(out / "pnl.parquet"), PNL_KEY, "the job's ledgers")


def test_only_committed_files_are_read(sim_lake):
    """The stray file is on disk, and Spark's bars equal dexlake's (above) without its rows."""
    files = committed_files(sim_lake)
    on_disk = {str(p.relative_to(sim_lake)) for p in Path(sim_lake).rglob("*.parquet")}
    # Some commit replaced files, so the log's `remove` lists are applied too; the replaced
    # files stay on disk for the older versions until a vacuum.
    log = Path(sim_lake) / "_dexlake" / "log"
    removed = {p for e in log.glob("*.json") for p in json.loads(e.read_text()).get("remove", [])}
    assert removed and removed <= on_disk and not removed & set(files)
    stray = on_disk - set(files) - removed
    assert stray and all("stray-uncommitted" in p for p in stray), stray
    read = {str(Path(p).relative_to(sim_lake)) for p in dexlake.Lake(sim_lake).files("swaps")}
    assert read == set(dataset_files(files, "swaps"))


def test_the_views_script_reads_exactly_the_committed_files(sim_lake, tmp_path):
    """`dexlake views --engine spark` defines one view per dataset over the committed files:
    its counts are the log's rows, not the glob's (which counts the stray file too)."""
    script = subprocess.run(
        [binary(), "--lake", str(sim_lake), "views", "--engine", "spark"],
        check=True, capture_output=True, text=True, timeout=120,
    ).stdout
    counts = tmp_path / "counts.json"
    job = tmp_path / "views.py"
    job.write_text(
        script
        + "\nimport json\n"
        + f"json.dump({{t.name: spark.table(t.name).count() for t in spark.catalog.listTables()}}, open({str(counts)!r}, 'w'))\n"
    )
    proc = subprocess.run([sys.executable, str(job)], capture_output=True, text=True, timeout=JOB_TIMEOUT)
    assert proc.returncode == 0, f"the views script failed (status {proc.returncode}):\n{proc.stderr[-4000:]}"
    got = json.loads(counts.read_text())
    expected = {}
    for entry in committed_files(sim_lake).values():
        expected[entry["dataset"]] = expected.get(entry["dataset"], 0) + entry["rows"]
    assert got == expected
    assert "-- " not in script and "# price_history: no committed files, no view" in script
