# wfqueue developer commands. Each target creates .venv and installs on first use.
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
DEMO_REPO := .demo/sample-api
DEMO_REQUIREMENT := Add per-user rate limiting to the API

.PHONY: install check demo test unit bench clean reliability

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	rm -rf $(DEMO_REPO) && mkdir -p .demo && cp -R examples/sample-api $(DEMO_REPO)
	@# A repository of its own (this one ignores .demo/), so that `wfqueue execute` can run the plan from its HEAD.
	cd $(DEMO_REPO) && git init -q && git add -A && \
		git -c user.name=wfqueue -c user.email=demo@wfqueue.invalid -c commit.gpgsign=false commit -q \
		-m "sample-api, as examples/ has it"
	$(BIN)/wfqueue collab-plan "$(DEMO_REQUIREMENT)" --repo $(DEMO_REPO) --max-agents 4 -y
	@# The repository copy holds exactly one plan: the glob names it whatever its date.
	$(BIN)/wfqueue execute $(DEMO_REPO)/.workflow/.planning/CPLAN-* --dry-run

# Integration tests mostly wait on workers and Redis, so four in parallel fit two cores (on a 2-core
# machine, from a fresh clone: 398 s with four, 480 s with three). Tests are handed out one at a time
# (--maxschedchunk 1) so the long ones, collected first, start on different workers. `make reliability`
# runs only tests/reliability (faults, bad input, attack; docs/RELIABILITY.md).
PYTEST_PARALLEL := -n 4 --maxschedchunk 1 --dist loadgroup

# Lint and type checks run first (config in pyproject.toml): a finding fails `make test`, and so CI.
test: $(STAMP) check
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) --durations=15

check: $(STAMP)
	$(BIN)/python -m ruff check .
	$(BIN)/python -m mypy

reliability: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) tests/reliability

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

bench: $(STAMP)
	$(BIN)/python bench/collab_speedup.py
	$(BIN)/python bench/execute_speedup.py

clean:
	rm -rf .demo .pytest_cache
