# Every target bootstraps its own virtualenv, so a fresh clone needs only Python 3.11 (and, for
# the Spark parts, Java 17). The stamp file makes the install idempotent: it is redone only when
# setup.cfg or pyproject.toml change.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-test

.PHONY: run test bench venv clean check-python

check-python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found; install Python 3.11 or set PYTHON=/path/to/python3.11" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || { echo "error: Python >= 3.11 required, found $$($(PYTHON) --version 2>&1)" >&2; exit 1; }
	@$(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || { echo "error: $(PYTHON) lacks venv/ensurepip (on Debian: apt-get install python3-venv)" >&2; exit 1; }

$(PY): | check-python
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): $(PY) setup.cfg pyproject.toml
	$(PY) -m pip install --quiet -e '.[test]' || { echo "error: installing the project into $(VENV) failed (is the package index reachable?)" >&2; exit 1; }
	@touch $@

venv: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/elasticmq-py local-cluster --nodes 3

# Three workers, each given one test as it finishes one (two waiting at most), in
# tests/conftest.py's order: long tests first. Three on two cores: the process tests spend much
# of their time waiting on clusters (elections, restarts, load windows), and with two workers
# the cores stood idle for about 40% of the run. One at a time: xdist's default hands each
# worker a share of the suite up front, and with two at a time a worker's queue still grows by
# one test per test it finishes, which left one worker running its queue after the others had
# finished.
test: $(STAMP)
	ELASTICMQ_PY_FROZEN=1 $(PY) -m pytest -n 3 --maxschedchunk 1 -q

# Many seeded chaos schedules (tests/chaos): random scenario, timings and victims, policies
# majority, none, one and all, a summary table at the end. `make chaos RUNS=50 SEED=7` replays a schedule;
# the seed is printed at the start. GROUPS=3: clusters of three replication groups.
.PHONY: chaos
RUNS ?= 20
SEED ?= $(shell date +%s)
GROUPS ?= 1
chaos: $(STAMP)
	ELASTICMQ_PY_FROZEN=1 $(PY) -m tests.chaos --runs $(RUNS) --seed $(SEED) --groups $(GROUPS)

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) build *.egg-info
