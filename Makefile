# pyunwind: `make demo` shows it working, `make test` builds and runs every test.
SHELL := /bin/bash
CARGO ?= cargo
PYUNWIND_CACHE ?= $(HOME)/.cache/pyunwind
export PYUNWIND_CACHE
GDBINIT ?= $(HOME)/.gdbinit
LLDBINIT ?= $(HOME)/.lldbinit
# lldb versions the tests drive, one after the other (their Python packages conflict). 24 is
# LLVM's main branch (Debian experimental's snapshot, in a private root: tools/lldb-root.sh), the
# first whose callbacks into the frame provider take no API lock: only the provider's own test
# files, its JIT file and the arm64 cores' file run there (LLDB_PROVIDER_ONLY).
LLDB_VERSIONS ?= 19 22 24
LLDB_PROVIDER_ONLY ?= 24
export LLDB_VERSIONS
DEMO_PYTHON ?= /usr/bin/python3.11

.PHONY: build wheel wheel-x86_64 wheel-aarch64 demo pythons arm64 test unit integration integration-lldb lint bench fuzz install uninstall clean

# The CLI and the extension module in one build, with the `python` feature: the crate compiles
# once per change, not once without it for the CLI and once more with it for the module. The
# CLI still needs no libpython symbols: pyo3 is built for an extension module (it links no
# libpython) and the binary uses none of `src/python`, which the linker drops
# (tests/integration/test_packaging_checkout.py checks that it references no `Py*` symbol). The
# unit tests and clippy use the same feature, so no build of the crate without it overwrites
# target/release/libpyunwind.so (a cdylib's file name carries no hash of its features). The
# module is copied to target/release/_pyunwind.so, where the scripts look for it.
build:
	$(CARGO) build --release --features python --bin pyunwind --lib
	# A copy then a rename: gdb and lldb processes that have the module loaded keep the old file.
	cp target/release/libpyunwind.so target/release/_pyunwind.so.tmp && mv -f target/release/_pyunwind.so.tmp target/release/_pyunwind.so

# The pip packages (abi3, manylinux) in target/wheels, built by maturin from the test venv
# (tools/test-env.sh installs it): x86-64 in its own target dir, apart from `make build`, and
# aarch64 by tools/cross-aarch64.sh. That target dir is kept in $(PYUNWIND_CACHE), as the
# aarch64 one is: a fresh clone then compiles only the crate, not its dependencies again.
# A new WHEEL_TARGET starts as a copy of `make build`'s target/release (when there is one): the
# same dependencies, features and profile, so only pyo3 and the crate compile there (about 105
# CPU-seconds instead of the 223 of a build from nothing, beside the integration tests).
# WHEEL_PYTHON: the interpreter maturin builds the x86-64 wheel for (abi3: any CPython >= 3.8
# runs it); empty, maturin's choice. pyo3's build script keys its output on that interpreter's
# path (maturin passes it as PYO3_PYTHON), so tools/wheel-x86_64.sh names the one `pip install
# <checkout>` builds with in test_packaging_checkout.py, which builds in WHEEL_TARGET too: that
# build then finds the crate compiled, instead of compiling it once more.
WHEEL_TARGET := $(PYUNWIND_CACHE)/wheel-target
WHEEL_PYTHON ?=
wheel: wheel-x86_64 wheel-aarch64

wheel-x86_64:
	@[ -d $(WHEEL_TARGET)/release ] || [ ! -d target/release ] || { \
	  rm -rf $(WHEEL_TARGET)/release.tmp && mkdir -p $(WHEEL_TARGET) && \
	  cp -a --reflink=auto target/release $(WHEEL_TARGET)/release.tmp && \
	  mv $(WHEEL_TARGET)/release.tmp $(WHEEL_TARGET)/release; }
	@py=$$(bash tools/test-env.sh | tail -n 1) && \
	  CARGO_TARGET_DIR=$(WHEEL_TARGET) "$$(dirname "$$py")/maturin" build --release \
	    $(if $(WHEEL_PYTHON),--interpreter "$(WHEEL_PYTHON)") --out target/wheels

wheel-aarch64:
	@py=$$(bash tools/test-env.sh | tail -n 1) && \
	  bash tools/cross-aarch64.sh wheel "$$(dirname "$$py")/maturin"

demo: build
	@bash tools/demo.sh $(DEMO_PYTHON)

# Debian sid's python3.14/3.15 (JIT compiled in) and a free-threaded 3.13, in $(PYUNWIND_CACHE)/pythons:
# downloaded and built once (about 4 minutes), then reused.
pythons:
	bash tools/pythons.sh

# Debian's arm64 python3.11 (bookworm) and python3.14/3.15 (sid), each root with its library
# closure, in $(PYUNWIND_CACHE)/arm64, run under qemu-user by tests/integration/test_arm64.py,
# and Debian's arm64 gdb 13 and lldb 19 (bookworm) and lldb 22 (sid) in roots of their own, run
# by test_arm64_native_debuggers.py (installs qemu-user, gdb-multiarch and the cross gcc when
# missing; about 3 minutes once, then reused).
arm64:
	bash tools/arm64.sh

lint:
	$(CARGO) fmt --check
	# No file of src/ imports one that imports it back (tools/import_cycles.py says which).
	python3 tools/import_cycles.py src
	# Each layer of src/ uses only the layers DESIGN.md lists before it (tools/layer_order.py
	# names each file:line that reaches up).
	python3 tools/layer_order.py src
	# No function over 150 lines (the version layout tables aside), no file over 800
	# (tools/sizes.py names each).
	python3 tools/sizes.py src pylib lldb-scripts gdb-scripts
	# One clippy run for every target and both builds: the python feature only adds
	# src/python (lib.rs), so the build with it holds all of the build without it.
	$(CARGO) clippy --release --all-targets --features python -- -D warnings
	# The fuzz targets build on stable without libFuzzer (`make fuzz` needs nightly): checked
	# here so that a change of the crate's API cannot leave them broken until the next fuzz run,
	# in our target dir, where most of their dependencies are already checked.
	CARGO_TARGET_DIR=$(CURDIR)/target $(CARGO) check --release --manifest-path fuzz/Cargo.toml

unit: pythons
	$(CARGO) test --release --features python

# The lldb tests (test_lldb*.py) run under integration-lldb, once per lldb version.
# pytest-xdist spreads the test files over PYTEST_WORKERS processes: three on a 2-core machine,
# because a test waits for much of its time (a scenario settling, gcore, a debugger's start):
# test_asyncio's graph cases used 65% of two cores with two workers, and took 30% less time
# with four. --dist loadfile keeps each file on one worker: its
# module fixtures (costly cores, the pip venvs at a fixed path) are made once. (--dist loadgroup
# does not group under pytest 9: xdist 3.8 renames `item._nodeid`, which pytest 9 no longer reads.)
# Files that take minutes with few tests are marked long_file and run first (conftest.py):
# xdist's own order, by number of tests, ran them last, on one worker after the other had run
# out of work. --durations and conftest's summary (each file's and each worker's time) show in
# the log where the time goes.
PYTEST_WORKERS ?= 3
PYTEST_DURATIONS ?= 25
PYTEST := -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadfile --durations=$(PYTEST_DURATIONS)
# test_lldb.py holds most lldb tests: those files spread test by test. test_lldb_sources (the pip
# venvs at a fixed path), test_lldb_arm64 (qemu cores made once per module), test_lldb_arm64_live
# (lldb on qemu's gdb stub) and test_lldb_dap (one scenario and core per interpreter) run by file.
PYTEST_LOAD := -m pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist load --durations=$(PYTEST_DURATIONS)
# The x86-64 pip package (minutes of compiling on a fresh machine) builds in the background
# (tools/wheel-x86_64.sh) while the test files that do not need it run. The files that do
# (marked after_wheels) run last and wait for it; the lldb tests run after it ended. The aarch64
# one builds at the lowest priority (tools/wheel-aarch64.sh; `make test` starts it first thing):
# the files that need it (marked aarch64_wheel) run after the lldb tests, which leave a fifth of
# the CPU to its build. Its own foreground run then checks that it was built from these sources
# (seconds). tests/integration/abi_pyc.py byte-compiles the packages installed for other ABIs
# with their own interpreters, once (pip compiled them for the test venv's 3.11 only).
integration: build pythons arm64
	bash tools/prefetch.sh start wheel-x86_64
	bash tools/prefetch.sh start-idle wheel-aarch64
	@py=$$(bash tools/test-env.sh | tail -n 1) && \
	  "$$py" tests/integration/abi_pyc.py && \
	  "$$py" $(PYTEST) tests/integration --ignore-glob='*/test_lldb*.py' -m 'not aarch64_wheel'
	bash tools/prefetch.sh wait wheel-x86_64
	$(MAKE) integration-lldb
	bash tools/prefetch.sh wait wheel-aarch64
	bash tools/wheel-aarch64.sh
	@py=$$(bash tools/test-env.sh | tail -n 1) && \
	  "$$py" $(PYTEST) tests/integration --ignore-glob='*/test_lldb*.py' -m aarch64_wheel

# tools/lldb-env.sh installs each lldb in turn (removing the other's Python package) and fails
# the run when one cannot be installed (after `make test`'s prefetch, tools/lldb.sh, a switch
# between installed .debs). The frame provider exists from lldb 22 on: its lock test
# and the lldb-dap tests run there (test_lldb_arm64 checks it on 22 only, inside the file); on
# the versions in LLDB_PROVIDER_ONLY, only they, test_lldb_jit and test_lldb_arm64 (where lldb
# 24 differed: the frames it keeps as it prints a stop, the modules it makes of no file).
# The x86-64 wheel as tools/wheel-x86_64.sh builds it (for test_lldb_sources' `pip install
# <checkout>`'s interpreter): after `make integration`'s, seconds.
integration-lldb: build arm64
	bash tools/wheel-x86_64.sh
	@py=$$(bash tools/test-env.sh | tail -n 1) && \
	  for v in $(LLDB_VERSIONS); do \
	    lldb=$$(bash tools/lldb-env.sh $$v) || exit 1; \
	    echo "== lldb $$v: $$lldb"; \
	    lock=$$([ $$v -ge 22 ] && echo tests/integration/test_lldb_lock.py tests/integration/test_lldb_provider.py); \
	    dap=$$([ $$v -ge 22 ] && echo tests/integration/test_lldb_dap.py); \
	    if [[ " $(LLDB_PROVIDER_ONLY) " == *" $$v "* ]]; then \
	      PYUNWIND_LLDB=$$lldb "$$py" $(PYTEST) $$lock $$dap tests/integration/test_lldb_jit.py tests/integration/test_lldb_arm64.py || exit 1; \
	      continue; \
	    fi; \
	    PYUNWIND_LLDB=$$lldb "$$py" $(PYTEST_LOAD) tests/integration/test_lldb.py \
	      tests/integration/test_lldb_robust.py tests/integration/test_lldb_crash.py \
	      tests/integration/test_lldb_why.py tests/integration/test_lldb_jit.py \
	      tests/integration/test_lldb_greenlets.py tests/integration/test_lldb_thread_names.py \
	      tests/integration/test_lldb_heap.py tests/integration/test_lldb_arrays.py \
	      tests/integration/test_lldb_subinterpreters.py $$lock \
	      || exit 1; \
	    PYUNWIND_LLDB=$$lldb "$$py" $(PYTEST) tests/integration/test_lldb_sources.py \
	      tests/integration/test_lldb_arm64.py tests/integration/test_lldb_arm64_live.py $$dap \
	      || exit 1; \
	  done

# On a fresh machine `make pythons` and the downloads the integration tests need (arm64 roots,
# the test venv, torch, the lldb versions) run in the background while the crate builds and lints
# (tools/prefetch.sh); the unit tests' `make pythons` waits for the first. The aarch64 wheel
# starts building too, at the lowest priority, on what CPU the others leave (`make integration`
# waits for it after the lldb tests). Where everything is in place this costs seconds.
test:
	bash tools/prefetch.sh start
	bash tools/prefetch.sh start-idle wheel-aarch64
	$(MAKE) build lint unit
	bash tools/prefetch.sh wait
	$(MAKE) integration

# Every benchmark runs even when one before it failed, so that one run shows every problem
# (each ends with a `bench: MISSED|NOT MEASURED|FAILED: ...` line per problem, and exits 1 if
# it had any, bench/verdicts.py); then the target fails if any of them did, naming them. The
# second run.py: --native against pystack on pyenv 3.12 (symbols) too, at depth 5000 (issue 27).
# torch_native.py: --native on a PyTorch training step, live and from a core, against pystack
# and py-spy (issue 39; tools/torch.sh installs torch the first time, about 100 s and 5 GB).
# record_cost.py: what `record` at 100 Hz costs a 64-thread CPU-bound process in throughput,
# beside py-spy record (issue 52).
bench: build pythons
	bash bench/setup.sh
	@failed=(); \
	bench() { echo "$$*"; "$$@" || failed+=("$$* (exit $$?)"); }; \
	bench python3 bench/run.py; \
	bench python3 bench/run.py --python "$$(pyenv root 2>/dev/null || echo $$HOME/.pyenv)/versions/3.12.1/bin/python3.12" \
	  --depths 5000 --only pystack-native,ours-native; \
	bench python3 bench/asyncio_bench.py; \
	bench python3 bench/greenlets.py; \
	bench env PYUNWIND_LLDB="$$(bash tools/lldb-env.sh 22 | tail -n 1)" python3 bench/huge_stack.py; \
	bench python3 bench/versions_bench.py; \
	bench python3 bench/jit_unwinder_bench.py; \
	bench python3 bench/many.py; \
	bench python3 bench/tree.py; \
	bench python3 bench/why_bench.py; \
	bench python3 bench/heap.py --big; \
	bench python3 bench/torch_native.py; \
	bench python3 bench/record_cost.py; \
	if [ "$${#failed[@]}" -gt 0 ]; then \
	  printf 'bench: failed: %s\n' "$${failed[@]}" >&2; exit 1; \
	fi; \
	echo "bench: every benchmark passed"

# libFuzzer over memory images of real stops, then 10,000 corrupted real cores (x86-64 gcore
# cores, and arm64 qemu cores from the arm64 roots) through the CLI, gdb and lldb
# (tools/fuzz/run.sh; FUZZ_SECONDS, FUZZ_CORES, FUZZ_SEED).
fuzz: build pythons arm64
	bash tools/fuzz/run.sh

# The same as `pyunwind install-gdb` / `install-lldb` of a pip install (one implementation, in
# src/cli/install.rs), with this checkout's scripts.
install: build
	@target/release/pyunwind install-gdb --init-file $(GDBINIT)
	@target/release/pyunwind install-lldb --init-file $(LLDBINIT)

uninstall:
	@target/release/pyunwind uninstall-gdb --init-file $(GDBINIT)
	@target/release/pyunwind uninstall-lldb --init-file $(LLDBINIT)

clean:
	$(CARGO) clean
