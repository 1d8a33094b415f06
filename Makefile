# `make demo` and `make test` set themselves up on a machine with only Python 3.11+ and git.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# System packages (Debian names): the sandbox for agents' commands, npm for the npm tests,
# socat for the coding CLIs' egress bridge, curl for the egress probes, iproute2 for the
# host-loss test's network namespaces, chromium and libatomic1 (Playwright's driver) for the
# browser tests (tests/web).
DEMO_TOOLS := bubblewrap
TEST_TOOLS := bubblewrap socat curl iproute2 nodejs npm chromium libatomic1
# pytest-xdist workers for `make test`: the tests mostly wait on git, subprocesses and
# PostgreSQL, so more workers than cores pay. 0 runs the suite in one process.
PYTEST_WORKERS ?= 3

.PHONY: demo test lint format clean demo-tools test-tools
# Prerequisites in the order written: the system check stops a target before anything runs.
.NOTPARALLEL:

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@if command -v uv >/dev/null 2>&1; then \
		uv pip install --python $(BIN)/python -q -e '.[test]'; \
	else \
		$(BIN)/python -m pip install -q --upgrade pip && $(BIN)/python -m pip install -q -e '.[test]'; \
	fi
	@touch $(STAMP)

demo-tools:
	@sh scripts/require-tools $(DEMO_TOOLS)

test-tools:
	@sh scripts/require-tools $(TEST_TOOLS)

demo: demo-tools $(STAMP)
	$(BIN)/cairn demo

test: test-tools $(STAMP)
	$(BIN)/ruff check src tests examples benchmarks
	$(BIN)/ruff format --check src tests examples benchmarks
	$(BIN)/mypy --strict src/cairn
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests examples benchmarks
	$(BIN)/ruff format --check src tests examples benchmarks
	$(BIN)/mypy --strict src/cairn

format: $(STAMP)
	$(BIN)/ruff format src tests examples benchmarks
	$(BIN)/ruff check --fix src tests examples benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
