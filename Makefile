# Developer entry points. `make test` is what CI runs (see .ci/run and README).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test test-full lint bench bench-all demo venv clean docs

# -qq and the warning filter: pip's and setuptools' banners (an editable install's "be careful with folders",
# an index location this machine's pip configuration names) are nothing a user can act on; errors still show
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -qq --upgrade pip
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install -qq -e '.[export,test,dev]'
	touch $(STAMP)

venv: $(STAMP)

test: lint  ## four workers: the suite mostly waits (on processes, sockets, real time), see README
	$(BIN)/python -m pytest -n 4 --dist loadgroup --durations=15

test-full: lint  ## the same suite at full size (the cluster export, the long reliability runs), JVMs with Java's defaults
	OCIGROUP_FULL_SCALE=1 $(BIN)/python -m pytest -n 4 --dist loadgroup --durations=15

lint: $(STAMP)
	$(BIN)/ruff format --check ocigroup_cli tests benchmarks reliability
	$(BIN)/ruff check ocigroup_cli tests benchmarks reliability
	$(BIN)/mypy

demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/demo.sh

bench-all: $(STAMP)  ## every benchmark, then one table of figures and ratios
	$(BIN)/python -m benchmarks.all

bench: $(STAMP)
	$(BIN)/python -m benchmarks.emulator_bench

.PHONY: docs
docs: $(STAMP)  ## completions/, man/ocigroup.1 and docs/commands.md, generated from the app
	$(BIN)/python -m ocigroup_cli.docgen

clean:
	rm -rf $(VENV) build *.egg-info
