"""The Spark job (python/spark/dexlake_spark.py) gives the bars and PnL of `dexlake ohlcv` and
`dexlake pnl` on the same lake, reading only the committed files.

Two lakes: one synced from the simulator (two tokens' swaps and trades, several commits, some
of which replace files; plus a stray uncommitted Parquet file that a glob would read), and the
deterministic fixture lake (every swap type, oversells, swap fees, wallets with swaps only).

Needs Java (17) and pyspark; without them the test is skipped and says how to enable it.
"""

import json
import math
import os
import shutil
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

PYTHON_DIR = Path(__file__).resolve().parents[1]
JOB = PYTHON_DIR / "spark" / "dexlake_spark.py"
sys.path.insert(0, str(PYTHON_DIR))
sys.path.insert(0, str(PYTHON_DIR / "spark"))
import build_lake  # noqa: E402
from committed_files import committed_files, dataset_files  # noqa: E402

JOB_TIMEOUT = 300  # seconds for one run of the Spark job
REL_TOL = 1e-9
BAR_KEY = ["token_address", "timestamp"]
PNL_KEY = ["wallet_address", "token_address"]


def binary():
    path = os.environ.get("DEXLAKE_BIN")
    if not path:
        pytest.fail("DEXLAKE_BIN must name the dexlake binary (run the tests with `make py-test`)")
    return path


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


def run_job(lake, out):
    proc = subprocess.run(
        [sys.executable, str(JOB), "--lake", str(lake), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT,
    )
    assert proc.returncode == 0, f"the Spark job failed (status {proc.returncode}):\n{proc.stderr[-4000:]}"
    return out


def dexlake(*args):
    subprocess.run([binary(), *args], check=True, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module", params=["sim", "fixture"])
def outputs(request, lakes, tmp_path_factory):
    """(lake, dexlake's bars, dexlake's ledgers, Spark's bars, Spark's ledgers) as row dicts."""
    lake = lakes[request.param]
    out = tmp_path_factory.mktemp(f"spark-{request.param}")
    run_job(lake, out / "spark")
    bars, pnl = out / "bars.parquet", out / "pnl.parquet"
    dexlake("ohlcv", "--lake", str(lake), "--all-tokens", "--interval", "60",
            "--format", "parquet", "--out", str(bars))
    dexlake("pnl", "--lake", str(lake), "--all-wallets", "--format", "parquet", "--out", str(pnl))

    def rows(path):
        return pq.read_table(path).to_pylist()

    return (request.param, lake, rows(bars), rows(pnl),
            rows(out / "spark" / "bars.parquet"), rows(out / "spark" / "pnl.parquet"))


def same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-12)
    return a == b


def assert_same_rows(expected, got, key, what):
    assert expected, f"{what}: dexlake gave no rows, so the comparison would prove nothing"
    exp = {tuple(r[k] for k in key): r for r in expected}
    out = {tuple(r[k] for k in key): r for r in got}
    assert len(out) == len(got), f"{what}: the Spark job gave duplicate keys"
    missing, extra = exp.keys() - out.keys(), out.keys() - exp.keys()
    assert not missing and not extra, (
        f"{what}: keys differ: {len(missing)} only in dexlake (e.g. {sorted(missing)[:3]}),"
        f" {len(extra)} only in Spark (e.g. {sorted(extra)[:3]})"
    )
    columns = list(expected[0].keys())
    assert set(columns) <= set(got[0].keys()), f"{what}: Spark lacks {set(columns) - set(got[0])}"
    diffs = [
        (k, c, exp[k][c], out[k][c])
        for k in sorted(exp)
        for c in columns
        if not same(exp[k][c], out[k][c])
    ]
    assert not diffs, f"{what}: {len(diffs)} values differ, e.g. (key, column, dexlake, Spark): {diffs[:5]}"


def test_the_bars_equal_dexlake_ohlcv(outputs):
    name, lake, bars, _, spark_bars, _ = outputs
    assert_same_rows(bars, spark_bars, BAR_KEY, f"bars of the {name} lake")
    if name == "sim":
        # Bars of many events, so open/close order and the sums are put to the test.
        assert max(r["count"] for r in bars) > 10, "no bar of the simulated lake holds many events"


def test_the_pnl_equals_dexlake_pnl(outputs):
    name, lake, _, pnl, _, spark_pnl = outputs
    assert_same_rows(pnl, spark_pnl, PNL_KEY, f"ledgers of the {name} lake")
    assert any(r["realized_pnl"] != 0.0 for r in pnl), "no ledger realized anything: a weak test"
    if name == "fixture":
        # The cases this lake is here for.
        assert any(r["oversold_quantity"] > 0.0 for r in pnl), "no oversell in the fixture lake"
        assert any(r["fees"] > 0.0 for r in pnl), "no swap fee in the fixture lake"


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
