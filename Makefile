# `make demo` and `make test` set themselves up on a machine with only Python 3.11+ and git.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint format clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@if command -v uv >/dev/null 2>&1; then \
		uv pip install --python $(BIN)/python -q -e '.[test]'; \
	else \
		$(BIN)/python -m pip install -q --upgrade pip && $(BIN)/python -m pip install -q -e '.[test]'; \
	fi
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/cairn demo

test: $(STAMP)
	$(BIN)/ruff check src tests examples benchmarks
	$(BIN)/ruff format --check src tests examples benchmarks
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests examples benchmarks
	$(BIN)/ruff format --check src tests examples benchmarks

format: $(STAMP)
	$(BIN)/ruff format src tests examples benchmarks
	$(BIN)/ruff check --fix src tests examples benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
