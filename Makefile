# Tidemark. `make run` starts it embedded (no servers); `make test` runs the whole suite;
# `make demo` plays a scripted scenario end to end.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
# Running needs only requirements/runtime.txt; tests, the demo and benchmarks need dev.txt,
# which also installs the Python client and CLI (clients/python) in editable mode: a change
# to its pyproject.toml (a dependency, a console script) reinstalls it too.
CLIENT := clients/python/pyproject.toml
RUNTIME := $(VENV)/.runtime-$(shell cat requirements/runtime.txt | cksum | cut -d' ' -f1)
DEV := $(VENV)/.dev-$(shell cat requirements/dev.txt $(CLIENT) | cksum | cut -d' ' -f1)
# The documentation site's tools have an environment of their own (requirements/docs.in
# says why).
DOCS_VENV := var/docs-venv
DOCS_TOOLS := $(DOCS_VENV)/.installed-$(shell cat requirements/docs.txt | cksum | cut -d' ' -f1)

.PHONY: run demo test test-oracle docs docs-serve lint format lock bench bench-poll bench-lineage clean

$(RUNTIME): requirements/runtime.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements/runtime.txt
	@rm -f $(VENV)/.runtime-* && touch $@

$(DEV): requirements/dev.txt $(CLIENT)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements/dev.txt
	@rm -f $(VENV)/.dev-* $(VENV)/.runtime-* && touch $@ \
		$(VENV)/.runtime-$(shell cat requirements/runtime.txt | cksum | cut -d' ' -f1)

$(DOCS_TOOLS): requirements/docs.txt
	@test -x $(DOCS_VENV)/bin/python || $(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-r requirements/docs.txt
	@rm -f $(DOCS_VENV)/.installed-* && touch $@

run: $(RUNTIME)
	bin/run

# The scripted scenario, embedded (no servers); with DATABASE_URL, WATCHDOG_DATABASE_URL
# and CELERY_BROKER_URL set, only with DEMO_ARGS=--demo.
demo: $(DEV)
	$(PY) -m demo $(DEMO_ARGS)

# Both suites always run; the summary gives each one's result (about 15 minutes on 2 cores).
test: $(DEV)
	bin/ensure-services
	bin/ensure-browser
	bin/test $(PYTEST_ARGS)

# The documentation site (mkdocs, material theme) into site/: a broken link, anchor or
# page missing from the navigation fails the build.
docs: $(DOCS_TOOLS)
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --clean --site-dir site

docs-serve: $(DOCS_TOOLS)
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs serve --strict --dev-addr 127.0.0.1:8002

# The oracle property tests (watchdog judgement, catalog freshness, the DST policy, cron checks) at
# length: TIDEMARK_ORACLE_EXAMPLES examples each (2000 by default; about an hour here).
test-oracle: $(DEV)
	bin/ensure-services
	TIDEMARK_ORACLE_EXAMPLES=$${TIDEMARK_ORACLE_EXAMPLES:-2000} $(PY) -m pytest -o timeout=0 \
		tests/watchdog/test_oracle.py tests/catalog/test_freshness_oracle.py \
		tests/schedules/test_dst_policy.py tests/schedules/test_cron_checks_oracle.py

lint: $(DEV)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: $(DEV)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# Host-free pins: no index URL or absolute path is recorded in the lock; dev.txt ends with
# the client package as a path relative to the repository (make runs pip from here).
lock: $(DEV)
	$(VENV)/bin/uv pip compile pyproject.toml --no-emit-index-url --no-header \
		--no-annotate -p 3.11 -o requirements/runtime.txt
	$(VENV)/bin/uv pip compile pyproject.toml --extra dev -c requirements/runtime.txt \
		--no-emit-index-url --no-header --no-annotate -p 3.11 -o requirements/dev.txt
	echo "-e ./clients/python" >> requirements/dev.txt
	$(VENV)/bin/uv pip compile requirements/docs.in --no-emit-index-url --no-header \
		--no-annotate -p 3.11 -o requirements/docs.txt

bench: $(DEV)
	bin/ensure-services
	$(PY) bench/ingest.py

bench-poll: $(DEV)
	bin/ensure-services
	$(PY) bench/poll.py

bench-lineage: $(DEV)
	bin/ensure-services
	$(PY) bench/lineage.py

clean:
	rm -rf var
