# rxl: the patch series' cores, their tests, and the guest harness.
#
#   make test            set up .venv, build the C cores, run the test suite
#   make run [SRC=DIR]   the main job: patched vs pristine kernel in a guest
#                        (no SRC: the base is fetched; RUN_ARGS: more rxl run options)
#   make bench-core      userspace cost of the cores (callgrind, timings)
#   make core-check      compile the cores alone, kernel-style warnings
#   make fuzz            libFuzzer on each core, FUZZ_SECONDS each (FUZZ_RUNS caps)
#   make fuzz-replay     the fuzz seed corpus once (part of make test)
#   make test-asan       the test suite against the cores built with ASan+UBSan
#   make test-deep       the C-vs-model properties, 10,000 examples each

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
RXL := $(VENV)/bin/rxl
SRC ?=
RUN_ARGS ?=
BUILD ?= build
CC ?= cc

# Fuzzing and sanitizers: clang-16 with libclang-rt-16-dev (Debian).
FUZZ_SECONDS ?= 60
FUZZ_RUNS ?= 0
FUZZ_TARGETS ?= deal spread learn
SAN_CC ?= clang-16
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer -shared-libsan

.PHONY: all setup core core-check test run doctor bench-core clean \
	fuzz fuzz-replay test-asan test-deep

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

test: setup core core-check fuzz-replay
	$(PY) -m pytest

# Each target for FUZZ_SECONDS (or FUZZ_RUNS executions), one after another;
# logs and new inputs under $(BUILD)/fuzz, a finding fails the run.
fuzz: setup
	nice $(PY) -m rxl.decide.fuzz run --seconds $(FUZZ_SECONDS) --runs $(FUZZ_RUNS) \
	    $(FUZZ_TARGETS)

# The seed corpus and past findings, once each: seconds.  Skipped with one
# line when no clang with libFuzzer is installed (.ci/run installs it).
fuzz-replay: setup
	$(PY) -m rxl.decide.fuzz replay --skip-missing $(FUZZ_TARGETS)

# The library of the cores built with ASan+UBSan (RXL_CORE_CC, a build
# directory of its own; other C the tests build keeps $(CC)), and the whole
# suite in a Python that has the sanitizer runtime preloaded.  Leak
# checking is off: the interpreter's own allocations would drown it (the
# fuzz targets check the cores for leaks).
test-asan: setup
	@command -v $(SAN_CC) >/dev/null || { echo "test-asan: no $(SAN_CC)" \
	    "(apt-get install -y clang-16 libclang-rt-16-dev)"; exit 1; }
	RXL_CORE_CC="$(SAN_CC) $(SAN_FLAGS)" RXL_BUILD_DIR=$(abspath $(BUILD))/asan \
	    $(PY) -m rxl.decide.core
	RXL_CORE_CC="$(SAN_CC) $(SAN_FLAGS)" RXL_BUILD_DIR=$(abspath $(BUILD))/asan \
	LD_PRELOAD="$$($(SAN_CC) -print-file-name=libclang_rt.asan-x86_64.so)" \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    $(PY) -m pytest -p no:cacheprovider

# The C-vs-model properties with the "deep" hypothesis profile (10,000
# examples each); minutes, not part of make test.
test-deep: setup core
	RXL_HYPOTHESIS=deep $(PY) -m pytest -p no:cacheprovider \
	    $$(find tests/unit -name test_properties.py)

# SRC and the options are checked before anything is installed or built;
# a run against an SSH target (ssh:// or a named bhyve/box target) needs what
# --for ssh checks, not QEMU: rxl run --check-only --json says which.
# RUN_ARGS with --check-only or --dry-run: that rxl run alone, nothing installed.
RUN_ONLY := $(filter --check-only --dry-run,$(RUN_ARGS))
run: setup
ifneq ($(RUN_ONLY),)
	$(RXL) run $(if $(SRC),--src $(SRC)) $(RUN_ARGS)
else
	$(RXL) run --check-only $(if $(SRC),--src $(SRC)) $(RUN_ARGS)
	$(RXL) doctor --install --for $$($(RXL) run --check-only --json \
	    $(if $(SRC),--src $(SRC)) $(RUN_ARGS) | $(PY) -c \
	    'import json, sys; print(json.load(sys.stdin)["doctor"])')
	$(RXL) run $(if $(SRC),--src $(SRC)) $(RUN_ARGS)
endif

doctor: setup
	$(RXL) doctor

bench-core: setup
	$(PY) -m rxl.bench.core

clean:
	rm -rf $(BUILD)
