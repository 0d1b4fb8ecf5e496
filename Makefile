# Tidemark. `make run` starts it embedded (no servers); `make test` runs the whole suite;
# `make demo` plays a scripted scenario end to end.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat requirements/dev.txt | cksum | cut -d' ' -f1)

.PHONY: run demo test test-main test-embedded lint format lock bench bench-poll bench-lineage clean

$(STAMP): requirements/dev.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements/dev.txt
	@rm -f $(VENV)/.installed-* && touch $@

run: $(STAMP)
	bin/run

# The scripted scenario, embedded (no servers); with DATABASE_URL, WATCHDOG_DATABASE_URL
# and CELERY_BROKER_URL set, only with DEMO_ARGS=--demo.
demo: $(STAMP)
	$(PY) -m demo $(DEMO_ARGS)

test: $(STAMP)
	bin/ensure-services
	bin/ensure-browser
	$(PY) -m pytest $(PYTEST_ARGS)
	$(PY) -m pytest --ds=config.settings.test_embedded tests/embedded $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# Host-free pins: no index URL or local path is recorded in the lock.
lock:
	$(VENV)/bin/uv pip compile pyproject.toml --extra dev --no-emit-index-url --no-header \
		--no-annotate -p 3.11 -o requirements/dev.txt

bench: $(STAMP)
	bin/ensure-services
	$(PY) bench/ingest.py

bench-poll: $(STAMP)
	bin/ensure-services
	$(PY) bench/poll.py

bench-lineage: $(STAMP)
	bin/ensure-services
	$(PY) bench/lineage.py

clean:
	rm -rf var
