# Two entry points: `make demo` runs the main job, `make test` runs the whole suite.
# Each creates its own virtual environment in .venv when it is missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint soak bench-scaling bench-ui bench bench-durable bench-all bench-mining bench-instructions bench-breakdown bench-event-table bench-tracing bench-threads bench-streaming bench-regions bench-replay clean

$(BIN)/python: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(BIN)/python

demo: $(BIN)/python
	$(BIN)/python agents/support_triage.py

lint: $(BIN)/python
	$(BIN)/ruff check statechart tests benchmarks agents
	$(BIN)/ruff format --check statechart tests benchmarks agents
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint
	$(BIN)/python -m pytest

soak: $(BIN)/python   # about half a minute, needs PostgreSQL: 1,000 runs, 4 workers killed at random
	$(BIN)/python -m tests.support.soak --runs 1000

bench-scaling: $(BIN)/python   # about 3 minutes, needs PostgreSQL; writes benchmarks/results/scaling.json
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	$(BIN)/python benchmarks/scaling.py

bench-ui: $(BIN)/python   # about 3 minutes, needs PostgreSQL; writes benchmarks/results/ui.json
	$(BIN)/python benchmarks/ui.py

bench: $(BIN)/python
	$(BIN)/python benchmarks/overhead.py

bench-durable: $(BIN)/python   # about three minutes; writes benchmarks/results/durable.json
	$(BIN)/python benchmarks/durable.py

bench-mining: $(BIN)/python   # about ten seconds; writes benchmarks/results/mining.json
	$(BIN)/python benchmarks/mining.py

bench-instructions: $(BIN)/python   # about 6 minutes, needs valgrind; instructions per transition
	$(BIN)/python benchmarks/instructions.py --out benchmarks/results/instructions.json

bench-breakdown: $(BIN)/python   # about 4 minutes, needs valgrind; where a transition's instructions go
	$(BIN)/python benchmarks/breakdown.py --out benchmarks/results/breakdown.json

bench-tracing: $(BIN)/python   # about four minutes; writes benchmarks/results/tracing.json
	$(BIN)/python benchmarks/tracing.py --repeats 7

bench-threads: $(BIN)/python   # about a minute; a def tool in a worker thread vs inline
	$(BIN)/python benchmarks/threads.py

bench-streaming: $(BIN)/python   # about 5 minutes, needs valgrind; framework cost per streamed chunk
	$(BIN)/python benchmarks/streaming.py

bench-regions: $(BIN)/python   # about a minute; a parallel state's cost per transition
	$(BIN)/python benchmarks/regions.py

bench-replay: $(BIN)/python   # about two minutes; 10,000 recorded runs replayed against their chart
	$(BIN)/python benchmarks/replay.py

bench-event-table: $(BIN)/python   # about half a minute; WAL frames per commit by table shape
	$(BIN)/python benchmarks/event_table.py

bench-all: $(BIN)/python   # about 30 minutes; writes benchmarks/results/run_all.json
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV)
