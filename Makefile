# Rocky developer entry points. Every target creates .venv itself; nothing needs installing by hand.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
# the reference connector's duckdb CLI + postgres extension (tests/engine/connectors/toolchain.py)
TOOLS_STAMP := $(VENV)/.installed-test-tools
PYTEST_ARGS ?=
# Two pytest-xdist workers: most tests wait on a child process, a server or the disk, so two keep both
# cores busy (the whole suite passed this way on a machine at load average 20). PYTEST_WORKERS=0 runs serially.
PYTEST_WORKERS ?= 2

.PHONY: venv demo test lint bench test-deps demo-dagster clean mutate

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

## make demo: seed the DuckDB playground, replicate raw__* into staging__*, then run the models
demo: venv
	cd examples/playground && ../../$(BIN)/python seed.py
	cd examples/playground && ../../$(BIN)/rocky run --pipeline raw --output table
	cd examples/playground && ../../$(BIN)/rocky run --pipeline models --output table
	cd examples/playground && ../../$(BIN)/rocky run --pipeline quality --output table
	cd examples/playground && ../../$(BIN)/python show_marts.py

## make demo-dagster: seed the playground and start `dagster dev` on examples/dagster (UI: http://127.0.0.1:3000)
demo-dagster: venv
	cd examples/playground && ../../$(BIN)/python seed.py
	mkdir -p .dagster-home
	DAGSTER_HOME=$(CURDIR)/.dagster-home $(BIN)/dagster dev -w examples/dagster/workspace.yaml -h 127.0.0.1 -p 3000

## make test: install what the tests need (venv, PostgreSQL, Redis) and run the whole suite
test: venv test-deps
	$(BIN)/python -m pytest -q --durations=15 -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

$(TOOLS_STAMP): $(STAMP) tests/engine/connectors/toolchain.py
	$(BIN)/python -m tests.engine.connectors.toolchain $(TOOLS_STAMP)

## make test-deps: install once what the tests start (PostgreSQL, Redis, Spark, the connector toolchain, the
## published clients' venv);
## under ROCKY_REQUIRE_SERVICES=1 (CI) anything that cannot be installed fails here with the reason
test-deps: venv $(TOOLS_STAMP)
	bash scripts/install-test-deps.sh
	bash scripts/install-spark.sh $(BIN)/python
	bash scripts/setup-published-client.sh $(VENV) .venv-published

lint: venv
	$(BIN)/ruff check rocky_engine dagster_rocky tests bench examples
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

## make bench: every performance budget (DAG vs raw DuckDB and dbt, replication, replication vs dlt/Sling, dagster, tick, serve, connectors, startup) -> bench/results.md
bench: venv
	bash bench/setup_dbt.sh
	bash bench/setup_peers.sh
	$(BIN)/python bench/run_bench.py

## make mutate: named mutations of the risky lines, each against its tests, in a temp copy -> bench/mutation.md
## (not part of CI: a few minutes)
mutate: venv
	$(BIN)/python bench/mutate.py

clean:
	rm -rf $(VENV) .venv-published .venv-bench .venv-bench-duckdb15 .venv-bench-rocky .dagster-home .pytest_cache .mypy_cache .ruff_cache bench/work
