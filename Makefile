# Two entry points, each working on a fresh machine: they create .venv and install
# the pinned requirements first (only when the requirements changed; PyTorch for the
# launch-chain harness only by `make test` as root, see launch-deps).
#   make plan STACK=dev      offline plan of a stack (no AWS account, no Pulumi CLI)
#   make test                lint (code and CI workflows), type check and the test suite
#   make diagram             regenerate the README's architecture diagram from the dev plan

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STACK  ?= dev
FORMAT ?= table
WORKFLOWS := $(wildcard .github/workflows/*.yml .github/workflows/*.yaml)

.PHONY: plan test lint typecheck pytest venv diagram clean launch-deps

$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

# The launch-chain harness (tests/launch) runs real sshd, Open MPI and PyTorch in network and
# mount namespaces, so only as root: there, install the Debian tools when missing and, where
# a namespace can be made, the harness's PyTorch (requirements-launch.txt; CPU wheel). Elsewhere
# (a GitHub-hosted runner is not root) nothing is installed and the harness skips with one line.
LAUNCH_TOOLS := ip unshare setpriv mpirun sshd ssh-keygen
launch-deps: venv
	@if [ "$$(id -u)" != 0 ]; then echo "launch-chain harness: not root, not installed (tests/launch will skip)"; exit 0; fi; \
	missing=; for t in $(LAUNCH_TOOLS); do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing the launch-chain harness's tools (missing:$$missing)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    openssh-server openmpi-bin iproute2 util-linux >/dev/null; \
	fi; \
	if ip netns add ltprobe$$$$ 2>/dev/null && ip netns del ltprobe$$$$; then $(MAKE) --no-print-directory $(VENV)/.launch; \
	else echo "launch-chain harness: no network namespaces here, not installed (tests/launch will skip)"; fi

$(VENV)/.launch: $(VENV)/.installed requirements-launch.txt
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-launch.txt
	touch $@

venv: $(VENV)/.installed

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

pytest: venv launch-deps
	$(VENV)/bin/pytest -q -n auto

test: lint typecheck pytest

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
