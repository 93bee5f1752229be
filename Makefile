# Two entry points, each working on a fresh machine: they create .venv and install
# the pinned requirements first (only when the requirements changed).
#   make plan STACK=dev      offline plan of a stack (no AWS account, no Pulumi CLI)
#   make test                lint, type check and the test suite

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STACK  ?= dev
FORMAT ?= table

.PHONY: plan test lint typecheck pytest venv clean

$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

venv: $(VENV)/.installed

plan: venv
	$(PY) -m infra.plan --stack $(STACK) --format $(FORMAT)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: venv
	$(VENV)/bin/mypy

pytest: venv
	$(VENV)/bin/pytest -q

test: lint typecheck pytest

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
