# Two entry points, each working on a fresh machine: they create .venv and install
# the pinned requirements first (only when the requirements changed).
#   make plan STACK=dev      offline plan of a stack (no AWS account, no Pulumi CLI)
#   make test                lint (code and CI workflows), type check and the test suite
#   make diagram             regenerate the README's architecture diagram from the dev plan

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
CHECKOV_VENV := .venv-checkov
STACK  ?= dev
FORMAT ?= table
WORKFLOWS := $(wildcard .github/workflows/*.yml .github/workflows/*.yaml)

.PHONY: plan test lint typecheck pytest venv diagram clean launch-deps checkov

$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-launch.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt -r requirements-launch.txt
	touch $@

# The launch-chain harness (tests/launch) runs real sshd, Open MPI and namespaces: as root,
# install them from Debian's packages when missing; elsewhere the harness skips with one line.
LAUNCH_TOOLS := ip unshare mpirun sshd ssh-keygen
launch-deps:
	@missing=; for t in $(LAUNCH_TOOLS); do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ]; then \
	  echo "installing the launch-chain harness's tools (missing:$$missing)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    openssh-server openmpi-bin iproute2 util-linux >/dev/null; \
	fi

venv: $(VENV)/.installed

# checkov in a virtualenv of its own: its pins clash with requirements.txt (requirements-checkov.txt).
$(CHECKOV_VENV)/.installed: requirements-checkov.txt
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-checkov.txt
	touch $@

checkov: $(CHECKOV_VENV)/.installed

plan: venv
	$(PY) -m tools.plan --stack $(STACK) --format $(FORMAT)

# Workflows: structure against the GitHub workflow schema (vendored in check-jsonschema, no
# network), security with zizmor's offline audits (unpinned actions, injection, permissions...).
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows $(WORKFLOWS)
	$(VENV)/bin/zizmor --offline --no-progress --quiet .github/workflows

diagram: venv
	$(PY) -m tools.diagram --stack dev --update-readme

typecheck: venv
	$(VENV)/bin/mypy

pytest: venv launch-deps checkov
	$(VENV)/bin/pytest -q -n auto

test: lint typecheck pytest

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) .mypy_cache .pytest_cache .ruff_cache
