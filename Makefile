# rxl: the patch series' cores, their tests, and the guest harness.
#
#   make test            set up .venv, build the C cores, run the test suite
#   make run SRC=DIR     the main job: patched vs pristine kernel in a guest
#   make bench-core      userspace cost of the cores (callgrind, timings)
#   make core-check      compile the cores alone, kernel-style warnings

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
RXL := $(VENV)/bin/rxl
SRC ?= /usr/src
BUILD ?= build
CC ?= cc

.PHONY: all setup core core-check test run doctor bench-core clean

all: test

# The virtual environment, with the package (editable) and its test extras.
# Re-made only when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

setup: $(VENV)/.installed

# The userspace library of the cores; rebuilt only when a source changes.
core: setup
	$(PY) -m rxl.decide.core

# Each core on its own, with and without INVARIANTS, as the kernel would;
# the sources and flags are rxl.decide.core's, the same as the library's.
core-check: setup
	CC="$(CC)" $(PY) -m rxl.decide.core --check

test: setup core core-check
	$(PY) -m pytest

run: setup
	$(RXL) doctor --install
	$(RXL) run --src $(SRC)

doctor: setup
	$(RXL) doctor

bench-core: setup
	$(PY) -m rxl.bench.core

clean:
	rm -rf $(BUILD)
