# `make test` is the project's one test command (CI runs it through .ci/run).
# It honours CARGO_TARGET_DIR so a warm target folder outside the clone can be reused.

CARGO ?= cargo
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
# moto and boto3: the S3-compatible server of the object-store tests (python/s3_server.py);
# pyspark: the Spark job's test (it also needs Java 17); pandas below 3, which pyspark supports.
# polars: the range the `dexlake` package supports (python/pyproject.toml), which its tests run.
# selenium and pillow: the page checker of `make screenshot`, which python/tests/test_screenshot.py
# tests (with Debian's chromium and chromium-driver, which .ci/run installs).
PY_PACKAGES := duckdb 'polars>=2.0,<3' pyarrow pytest nbclient nbformat ipykernel matplotlib 'moto[server]' boto3 pyspark 'pandas<3' selenium pillow

.PHONY: test fmt clippy rust-test doc py-install py-test venv notebooks research examples screenshot bench compare compare-pnl compare-python compare-s3 compare-search compare-series compare-sql compare-spark

# The target folder (honours CARGO_TARGET_DIR and a shared one outside the clone).
TARGET_DIR = $(CARGO) metadata --format-version 1 --no-deps | $(VPY) -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])'

# Prints the dexlake binary the Python tests and notebooks run: DEXLAKE_BIN when set,
# else a debug build (cargo's own output goes to stderr).
DEXLAKE_BIN_PATH = if [ -n "$$DEXLAKE_BIN" ]; then echo "$$DEXLAKE_BIN"; \
	else $(CARGO) build --bin dexlake >&2 && echo "$$($(TARGET_DIR))/debug/dexlake"; fi

test: fmt clippy rust-test doc py-test notebooks examples

fmt:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --all-targets -- -D warnings
	$(CARGO) clippy -p dexlake-python --all-targets -- -D warnings

# The object-store tests (tests/s3.rs) start moto from the venv, and fail when it cannot start
# (DEXLAKE_SKIP_S3=1 skips them instead; `make test` never sets it).
rust-test: venv
	DEXLAKE_PYTHON=$(CURDIR)/$(VPY) $(CARGO) test --all-targets
	$(CARGO) test --doc

doc:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps

venv: $(VENV)/.installed

$(VENV)/.installed: Makefile
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check $(PY_PACKAGES)
	touch $@

# The `dexlake` Python package (python/), installed into the venv as the README installs it
# (`pip install ./python`), but built with cargo's dev profile: it then shares the debug build
# of polars with the dexlake binary the tests compare it with (same features), instead of
# compiling polars a second time in release. PY_PROFILE=release builds it as users get it.
PY_PROFILE ?= dev
py-install: venv
	MATURIN_PEP517_ARGS="--profile $(PY_PROFILE)" $(VPY) -m pip install --quiet \
		--disable-pip-version-check --force-reinstall --no-deps ./python

# Python tests: real DuckDB, polars and pyarrow on a lake written by the dexlake binary, the
# `dexlake` package against the CLI on the same lakes, the READMEs' Python blocks, and the page
# checker in headless Chromium (DEXLAKE_REQUIRE_CHROMIUM=1: a failure, not a skip, without it).
# DEXLAKE_BIN=path/to/dexlake skips the build.
py-test: py-install
	@set -e; bin="$$($(DEXLAKE_BIN_PATH))"; \
	if ls python/tests/test_*.py >/dev/null 2>&1; then \
		DEXLAKE_BIN="$$bin" DEXLAKE_REQUIRE_CHROMIUM=1 $(VPY) -m pytest -q python/tests; \
		if ! command -v java >/dev/null 2>&1; then \
			echo "py-test: skipped the Spark test (no Java); install openjdk-17-jre-headless to run it"; fi; \
	else echo "py-test: no Python tests yet"; fi

# Every notebook runs top to bottom (with nbclient, headless: MPLBACKEND=Agg unless the notebook
# picks the inline backend) on a lake that python/build_lake.py syncs from the simulator into a
# temporary folder. DEXLAKE_BIN=path/to/dexlake skips the build.
notebooks: py-install
	@set -e; \
	if ! ls notebooks/*.ipynb >/dev/null 2>&1; then echo "notebooks: none yet"; exit 0; fi; \
	bin="$$($(DEXLAKE_BIN_PATH))"; \
	tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	$(VPY) python/build_lake.py --bin "$$bin" --out "$$tmp/lake"; \
	for nb in notebooks/*.ipynb; do \
		DEXLAKE_LAKE="$$tmp/lake" MPLBACKEND=Agg $(VPY) -c 'import sys, nbformat; from nbclient import NotebookClient; nb = nbformat.read(sys.argv[1], as_version=4); NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": "notebooks"}}).execute(); print("ran", sys.argv[1])' "$$nb"; \
	done

# examples/research.rs asks its three questions of a lake that python/build_lake.py syncs from
# the simulator into a temporary folder (the example itself starts no simulator).
research: venv
	@set -e; bin="$$($(DEXLAKE_BIN_PATH))"; \
	tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	$(VPY) python/build_lake.py --bin "$$bin" --out "$$tmp/lake"; \
	DEXLAKE_LAKE="$$tmp/lake" $(CARGO) run --quiet --example research

# Every example runs, and fails (exit status 1) when what it checks fails: research as above;
# the others start the simulator themselves; the daily report (the real service when
# DEXLAKE_API_KEY is set, so it is unset here) syncs 5 tokens and 20 wallets into a temporary
# folder and writes its page there.
examples: research
	@set -e; tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	for example in quickstart wallet_pnl screener live_bars; do \
		echo "example: $$example"; $(CARGO) run --quiet --example $$example; \
	done; \
	echo "example: daily_report"; \
	env -u DEXLAKE_API_KEY DEXLAKE_LAKE="$$tmp/lake" DEXLAKE_REPORT_DIR="$$tmp/report" \
		DEXLAKE_REPORT_TOKENS=5 DEXLAKE_REPORT_WALLETS=20 $(CARGO) run --quiet --example daily_report

# Checks report/index.html in headless Chromium (every image loaded, no console error) and saves
# docs/report.png. Installs Debian's chromium and chromium-driver when missing, and writes the
# report first when there is none.
screenshot: venv
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
		sudo=""; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		$$sudo apt-get update && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y chromium chromium-driver; \
	fi
	@if [ ! -f report/index.html ]; then $(CARGO) run --release --example daily_report; fi
	$(VPY) python/screenshot.py report/index.html docs/report.png --max-height 1800

bench:
	$(CARGO) bench

# Peers on the same lake (not part of `make test`): 1-minute OHLCV of every token on 10M swaps.
# Builds the lake once under target/compare-lake; see benches/compare/ohlcv.py. The binary is
# built with the examples, so its dependencies get the features the examples and benches use
# (dev-dependencies unify features); built alone, it would compile polars a second time.
compare: venv
	$(CARGO) build --release --bin dexlake --examples
	$(VPY) benches/compare/ohlcv.py --dexlake "$$($(TARGET_DIR))/release/dexlake" $(COMPARE_ARGS)

# Hourly bars of every token from a stored 1-minute EVM price history (1,000 tokens over 30 days:
# 43.2M points) against polars' group_by_dynamic and DuckDB's time_bucket on the same files (not
# part of `make test`). Builds its lake once under target/compare-series-lake; see
# benches/compare/series.py.
compare-series: venv
	$(CARGO) build --release --bin dexlake --examples
	$(VPY) benches/compare/series.py --dexlake "$$($(TARGET_DIR))/release/dexlake" \
		--lake "$$($(TARGET_DIR))/compare-series-lake" $(COMPARE_ARGS)

# FIFO realized PnL of every (wallet, token) on 10M trades against a Python FIFO loop, polars
# and DuckDB (not part of `make test`). Builds its lake once under target/compare-pnl-lake;
# see benches/compare/pnl.py.
compare-pnl: venv
	$(CARGO) build --release --bin dexlake --examples
	$(VPY) benches/compare/pnl.py --dexlake "$$($(TARGET_DIR))/release/dexlake" $(COMPARE_ARGS)

# `dexlake sql` against DuckDB on the views of `dexlake views`, over the 10M-swap lake of
# `make compare` (built by it; not part of `make test`); see benches/compare/sql.py.
compare-sql: venv
	$(CARGO) build --release --bin dexlake --examples
	$(VPY) benches/compare/sql.py --dexlake "$$($(TARGET_DIR))/release/dexlake" \
		--lake "$$($(TARGET_DIR))/compare-lake" $(COMPARE_ARGS)

# The Python package on the same 10M-swap lake as `make compare`: the cost of handing a bars frame
# to polars against computing it, and `lake.bars(all_tokens=True)` against the CLI (not part of
# `make test`). Installs the package built in release; see benches/compare/python.py.
compare-python: venv
	$(CARGO) build --release --bin dexlake --examples
	$(MAKE) py-install PY_PROFILE=release
	$(VPY) benches/compare/python.py --dexlake "$$($(TARGET_DIR))/release/dexlake" $(COMPARE_ARGS)

# dexlake.spark on Spark local[1] and local[2] against the CLI, on the 10M-swap lake of `make
# compare` and the 10M-trade lake of `make compare-pnl` (both built by them; not part of `make
# test`); the time split into read, shuffle and kernel. See benches/compare/spark.py.
compare-spark: venv
	$(CARGO) build --release --bin dexlake --examples
	$(MAKE) py-install PY_PROFILE=release
	$(VPY) benches/compare/spark.py --dexlake "$$($(TARGET_DIR))/release/dexlake" \
		--swaps-lake "$$($(TARGET_DIR))/compare-lake" --trades-lake "$$($(TARGET_DIR))/compare-pnl-lake" $(COMPARE_ARGS)

# Local search-profiles on 1M profiles against polars (in memory and from Parquet) and DuckDB
# (not part of `make test`). The search bench writes its lake once under
# target/compare-search-lake and times dexlake in memory; see benches/compare/search.py.
compare-search: venv
	$(CARGO) build --release --bin dexlake --examples
	$(VPY) benches/compare/search.py --dexlake "$$($(TARGET_DIR))/release/dexlake" \
		--bench "$$($(CARGO) build --release --bench search --message-format json 2>/dev/null | $(VPY) -c 'import json,sys; print([m["executable"] for m in map(json.loads, sys.stdin) if m.get("target", {}).get("name") == "search" and m.get("executable")][-1])')" \
		--lake "$$($(TARGET_DIR))/compare-search-lake" $(COMPARE_ARGS)

# Write, sync and scan throughput of a lake on an S3-compatible server (moto on loopback) next to
# a local folder (not part of `make test`); see benches/compare/s3.py.
compare-s3: venv
	$(CARGO) build --release --bin dexlake --examples
	$(VPY) benches/compare/s3.py --dexlake "$$($(TARGET_DIR))/release/dexlake" $(COMPARE_ARGS)
