# The README's two commands: `make demo` and `make test`. Both run scripts/setup.sh first.
# `make bench` also installs the benchmark's own packages (scripts/setup_bench.sh) and runs it.
PYTHON ?= python3
export PYTHON

.PHONY: setup demo test bench
setup:
	bash scripts/setup.sh
demo: setup
	$(PYTHON) -m coopjit demo
test:
	bash scripts/test.sh
bench: setup
	bash scripts/setup_bench.sh
	$(PYTHON) -m coopjit bench

.PHONY: sanitize wheel
# The C++ core built with clang-22 under AddressSanitizer + UndefinedBehaviorSanitizer, and the
# tests that reach every C++ module run against it (scripts/sanitize.sh).
sanitize:
	bash scripts/sanitize.sh
# A self-contained manylinux wheel (LLVM linked statically) in dist/, tested from a fresh venv.
wheel:
	bash scripts/wheel.sh
.PHONY: stubs
# Regenerates the type stubs of the compiled module (python/coopjit/_core.pyi).
stubs:
	bash scripts/stubs.sh
