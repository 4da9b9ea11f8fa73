# Developer entry points. `make test` is what CI runs (see .ci/run and README).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TOOLS := $(VENV)/tools

.PHONY: test test-full lint bench bench-all demo venv clean docs

# -qq and the warning filter: pip's and setuptools' banners (an editable install's "be careful with folders",
# an index location this machine's pip configuration names) are nothing a user can act on; errors still show
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -qq --upgrade pip
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install -qq -e '.[export,test,dev]'
	touch $(STAMP)

venv: $(STAMP)

# Debian's promtool, which tests/test_alerting_rules.py runs on docs/alerting.md's rules, and its Prometheus server,
# which tests/commands/test_metrics.py runs as a scraper of a watch (for the test's life, on loopback): unpacked from
# its package (no root, no daemon), or the ones installed. One that cannot be had is said here, and that test skips.
$(TOOLS)/promtool:
	mkdir -p $(TOOLS)
	if command -v promtool >/dev/null; then ln -sf "$$(command -v promtool)" $@; \
	  if command -v prometheus >/dev/null; then ln -sf "$$(command -v prometheus)" $(TOOLS)/prometheus; fi; \
	elif (cd $(TOOLS) && apt-get download -qq prometheus >/dev/null 2>&1) && dpkg -x $(TOOLS)/prometheus_*.deb $(TOOLS)/deb; \
	then ln -sf deb/usr/bin/promtool $@ && ln -sf deb/usr/bin/prometheus $(TOOLS)/prometheus && rm -f $(TOOLS)/prometheus_*.deb; \
	else echo "make: no promtool (apt-get download prometheus failed): the alerting rules are checked by name only" >&2; fi

# Oracle's TypeScript SDK (oci-streaming, oci-objectstorage), which tests/emulator/test_typescript_sdk.py runs against
# the emulator with the machine's Node.js: installed from the npm registry at the versions tests/typescript pins. One
# that cannot be had is said here, and that test skips.
$(TOOLS)/ts/.installed: tests/typescript/package.json tests/typescript/package-lock.json
	mkdir -p $(TOOLS)/ts
	cp tests/typescript/package.json tests/typescript/package-lock.json $(TOOLS)/ts/
	if command -v npm >/dev/null && (cd $(TOOLS)/ts && npm ci --no-audit --no-fund --loglevel=error >/dev/null); \
	then touch $@; else echo "make: no TypeScript SDK (npm ci failed or no npm): it is not run against the emulator" >&2; fi

# With bytecode caches, as an installed package has them (pip compiles at install): some CI machines and sandboxes
# set PYTHONDONTWRITEBYTECODE, and then each of the suite's ~650 `ocigroup` processes compiled the package again
# (0.08 CPU-s each) and each worker rewrote every test module's asserts.
test: lint $(TOOLS)/promtool $(TOOLS)/ts/.installed  ## six workers (README says how the suite's time is spent)
	PATH="$(CURDIR)/$(TOOLS):$$PATH" OCIGROUP_TS_SDK="$(CURDIR)/$(TOOLS)/ts/node_modules" PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n 6 --dist loadgroup --durations=15

test-full: lint $(TOOLS)/promtool $(TOOLS)/ts/.installed  ## the same suite at full size (the cluster export, the long reliability runs), JVMs with Java's defaults
	PATH="$(CURDIR)/$(TOOLS):$$PATH" OCIGROUP_TS_SDK="$(CURDIR)/$(TOOLS)/ts/node_modules" PYTHONDONTWRITEBYTECODE= OCIGROUP_FULL_SCALE=1 $(BIN)/python -m pytest -n 6 --dist loadgroup --durations=15

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
