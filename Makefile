# Two entry points, each working on a fresh machine: they create .venv and install
# the pinned requirements first (only when the requirements changed; PyTorch for the
# launch-chain harness only where it can run, see launch-deps).
#   make plan STACK=dev      offline plan of a stack (no AWS account, no Pulumi CLI);
#                            FORMAT=json prints only the plan's JSON on stdout; OUT=dir also
#                            writes plan.json and the Kubernetes objects there
#   make test                lint (code and CI workflows), type check and the test suite
#   make diagram             regenerate the README's architecture diagram from the dev plan
#   make schema              regenerate schema/stack-config.schema.json from the config models
#   make docs                regenerate the generated parts of docs/ (configuration reference, recipe table, stack needs)
#
# Everything but a command's own output goes to stderr (the install says what it is doing and
# keeps pip's output in .venv/install.log, shown only when it fails), so stdout stays clean.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
CHECKOV_VENV := .venv-checkov
STACK  ?= dev
FORMAT ?= table
OUT    ?=
WORKFLOWS := $(wildcard .github/workflows/*.yml .github/workflows/*.yaml)

.PHONY: plan test lint typecheck pytest venv diagram schema docs clean launch-deps checkov

$(VENV)/.installed: requirements.txt requirements-dev.txt
	@echo "setting up $(VENV): installing the pinned requirements (first run or changed requirements, 1-2 minutes)" >&2
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) >&2
	@$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt \
	  > $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log >&2; echo "pip install failed (log: $(VENV)/install.log)" >&2; exit 1; }
	@touch $@
	@echo "$(VENV) is ready" >&2

# The launch-chain harness (tests/launch) runs real sshd, Open MPI and PyTorch in network and
# mount namespaces, so only as root: there, install the Debian tools when missing and, where
# a namespace can be made, the harness's PyTorch (requirements-launch.txt; CPU wheel). Elsewhere
# (a GitHub-hosted runner is not root) nothing is installed and the harness skips with one line.
LAUNCH_TOOLS := ip unshare setpriv mpirun sshd ssh-keygen
launch-deps: venv
	@if [ "$$(id -u)" != 0 ]; then echo "launch-chain harness: not root, not installed (tests/launch will skip)" >&2; exit 0; fi; \
	missing=; for t in $(LAUNCH_TOOLS); do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing the launch-chain harness's tools (missing:$$missing)"  >&2; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    openssh-server openmpi-bin iproute2 util-linux >/dev/null; \
	fi; \
	if ip netns add ltprobe$$$$ 2>/dev/null && ip netns del ltprobe$$$$; then $(MAKE) --no-print-directory $(VENV)/.launch; \
	else echo "launch-chain harness: no network namespaces here, not installed (tests/launch will skip)" >&2; fi

$(VENV)/.launch: $(VENV)/.installed requirements-launch.txt
	@echo "installing the launch-chain harness's PyTorch (requirements-launch.txt)" >&2
	@$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-launch.txt \
	  > $(VENV)/install-launch.log 2>&1 || { cat $(VENV)/install-launch.log >&2; echo "pip install failed (log: $(VENV)/install-launch.log)" >&2; exit 1; }
	@touch $@

venv: $(VENV)/.installed

# checkov in a virtualenv of its own: its pins clash with requirements.txt (requirements-checkov.txt).
$(CHECKOV_VENV)/.installed: requirements-checkov.txt
	@echo "setting up $(CHECKOV_VENV): installing checkov for the pod security tests (first run or changed pin, about 1 minute)" >&2
	@test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV) >&2
	@$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-checkov.txt \
	  > $(CHECKOV_VENV)/install.log 2>&1 || { cat $(CHECKOV_VENV)/install.log >&2; echo "pip install failed (log: $(CHECKOV_VENV)/install.log)" >&2; exit 1; }
	@touch $@
	@echo "$(CHECKOV_VENV) is ready" >&2

checkov: $(CHECKOV_VENV)/.installed

plan: venv
	@$(PY) -m tools.plan --stack $(STACK) --format $(FORMAT) $(if $(OUT),--out $(OUT))

# Workflows: structure against the GitHub workflow schema (vendored in check-jsonschema, no
# network), security with zizmor's offline audits (unpinned actions, injection, permissions...).
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows $(WORKFLOWS)
	$(VENV)/bin/zizmor --offline --no-progress --quiet .github/workflows

diagram: venv
	$(PY) -m tools.diagram --stack dev --update-readme

schema: venv
	$(PY) -m tools.schema --write

docs: venv
	$(PY) -m tools.docs

typecheck: venv
	$(VENV)/bin/mypy

pytest: venv launch-deps checkov
	$(VENV)/bin/pytest -q -n auto

test: lint typecheck pytest

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) .mypy_cache .pytest_cache .ruff_cache
