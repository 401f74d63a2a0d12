# quota console — the two commands: `make run` (the dashboard) and `make test` (the suite).
# Everything installs itself: the virtualenv (pinned requirements), Debian's Chromium for the
# browser tests, and the Kafka broker jars (fetched with mvn into .cache/, with the client-telemetry
# plugin built from scripts/kafka/telemetry-plugin).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test test-fast faults kafka-up kafka-down venv chromium prometheus jars bench clean

$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -r requirements.txt
	@$(PY) -m pip install -q --no-deps -e .
	@touch $(STAMP)

venv: $(STAMP)

# Browser tests drive Debian's Chromium (Playwright's own browser download is not available).
chromium:
	@command -v chromium >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# The monitoring tests run Debian's Prometheus (2.42: prometheus and promtool) on 127.0.0.1.
# The package's own service must not start (it would listen on every address): a policy-rc.d
# that refuses to start services is put in place for the install when none is there, and a
# service that started anyway is stopped.
prometheus:
	@command -v promtool >/dev/null && command -v prometheus >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  POLICY=/usr/sbin/policy-rc.d; OWN=; \
	  if [ ! -e $$POLICY ]; then printf '#!/bin/sh\nexit 101\n' | $$SUDO tee $$POLICY >/dev/null; \
	    $$SUDO chmod 755 $$POLICY; OWN=1; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    --no-install-recommends prometheus >/dev/null; STATUS=$$?; \
	  [ -z "$$OWN" ] || $$SUDO rm -f $$POLICY; \
	  $$SUDO service prometheus stop >/dev/null 2>&1 || true; \
	  exit $$STATUS; }

jars: $(STAMP)
	@$(PY) -c "import localkafka; localkafka.ensure_jars()"
	@$(PY) -c "import pipeline.jars; pipeline.jars.ensure_spark_jars()"

## The dashboard: on the cluster configured in .streamlit/secrets.toml or QUOTA_BOOTSTRAP_SERVERS,
## else on a local broker it starts itself and seeds with demo quotas.
run: jars
	@$(PY) scripts/run_dashboard.py $(ARGS)

## The whole suite: unit tables, the real broker, the real browser, real Spark.
test: $(STAMP) chromium prometheus jars
	@$(PY) -m pytest -q -n 2 --dist loadfile $(PYTEST_ARGS)

## The long fault runs (not part of `make test`, which keeps one short case of each): 100 kills
## mid-apply, 50 rounds of two concurrent applies, a broker killed mid-apply, and the input
## generators at full scale. ARGS go to scripts/faults.py (e.g. ARGS="--rounds 10").
faults: jars
	@$(PY) scripts/faults.py $(ARGS)
	@$(PY) scripts/fuzz_inputs.py
	@QUOTA_SLOW_TESTS=1 $(PY) -m pytest -q -m slow tests/telemetry/test_serve_metrics_hardening.py

## Without the broker and the browser (a quick loop while editing).
test-fast: $(STAMP)
	@$(PY) -m pytest -q -m "not kafka and not browser" $(PYTEST_ARGS)

## A local broker for your own use (ARGS="--brokers 3" for a cluster); the last line printed is
## its bootstrap address.
kafka-up: jars
	@$(PY) -m localkafka up $(ARGS)

kafka-down: $(STAMP)
	@$(PY) -m localkafka down

bench: jars
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .cache .pytest_cache .hypothesis artifacts
