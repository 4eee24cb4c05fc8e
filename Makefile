# The user's interface. `make demo` and `make test` are the two commands; both set up first.
PY := .venv/bin/python
STAMP := .venv/.installed
# The demo's switches: p4switch (this project's target) or bmv2 (simple_switch_grpc and
# p4c-bm2-ss on PATH): `make demo TARGET=bmv2`.
TARGET ?= p4switch

.PHONY: setup test demo bench report lint clean

setup:
	@bash scripts/setup.sh

test: setup
	$(PY) -m pytest -q

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
