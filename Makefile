# Two commands for a fresh machine: `make run` (the app) and `make test` (the tests).
# Both create .venv on first use and install what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# `make run` installs what running needs; `make test` adds the test tools (pytest, Playwright,
# ruff, SimPy, Hypothesis). Each has its own stamp, redone when pyproject.toml changes.
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed

.PHONY: run test bench screenshots lint clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e .
	touch $(RUN_STAMP)

$(STAMP): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP) $(RUN_STAMP)

# serves on http://localhost:8501 (no browser is opened); another port: STREAMLIT_SERVER_PORT=8600
run: $(RUN_STAMP)
	$(PY) -m streamlit run serve.py

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(PY) -m pytest

bench: $(STAMP)
	@for f in bench/bench_*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

# refresh the README's screenshots from the browser tests (they write tests/artifacts/)
screenshots: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider tests/e2e/test_browser.py tests/e2e/test_browser_newcomer.py \
		tests/e2e/test_browser_planner.py tests/e2e/test_browser_fleet.py
	cp tests/artifacts/demand_alpha_0.2.png docs/screenshot-demand.png
	cp tests/artifacts/capacity_target_30.png docs/screenshot-capacity.png
	cp tests/artifacts/first_run.png docs/screenshot-first-run.png
	cp tests/artifacts/capacity_report.png docs/screenshot-report.png
	cp tests/artifacts/planner_dispatch.png docs/screenshot-demo-dispatch.png
	cp tests/artifacts/fleet_plan.png docs/screenshot-fleet.png

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache tests/artifacts
