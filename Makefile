# The user's interface. `make demo` and `make test` are the two commands; both set up first.
PY := .venv/bin/python
STAMP := .venv/.installed

.PHONY: setup test demo bench lint clean

setup:
	@bash scripts/setup.sh

test: setup
	$(PY) -m pytest -q

demo: setup
	$(PY) mininet/demo.py

bench: setup
	$(PY) bench/run_all.py

lint: setup
	.venv/bin/ruff check .

clean:
	rm -rf .venv build out
