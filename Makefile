# `make test` is the project's one test command (CI runs it through .ci/run).
# It honours CARGO_TARGET_DIR so a warm target folder outside the clone can be reused.

CARGO ?= cargo
PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
PY_PACKAGES := duckdb polars pyarrow pytest nbclient ipykernel

.PHONY: test fmt clippy rust-test doc py-test venv notebooks bench compare compare-pnl

test: fmt clippy rust-test doc py-test notebooks

fmt:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --all-targets -- -D warnings

rust-test:
	$(CARGO) test --all-targets
	$(CARGO) test --doc

doc:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps

venv: $(VENV)/.installed

$(VENV)/.installed: Makefile
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --disable-pip-version-check $(PY_PACKAGES)
	touch $@

# Python interop tests: real DuckDB, polars and pyarrow on a lake written by the dexlake binary.
py-test: venv
	$(CARGO) build --bin dexlake
	@if ls python/tests/test_*.py >/dev/null 2>&1; then \
		DEXLAKE_BIN="$$($(CARGO) metadata --format-version 1 --no-deps | $(VPY) -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/dexlake" \
		$(VPY) -m pytest -q python/tests; \
	else echo "py-test: no Python tests yet"; fi

# Every notebook runs top to bottom against the simulator.
notebooks: venv
	@for nb in notebooks/*.ipynb; do \
		[ -e "$$nb" ] || { echo "notebooks: none yet"; break; }; \
		$(VPY) -c 'import sys, nbformat; from nbclient import NotebookClient; nb = nbformat.read(sys.argv[1], as_version=4); NotebookClient(nb, timeout=600, kernel_name="python3").execute(); print("ran", sys.argv[1])' "$$nb" || exit 1; \
	done

bench:
	$(CARGO) bench

# Peers on the same lake (not part of `make test`): 1-minute OHLCV of every token on 10M swaps.
# Builds the lake once under target/compare-lake; see benches/compare/ohlcv.py.
compare: venv
	$(CARGO) build --release --bin dexlake
	$(VPY) benches/compare/ohlcv.py --dexlake "$$($(CARGO) metadata --format-version 1 --no-deps | $(VPY) -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/dexlake" $(COMPARE_ARGS)

# FIFO realized PnL of every (wallet, token) on 10M trades against a Python FIFO loop, polars
# and DuckDB (not part of `make test`). Builds its lake once under target/compare-pnl-lake;
# see benches/compare/pnl.py.
compare-pnl: venv
	$(CARGO) build --release --bin dexlake
	$(VPY) benches/compare/pnl.py --dexlake "$$($(CARGO) metadata --format-version 1 --no-deps | $(VPY) -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/dexlake" $(COMPARE_ARGS)
