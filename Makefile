# One entry point for developers and CI. `make demo` and `make test` are the README's two commands.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test lint bench clean

setup:
	@bash scripts/setup.sh

## The main job: an agent learning online on the embedded default (SQLite, MiniLM, SmolLM2).
demo: setup
	$(PY) scripts/demo.py

## Every test: unit, conformance (SQLite and a real Postgres), real model, real environments,
## real servers, headless browser.
test: setup
	$(PY) -m pytest -q

lint: setup
	$(VENV)/bin/ruff check src tests bench benchmarks scripts
	$(VENV)/bin/mypy

## One table of ratios, each against its peer or reference measured in the same run (minutes).
bench: setup
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 $(PY) benchmarks/bench_all.py

clean:
	rm -rf $(VENV) .cache .pytest_cache .mypy_cache .ruff_cache runs artifacts
