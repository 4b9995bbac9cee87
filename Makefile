# The two commands a new user needs: `make demo` and `make test`. Both set everything up first.
.PHONY: setup setup-test demo test test-slow bench studio clean

setup:
	bash scripts/setup.sh

setup-test:
	bash scripts/setup.sh --browser

demo: setup
	.venv/bin/rlvr demo

test: setup-test
	.venv/bin/python -m pytest -q

test-slow: setup-test
	.venv/bin/python -m pytest -q -m slow

studio: setup
	.venv/bin/rlvr studio

clean:
	rm -rf demo_out .pytest_cache
