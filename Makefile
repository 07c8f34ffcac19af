# nccl-doctor: the whole set-up on a fresh machine is `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
UV := $(VENV)/bin/uv
# --compile-bytecode: where PYTHONDONTWRITEBYTECODE is set, every process would compile torch again
UV_PIP := $(UV) pip install -q --python $(PY) --compile-bytecode

.PHONY: help install demo test lint typecheck docs bench fuzz zoo clean

help: ## list the targets
	@grep -E '^[a-z]+:.*##' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

MULTIHOST_PACKAGES := slurmctld slurmd slurm-client munge openssh-server

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	# uv installs where it can (pip's resolver alone took ~60 s of this 2-core machine's CPU,
	# uv ~20 s); pip as before where uv cannot be had or cannot install (offline: uv does not
	# read pip's local indexes). Torch comes from pip's find-links (a local CPU wheel here).
	test -x $(UV) || $(PY) -m pip install -q --disable-pip-version-check uv || true
	$(PY) -c "import torch" 2>/dev/null || { links=$$($(PY) -m pip config get global.find-links \
	  2>/dev/null); test -x $(UV) && $(UV_PIP) $${links:+$$(printf -- "--find-links %s " $$links)} \
	  torch==2.13.0; } || $(PY) -m pip install -q --disable-pip-version-check torch==2.13.0
	{ test -x $(UV) && $(UV_PIP) -e ".[test,torch,docs]"; } || \
	  $(PY) -m pip install -q --disable-pip-version-check -e ".[test,torch,docs]"
	command -v tmux >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq >/dev/null && apt-get install -y -qq tmux >/dev/null; } || \
	  echo "note: tmux is not installed; the real-terminal TUI test will skip"
	# the incident report's browser tests (tests/report): Debian's headless Chromium
	command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	  --no-install-recommends chromium >/dev/null; } || \
	  echo "note: chromium is not installed; the report's browser tests will skip"
	# the multi-host tests' cluster (tests/multihost): SLURM, munge and sshd, started by hand
	command -v slurmctld >/dev/null && command -v sshd >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	  $(MULTIHOST_PACKAGES) >/dev/null; } || \
	  echo "note: SLURM/sshd are not installed; the multi-host cluster tests will skip"
	touch $(STAMP)

install: $(STAMP) ## create .venv: the project (editable), torch 2.13 CPU, the test and docs extras

demo: install ## preflight, then a small CPU job with an injected hang, triaged
	$(BYTECODE) >/dev/null
	$(PY) -m doctor.demo

SOURCES := doctor checks playbooks tests benchmarks tools docs/examples

# Where PYTHONDONTWRITEBYTECODE is set (this machine, CI), no process writes our modules'
# bytecode, so every CLI run and rank compiles what it imports (0.17 s of a triage's 0.47 s
# CPU); compiled once here, they are read. A file edited since is compiled as before.
BYTECODE := $(PY) -m compileall -q -j 0 doctor checks playbooks tests

# The tests that start no job run in two processes (pytest-xdist: 259 s became 142 s); the
# real jobs (marked slow) after them in one, since each is timed against the CPU it gets.
test: lint ## the full suite (the lint gates, then pytest: its fast part in parallel)
	$(BYTECODE) >/dev/null
	$(VENV)/bin/pytest -q -m "not slow" -n 2
	$(VENV)/bin/pytest -q -m slow

zoo: install ## every case of the bug zoo (tests/zoo), three looks each; make test looks once at each
	NCCL_DOCTOR_ZOO=all $(VENV)/bin/pytest -q tests/zoo

fuzz: install ## the fuzz tests at length (1,000 inputs per reader test); prints inputs tried and failures
	$(VENV)/bin/pytest -q -m fuzz --hypothesis-profile=fuzz tests/fuzz

lint: install ## ruff check, ruff format --check, mypy (strict on the pure core) and the docs site
	$(VENV)/bin/ruff check $(SOURCES)
	$(VENV)/bin/ruff format --check $(SOURCES)
	$(MAKE) --no-print-directory typecheck
	$(MAKE) --no-print-directory docs

docs: install ## build the docs site into build/site; --strict: a broken link or anchor fails
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

TYPECHECK := build/typecheck

# mypy cannot follow setuptools' package-dir mapping (checks/ installs as doctor.checks), so
# it reads a tree of links laid out as the wheel installs: doctor/*, doctor/checks,
# doctor/playbooks. Errors name doctor/checks/x.py for checks/x.py.
typecheck: install ## mypy over the package as it installs ([tool.mypy] in pyproject.toml)
	rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)/doctor
	for f in doctor/*; do ln -s ../../../$$f $(TYPECHECK)/doctor/; done
	ln -s ../../../checks $(TYPECHECK)/doctor/checks
	ln -s ../../../playbooks $(TYPECHECK)/doctor/playbooks
	cd $(TYPECHECK) && $(abspath $(VENV))/bin/mypy --config-file $(abspath pyproject.toml) -p doctor

bench: install ## every benchmark under benchmarks/ (installs NVIDIA's wrapper to compare)
	$(PY) -m pip install -q --disable-pip-version-check -e ".[test,torch,compare]"
	# NVIDIA's package pulls the deprecated `pynvml` distribution, whose import-time
	# FutureWarning breaks torch imports under our warnings-as-errors; nvidia-ml-py provides
	# the same `pynvml` module.
	$(PY) -m pip uninstall -q -y pynvml 2>/dev/null || true
	$(PY) -m pip install -q --disable-pip-version-check --force-reinstall --no-deps nvidia-ml-py
	status=0; for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || status=1; done; \
	exit $$status

clean: ## remove the virtual environment
	rm -rf $(VENV)
