# The user's interface. `make demo` and `make test` are the two commands; both set up first.
PY := .venv/bin/python
STAMP := .venv/.installed
# The demo's switches: p4switch (this project's target) or bmv2 (simple_switch_grpc and
# p4c-bm2-ss on PATH): `make demo TARGET=bmv2`.
TARGET ?= p4switch

.PHONY: setup test demo bench report lint clean

setup:
	@bash scripts/setup.sh

# The suite in two runs: the tests that need no namespace, Mininet, eBPF program or long
# fabric (tests/README.md's markers) on two workers, a test file per worker at a time; then
# the others one at a time, no two fabrics sharing the cores. Fails if either run fails.
MARKED := netns or mininet or ebpf or slow
test: setup
	$(PY) -m pytest -q -n 2 --dist loadfile -m "not ($(MARKED))"; quick=$$?; \
	$(PY) -m pytest -q -m "$(MARKED)"; marked=$$?; \
	exit $$(( quick ? quick : marked ))

demo: setup
	$(PY) mininet/demo.py --target $(TARGET)

bench: setup
	$(PY) bench/run_all.py

# docs/ from the tables and plots the last demo, sim and bench runs recorded in out/
report: setup
	$(PY) -m results

lint: setup
	.venv/bin/ruff check .

clean:
	rm -rf .venv build out
