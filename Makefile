# pyunwind: `make demo` shows it working, `make test` builds and runs every test.
SHELL := /bin/bash
CARGO ?= cargo
PYUNWIND_CACHE ?= $(HOME)/.cache/pyunwind
export PYUNWIND_CACHE
GDBINIT ?= $(HOME)/.gdbinit
GDB_LINE := source $(CURDIR)/gdb-scripts/pyunwind-gdb.py
DEMO_PYTHON ?= /usr/bin/python3.11

.PHONY: build demo test unit integration lint bench install uninstall clean

# The CLI is built without the `python` feature (it must not need libpython symbols); the
# extension module with it. Both builds write target/release/libpyunwind.so, so the module is
# copied to _pyunwind.so after the second.
build:
	$(CARGO) build --release --bin pyunwind
	$(CARGO) build --release --lib --features python
	cp target/release/libpyunwind.so target/release/_pyunwind.so

demo: build
	@bash tools/demo.sh $(DEMO_PYTHON)

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --release --all-targets -- -D warnings
	$(CARGO) clippy --release --lib --features python -- -D warnings

unit:
	$(CARGO) test --release

integration: build
	@py=$$(bash tools/test-env.sh | tail -n 1) && \
	  "$$py" -m pytest -q -p no:cacheprovider tests/integration

test: build lint unit integration

bench: build
	bash bench/setup.sh
	python3 bench/run.py
	python3 bench/asyncio_bench.py

install: build
	@touch $(GDBINIT)
	@grep -qxF '$(GDB_LINE)' $(GDBINIT) || echo '$(GDB_LINE)' >> $(GDBINIT)
	@echo "pyunwind: gdb loads it from $(GDBINIT)"

uninstall:
	@if [ -f $(GDBINIT) ]; then grep -vxF '$(GDB_LINE)' $(GDBINIT) > $(GDBINIT).tmp || true; mv $(GDBINIT).tmp $(GDBINIT); fi
	@echo "pyunwind: removed from $(GDBINIT)"

clean:
	$(CARGO) clean
