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
