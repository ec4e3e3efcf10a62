# The README's two commands: `make demo` and `make test`. Both run scripts/setup.sh first.
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
	$(PYTHON) benchmarks/bench_gemm.py
