# `make` alone prints `make help`: every target and every command under tools/, one line each
# (a target is listed by its `## ` comment; a command by the first line of its docstring;
# tests/repo/test_makefile.py fails when one is missing). Each target that runs something creates
# .venv and installs the pinned requirements first (only when the requirements changed).
#
# STACK=<name> means your Pulumi.<name>.yaml at the root if there is one, else the example of that
# name: examples/Pulumi.<name>.yaml, or the project's own dev, Pulumi.dev.yaml at the root (tools/cli.py;
# stderr says which when yours hides an example).
# FORMAT=json prints only the plan's JSON on stdout; OUT=dir also writes plan.json and the
# Kubernetes objects there. LAUNCH_HARNESS=1 (as root; .ci/run sets it) installs and runs the
# launch-chain harness (tests/launch); without it nothing is installed and it skips.
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
FROM   ?=
LOWER  ?=
LIVE   ?=
LAUNCH_HARNESS ?=
WORKFLOWS := $(wildcard .github/workflows/*.yml .github/workflows/*.yaml)

.DEFAULT_GOAL := help
.PHONY: help plan cost preflight new-stack snapshot test test-fast lint lint-code typecheck pytest venv diagram \
  schema docs clean launch-deps checkov

help: ## this list; `make` alone prints it and builds nothing
	@echo "make targets (STACK=<name>: your Pulumi.<name>.yaml at the root, else the example <name>):"
	@awk -F ':[^#]*## ' '/^[a-z][a-z-]*:[^=]*## / {printf "  make %-12s %s\n", $$1, $$2}' $(firstword $(MAKEFILE_LIST))
	@echo "commands (.venv/bin/python -m tools.<name> --help for their options):"
	@for f in $$(grep -l '^if __name__ == "__main__":' tools/*.py); do \
	  m=$${f#tools/}; printf '  python -m tools.%-12s %s\n' "$${m%.py}" "$$(head -n 1 $$f | sed 's/^"""//; s/"""$$//')"; \
	done

# new-stack and snapshot make or hold a stack of yours: say which, before anything is installed.
ifneq ($(filter new-stack snapshot,$(MAKECMDGOALS)),)
  ifeq ($(origin STACK),file)
    $(error make $(filter new-stack snapshot,$(MAKECMDGOALS)) needs STACK=<name> (your stack: Pulumi.<name>.yaml at the root))
  endif
endif
ifneq ($(filter diff,$(MAKECMDGOALS)),)
  ifeq ($(FILE)$(BASE),)
    $(error make diff needs FILE=<edited stack file> or BASE=<git ref> (the deployed file is STACK's own, or it at BASE))
  endif
endif
ifneq ($(filter new-stack,$(MAKECMDGOALS)),)
  ifeq ($(FROM),)
    $(error make new-stack needs FROM=<example> (examples/Pulumi.<example>.yaml, or dev), e.g. FROM=dev)
  endif
endif

plan: venv ## offline plan of STACK (no AWS account, no Pulumi CLI); FORMAT=json, OUT=dir
	@$(PY) -m tools.plan --stack $(STACK) --format $(FORMAT) $(if $(OUT),--out $(OUT))

diff: venv ## what an edit of STACK does to running work: FILE=edited file or BASE=git ref; exit 3 if it disrupts
	@$(PY) -m tools.diff --stack $(STACK) $(if $(FILE),--file $(FILE)) $(if $(BASE),--base $(BASE)) --format $(FORMAT)

timeline: venv ## STACK over time: capacity windows, run phases, cost, warnings; OUT=dir (SVG, JSON), FROM=time
	@$(PY) -m tools.timeline --stack $(STACK) $(if $(OUT),--out $(OUT)) $(if $(FROM),--from $(FROM)) --format $(FORMAT)

cost: venv ## what STACK costs an hour and a month (JSON); LIVE=1 asks the AWS Price List API
	@$(PY) -m tools.cost --stack $(STACK) $(if $(LIVE),--live)

preflight: venv ## ask the AWS account whether STACK can run (quotas, offerings, reservations); needs credentials
	@$(PY) -m tools.preflight --stack $(STACK)

new-stack: venv ## start your stack Pulumi.<STACK>.yaml from the example <FROM> (LOWER=: layered)
	@$(PY) -m tools.newstack $(STACK) --from $(FROM) $(if $(LOWER),--lower-stack $(LOWER))

snapshot: venv ## write tests/snapshots/<STACK>/: make test then holds your stack to its URNs and objects
	@$(PY) -m tools.snapshot --stack $(STACK)

test: lint typecheck pytest ## lint, type check and the whole test suite: what CI runs (.ci/run)

# The quick loop while editing. Left out, as slow: the type check, the workflow checks, the
# plan/ and launch/ tests (they plan every example stack, or launch its jobs) and the few unit
# and repository tests that plan example stacks too: test_policy_crossguard.py (the real policy
# pack over every example's plan), test_deploy_routing.py and test_timeouts.py (the CI routing
# with each deploy's time budget, from the offline plans); together over half of the unit and
# repository tests' time; and `make plan` run for real, and each layered example stack's CI route
# checked against its aws layer's plan. `make test` runs them all.
test-fast: lint-code ## lint-code, and the unit and repository tests: under a minute on 2 cores
	$(VENV)/bin/pytest -q -n auto tests/unit tests/repo --ignore=tests/unit/test_policy_crossguard.py \
	  --ignore=tests/repo/test_deploy_routing.py --ignore=tests/repo/test_timeouts.py \
	  --deselect tests/repo/test_makefile.py::test_make_plan_json_of_the_real_venv_is_json_only \
	  --deselect tests/repo/test_delivery.py::test_every_layered_example_stack_goes_to_its_layers_job_on_the_right_runner

# Workflows: structure against the GitHub workflow schema (vendored in check-jsonschema, no
# network), security with zizmor's offline audits (unpinned actions, injection, permissions...).
lint: lint-code ## lint-code, and the CI workflows (schema, zizmor's security audits)
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows $(WORKFLOWS)
	$(VENV)/bin/zizmor --offline --no-progress --quiet .github/workflows

lint-code: venv ## ruff: lint and format check of the Python code
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

pytest: venv launch-deps checkov ## the whole test suite (the launch-chain harness only with LAUNCH_HARNESS=1)
	$(VENV)/bin/pytest -q -n auto

diagram: venv ## regenerate the README's architecture diagram from the dev stack's plan
	$(PY) -m tools.diagram --config-file Pulumi.dev.yaml --update-readme

schema: venv ## regenerate schema/stack-config.schema.json and Pulumi.yaml's config: from the config models
	$(PY) -m tools.schema --write

docs: venv ## regenerate the generated parts of docs/ (configuration reference, recipe table, stack needs)
	$(PY) -m tools.docs

typecheck: venv ## mypy
	$(VENV)/bin/mypy

# ---------------------------------------------------------------- virtualenvs

venv: $(VENV)/.installed ## create .venv with the pinned requirements (Pulumi.yaml names it as the virtualenv)

checkov: $(CHECKOV_VENV)/.installed ## create .venv-checkov for the pod security tests

# The launch-chain harness (tests/launch) runs real sshd, Open MPI and PyTorch in network and
# mount namespaces, so only as root, and only when asked: with LAUNCH_HARNESS=1 (.ci/run) it
# installs the Debian tools when missing and the harness's PyTorch (requirements-launch.txt; CPU
# wheel), and fails when it cannot (not root, no network namespaces) rather than skip. Without
# it (a workstation, a GitHub-hosted runner) nothing is installed: one line says so, and the
# harness skips.
LAUNCH_TOOLS := ip unshare setpriv mpirun sshd ssh-keygen
launch-deps: venv ## LAUNCH_HARNESS=1 (as root): install what the launch-chain harness needs; else say it skips
	@if [ "$(LAUNCH_HARNESS)" != 1 ]; then \
	  echo "launch-chain harness: skipped, nothing installed (LAUNCH_HARNESS=1 make test, as root, installs openssh-server, Open MPI and PyTorch CPU and runs it)" >&2; exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then echo "launch-chain harness: LAUNCH_HARNESS=1 needs root (it installs Debian packages and makes network namespaces)" >&2; exit 1; fi; \
	missing=; for t in $(LAUNCH_TOOLS); do command -v $$t >/dev/null 2>&1 || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing the launch-chain harness's tools (missing:$$missing)"  >&2; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	    openssh-server openmpi-bin iproute2 util-linux >/dev/null; \
	fi; \
	if ip netns add ltprobe$$$$ 2>/dev/null && ip netns del ltprobe$$$$; then $(MAKE) --no-print-directory $(VENV)/.launch; \
	else echo "launch-chain harness: LAUNCH_HARNESS=1 but no network namespace can be made here" >&2; exit 1; fi

$(VENV)/.installed: requirements.txt requirements-dev.txt
	@echo "setting up $(VENV): installing the pinned requirements (first run or changed requirements, 1-2 minutes)" >&2
	@test -x $(PY) || $(PYTHON) -m venv $(VENV) >&2
	@$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt \
	  > $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log >&2; echo "pip install failed (log: $(VENV)/install.log)" >&2; exit 1; }
	@touch $@
	@echo "$(VENV) is ready" >&2

$(VENV)/.launch: $(VENV)/.installed requirements-launch.txt
	@echo "installing the launch-chain harness's PyTorch (requirements-launch.txt)" >&2
	@$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-launch.txt \
	  > $(VENV)/install-launch.log 2>&1 || { cat $(VENV)/install-launch.log >&2; echo "pip install failed (log: $(VENV)/install-launch.log)" >&2; exit 1; }
	@touch $@

# checkov in a virtualenv of its own: its pins clash with requirements.txt (requirements-checkov.txt).
$(CHECKOV_VENV)/.installed: requirements-checkov.txt
	@echo "setting up $(CHECKOV_VENV): installing checkov for the pod security tests (first run or changed pin, about 1 minute)" >&2
	@test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV) >&2
	@$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-checkov.txt \
	  > $(CHECKOV_VENV)/install.log 2>&1 || { cat $(CHECKOV_VENV)/install.log >&2; echo "pip install failed (log: $(CHECKOV_VENV)/install.log)" >&2; exit 1; }
	@touch $@
	@echo "$(CHECKOV_VENV) is ready" >&2

clean: ## remove the virtualenvs and caches
	rm -rf $(VENV) $(CHECKOV_VENV) .mypy_cache .pytest_cache .ruff_cache
